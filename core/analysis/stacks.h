// Call stacks as a user reads them (docs/analysis.md "Call sites"): each recorded frame is
// classified, the frames that only say how an allocation reached the allocator (the allocator
// itself, operator dispatch, torch::unwind's own frames, the Python interpreter and libc) are
// hidden by default, and the user's own file:line comes first. One classification for every
// view and command: the details panel, the call-site table, the heatmap's colouring and search.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fs::analysis {

enum class FrameKind : uint8_t {
    User,        // code of the program being profiled (a source file outside any library)
    Library,     // Python or native code of an installed package (site-packages, torch, stdlib)
    Interpreter, // CPython's evaluation loop, libc start-up, thread trampolines
    Dispatch,    // PyTorch operator dispatch and kernels' C++ (at::, c10::, torch::autograd)
    Allocator,   // the caching allocator and the tensor-creation helpers that call it
    Unwind,      // torch::unwind / CapturedTraceback: the frames that record the stack itself
};
const char* frameKindName(FrameKind k);

// One frame of a recorded stack, as sources write it: "function (file:line)" (PyTorch
// snapshots), "function (file)" or a bare symbol.
struct StackFrame
{
    std::string text;     // as recorded
    std::string function; // text before " (", or the whole text
    std::string file;     // inside the parentheses, without ":line" (may be empty)
    int line = 0;         // 0 when none
    FrameKind kind = FrameKind::User;
    bool hidden() const { return kind >= FrameKind::Interpreter; } // by the default filter
    // "trace_peak_memory.py:12 custom_scaled_dot_product_attention": the file's base name and
    // line first (a long path would cut them off), then the function.
    std::string label() const;
};

StackFrame parseStackFrame(const std::string& text);
FrameKind classifyFrame(const std::string& text);

// A stack with the default filter applied.
struct StackView
{
    std::vector<StackFrame> frames; // every frame, as recorded (innermost first)
    // Frames the default filter shows: user frames first (innermost first), then library
    // frames; without either, the frames of the first kind present among dispatch,
    // interpreter, allocator, unwind. Never empty when frames is not.
    std::vector<size_t> shown;
    int callSite = -1; // the call site: shown's first frame (the innermost user frame, ...)
    size_t hiddenCount() const { return frames.size() - shown.size(); }
};
StackView viewStack(const std::vector<std::string>& stack);

} // namespace fs::analysis
