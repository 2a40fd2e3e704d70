#include "python_api.h"

#include <cstring>
#include <dlfcn.h>
#include <link.h>
#include <string>

namespace fs::agent::py {

namespace {

// A libpython loaded with RTLD_LOCAL (an embedding application) is not in the global scope:
// find it among the loaded objects and ask it directly (RTLD_NOLOAD: never load one).
void* findLibpython()
{
    std::string found;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
            const char* name = info->dlpi_name;
            if (name && std::strstr(name, "libpython3")) {
                *static_cast<std::string*>(data) = name;
                return 1;
            }
            return 0;
        },
        &found);
    return found.empty() ? nullptr : dlopen(found.c_str(), RTLD_LAZY | RTLD_NOLOAD);
}

template <class F> bool sym(void* h, const char* name, F& out)
{
    out = reinterpret_cast<F>(dlsym(h, name));
    return out != nullptr;
}

} // namespace

bool Api::resolve(const char*& why)
{
    void* h = RTLD_DEFAULT;
    if (!dlsym(h, "Py_IsInitialized")) {
        h = findLibpython();
        if (!h) {
            why = "no CPython in this process";
            return false;
        }
    }
    bool ok = sym(h, "Py_IsInitialized", isInitialized) && sym(h, "PyGILState_Ensure", gilEnsure) &&
              sym(h, "PyGILState_Release", gilRelease) && sym(h, "PyRun_StringFlags", runString) &&
              sym(h, "PyDict_New", dictNew) && sym(h, "PyDict_SetItemString", dictSetItemString) &&
              sym(h, "PyEval_GetBuiltins", getBuiltins) &&
              sym(h, "PyBytes_AsStringAndSize", bytesAsStringAndSize) &&
              sym(h, "Py_DecRef", decRef) && sym(h, "PyErr_Occurred", errOccurred) &&
              sym(h, "PyErr_Print", errPrint) && sym(h, "PyErr_Clear", errClear);
    if (!ok) {
        why = "the process's CPython lacks a function the bridge needs";
        return false;
    }
    if (!sym(h, "Py_IsFinalizing", isFinalizing)) sym(h, "_Py_IsFinalizing", isFinalizing);
    return true;
}

} // namespace fs::agent::py
