// What the agent's entry points share (agent.cpp): the control socket, the stream and the flush
// thread ("the core") start once, from whichever entry point runs first: the CUDA driver's
// InitializeInjection (CUPTI) or NVTX's InitializeInjectionNvtx2 / InitializeInjectionNvtxExtension
// (our own NVTX tool). A process without a CUDA driver thus still records its NVTX events.
#pragma once

#include "capture/protocol/protocol.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fs::agent {

// An event produced on a host thread (API callback, NVTX call, control-socket mark). A non-empty
// text is interned on the flush thread and becomes e.name.
struct SideEvent
{
    proto::WireEvent e{};
    std::string text;
    std::vector<std::string> frames; // an Alloc's call stack, innermost first (becomes e.aux)
};

// Starts the core once (socket, stream, flush thread); false when the agent is disabled.
bool coreStart();
// The core runs and the agent is not disabled: NVTX handlers return at once otherwise.
bool coreActive();
// Someone wants events now: a recorder streams, or `record` keeps them until it connects. An
// idle agent (`fragscope launch`, after `attach` stopped) skips the NVTX work entirely.
bool coreRecording();
// Host time on the session clock (CUPTI's timestamp: it works without a driver).
int64_t coreNow();
// Queues events for the flush thread (bounded; beyond the bound they are dropped and counted).
void coreEmit(SideEvent&& e);
void coreEmit(std::vector<SideEvent>& events); // moves them out, keeps their order
// One diagnostic line on stderr, prefixed with the agent's name and pid.
void coreLog(const char* msg);
// Session meta, capture-health rows and notes from a host-side source (the PyTorch bridge),
// written to the stream at once (time on the session clock).
void coreMeta(const std::string& key, const std::string& value);
void coreHealth(int64_t time, int64_t value, const std::string& kind, const std::string& detail);
void coreWarn(const std::string& text);

} // namespace fs::agent
