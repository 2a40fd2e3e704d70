// Frame classification and the default stack filter (stacks.h). The rules read the frame text
// only: what PyTorch's snapshots record (C++ symbols with a source file, Python frames with
// their path and line), what the CUPTI agent and the NVTX memory extension record, and plain
// symbols. docs/analysis.md "Call sites" lists them.
#include "stacks.h"

#include <algorithm>
#include <array>
#include <string_view>

namespace fs::analysis {

const char* frameKindName(FrameKind k)
{
    switch (k) {
    case FrameKind::User:
        return "user";
    case FrameKind::Library:
        return "library";
    case FrameKind::Interpreter:
        return "interpreter";
    case FrameKind::Dispatch:
        return "dispatch";
    case FrameKind::Allocator:
        return "allocator";
    case FrameKind::Unwind:
        return "unwind";
    }
    return "user";
}

namespace {

bool contains(std::string_view s, std::string_view part)
{
    return s.find(part) != std::string_view::npos;
}

template <size_t N> bool containsAny(std::string_view s, const std::array<std::string_view, N>& v)
{
    return std::any_of(v.begin(), v.end(), [&](std::string_view p) { return contains(s, p); });
}

template <size_t N> bool startsAny(std::string_view s, const std::array<std::string_view, N>& v)
{
    return std::any_of(v.begin(), v.end(), [&](std::string_view p) { return s.starts_with(p); });
}

// The frames torch::unwind adds to record the stack it is recording.
constexpr std::array<std::string_view, 4> kUnwind = {
    "torch::unwind", "CapturedTraceback", "gather_with_cpp", "torch::cuda::(anonymous namespace)"};
// The caching allocator and the tensor factories' allocation helpers.
constexpr std::array<std::string_view, 9> kAllocator = {"CachingAllocator",
                                                        "c10::cuda::",
                                                        "_empty_generic",
                                                        "empty_strided_generic",
                                                        "at::detail::empty",
                                                        "c10::alloc_cpu",
                                                        "at::native::empty_cuda",
                                                        "at::native::empty_strided_cuda",
                                                        "cudaMalloc"};
// CPython's own functions, libc's start-up and thread trampolines, by symbol...
constexpr std::array<std::string_view, 19> kInterpreterSymbols = {
    "_Py",          "Py",      "cfunction_", "method_vectorcall",
    "slot_tp_",     "run_mod", "run_eval",   "pyrun_",
    "pymain_",      "__libc_", "_start",     "__clone",
    "start_thread", "clone3",  "pthread_",   "execute_native_thread_routine",
    "__GI_",        "_dl_",    "dynamo_"};
// ... by exact name ...
constexpr std::array<std::string_view, 2> kInterpreterNames = {"clone", "start_thread"};
// ... and by source file.
constexpr std::array<std::string_view, 9> kInterpreterFiles = {
    "/Python/",   "/Objects/", "/Modules/", "/Include/", "/Parser/",
    "libc-start", "/csu/",     "/sysdeps/", "/nptl/"};
// PyTorch's and its bindings' C++: operator dispatch, autograd, kernels' wrappers.
constexpr std::array<std::string_view, 8> kDispatch = {
    "at::", "c10::", "torch::", "caffe2::", "pybind11::", "THPVariable", "THPFunction", "THP"};
// Where installed Python code lives.
constexpr std::array<std::string_view, 5> kLibraryPaths = {"site-packages/", "dist-packages/",
                                                           "/lib/python", "<frozen ", "/usr/lib/"};

bool endsWith(std::string_view s, std::string_view suffix)
{
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

} // namespace

StackFrame parseStackFrame(const std::string& text)
{
    StackFrame f;
    f.text = text;
    f.function = text;
    // "function (file:line)": the last " (" whose parenthesis closes at the end. A C++
    // signature has its own parentheses before it.
    if (!text.empty() && text.back() == ')') {
        const size_t open = text.rfind(" (");
        if (open != std::string::npos) {
            std::string inside = text.substr(open + 2, text.size() - open - 3);
            f.function = text.substr(0, open);
            const size_t colon = inside.rfind(':');
            if (colon != std::string::npos && colon + 1 < inside.size() &&
                std::all_of(inside.begin() + static_cast<std::ptrdiff_t>(colon) + 1, inside.end(),
                            [](char c) { return c >= '0' && c <= '9'; }) &&
                inside.size() - colon <= 10) {
                f.line = std::stoi(inside.substr(colon + 1));
                inside.resize(colon);
            }
            f.file = std::move(inside);
        }
    }
    f.kind = classifyFrame(text);
    return f;
}

FrameKind classifyFrame(const std::string& text)
{
    std::string norm = text;
    std::replace(norm.begin(), norm.end(), '\\', '/'); // Windows paths
    const std::string_view s = norm;
    if (containsAny(s, kUnwind)) return FrameKind::Unwind;
    if (containsAny(s, kAllocator)) return FrameKind::Allocator;
    // Split as parseStackFrame does, without building strings for the common case.
    std::string_view function = s, file;
    if (!s.empty() && s.back() == ')') {
        const size_t open = s.rfind(" (");
        if (open != std::string_view::npos) {
            function = s.substr(0, open);
            file = s.substr(open + 2, s.size() - open - 3);
        }
    }
    const bool python =
        contains(file, ".py:") || endsWith(file, ".py") || contains(file, "<frozen");
    if (!python) {
        if (startsAny(function, kInterpreterSymbols) || containsAny(file, kInterpreterFiles) ||
            std::find(kInterpreterNames.begin(), kInterpreterNames.end(), function) !=
                kInterpreterNames.end() ||
            endsWith(file, ".o"))
            return FrameKind::Interpreter;
        if (containsAny(function, kDispatch)) return FrameKind::Dispatch;
        // Native code without a source file of its own: a library's exported symbol.
        if (endsWith(file, ".so") || contains(file, ".so.")) return FrameKind::Library;
        return FrameKind::User;
    }
    return containsAny(file, kLibraryPaths) ? FrameKind::Library : FrameKind::User;
}

std::string StackFrame::label() const
{
    if (file.empty()) return function;
    const size_t slash = file.find_last_of("/\\");
    std::string out = slash == std::string::npos ? file : file.substr(slash + 1);
    if (line > 0) out += ":" + std::to_string(line);
    return out + " " + function;
}

StackView viewStack(const std::vector<std::string>& stack)
{
    StackView v;
    v.frames.reserve(stack.size());
    for (const std::string& s : stack)
        v.frames.push_back(parseStackFrame(s));
    for (FrameKind k : {FrameKind::User, FrameKind::Library})
        for (size_t i = 0; i < v.frames.size(); ++i)
            if (v.frames[i].kind == k) v.shown.push_back(i);
    // No frame of the program or a library (an autograd thread asking for a workspace): the
    // frames of the most telling kind there is, dispatch before interpreter before allocator.
    for (FrameKind k :
         {FrameKind::Dispatch, FrameKind::Interpreter, FrameKind::Allocator, FrameKind::Unwind}) {
        if (!v.shown.empty()) break;
        for (size_t i = 0; i < v.frames.size(); ++i)
            if (v.frames[i].kind == k) v.shown.push_back(i);
    }
    if (!v.shown.empty()) v.callSite = static_cast<int>(v.shown.front());
    return v;
}

} // namespace fs::analysis
