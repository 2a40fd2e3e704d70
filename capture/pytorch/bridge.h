// The PyTorch bridge inside the agent: a thread of its own that, in a process running CPython
// with `torch` loaded and CUDA initialised, enables the caching allocator's memory history and
// drains it into the capture stream as framework-level events (docs/capture.md, "PyTorch
// blocks"). It takes the GIL only on its own thread (PyGILState_Ensure), never inside the
// allocator, and only while a recorder wants events.
//
// Environment (set by `fragscope record|launch`, or by gdb before `attach` loads the agent):
//   FRAGSCOPE_PYTORCH=0                 the bridge does not start (--no-pytorch)
//   FRAGSCOPE_PYTORCH_STACKS=python|all call stacks of each block (--stacks); default none
//   FRAGSCOPE_PYTORCH_MAX_ENTRIES=N     the history's ring buffer (default 32768)
//   FRAGSCOPE_PYTORCH_PERIOD_MS=N       the longest time between two drains (default 1000)
#pragma once

namespace fs::agent {

// Whether this process has a CPython the bridge could use (and the bridge is not turned off).
bool bridgeWanted();
// Starts the bridge thread once (no-op without CPython or with FRAGSCOPE_PYTORCH=0).
void bridgeStart();
// A recorder is stopping: if the bridge records, it drains now (whatever its schedule) and
// queues the events; returns when they are queued or after waitMs.
void bridgeDrainNow(int waitMs);
// Stops it: waits up to waitMs for the thread, then leaves it (it may be parked by a finalising
// interpreter; the process is exiting).
void bridgeStop(int waitMs);

} // namespace fs::agent
