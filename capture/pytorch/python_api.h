// The few CPython C API functions the PyTorch bridge calls, found at run time in the process the
// agent was loaded into (the python executable's own symbols, or a libpython already loaded).
// The agent never links libpython: in a process without Python, resolve() fails and the bridge
// does not start.
#pragma once

#include <cstddef>

namespace fs::agent::py {

struct Object; // PyObject, opaque here
using ssize = long;

struct Api
{
    int (*isInitialized)() = nullptr;
    int (*isFinalizing)() = nullptr; // Py_IsFinalizing (3.13+) or _Py_IsFinalizing; may be null
    int (*gilEnsure)() = nullptr;    // PyGILState_STATE is an int-sized enum
    void (*gilRelease)(int) = nullptr;
    Object* (*runString)(const char*, int, Object*, Object*, void*) = nullptr; // PyRun_StringFlags
    Object* (*dictNew)() = nullptr;
    int (*dictSetItemString)(Object*, const char*, Object*) = nullptr;
    Object* (*getBuiltins)() = nullptr; // PyEval_GetBuiltins (borrowed)
    int (*bytesAsStringAndSize)(Object*, char**, ssize*) = nullptr;
    void (*decRef)(Object*) = nullptr; // Py_DecRef
    Object* (*errOccurred)() = nullptr;
    void (*errPrint)() = nullptr;
    void (*errClear)() = nullptr;

    // Fills the table; false (with a reason in why) when this process has no CPython.
    bool resolve(const char*& why);
    bool finalizing() const { return isFinalizing && isFinalizing() != 0; }
};

inline constexpr int kFileInput = 257; // Py_file_input
inline constexpr int kEvalInput = 258; // Py_eval_input

} // namespace fs::agent::py
