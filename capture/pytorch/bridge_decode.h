// The C++ half of the PyTorch bridge's data path: the packed records bridge.py returns from each
// step (strings, stacks, events, health, meta, log lines) -> agent side events on the session
// clock. Pure bookkeeping, tested directly (tests/capture/tst_capture_pytorch.cpp).
//
// Records, little-endian, packed (bridge.py writes them with struct):
//   'S' u32 id, u32 n, n bytes UTF-8          a string (ids persist across steps; redefinable)
//   'K' u32 id, u32 n, n x u32 string ids     a call stack, innermost frame first
//   'E' u8 type, u8 region kind, u16 device, u32 stream, u64 address, u64 size, u64 aux,
//       u64 requested, i64 time, i64 end, u32 name, u32 stack, u8 flags      an event
//   'H' i64 value, u32 kind, u32 detail, i64 time                          capture health
//   'M' u32 key, u32 value                                                 session meta
//   'L' u32 n, n bytes                                                     a message to log
// Times are CLOCK_REALTIME nanoseconds (PyTorch's time_us x 1000); the decoder moves them to
// the session clock.
#pragma once

#include "capture/agent/agent_core.h"

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace fs::agent {

struct BridgeBatch
{
    char status = 0; // R recording, W waiting, I idle, X stopped for good
    std::vector<SideEvent> events;
    std::vector<std::string> logs;
    std::vector<std::pair<std::string, std::string>> meta;
    struct Health
    {
        int64_t time;
        int64_t value;
        std::string kind;
        std::string detail;
    };
    std::vector<Health> health;
};

class BridgeDecoder
{
public:
    // realtimeMinusSession: CLOCK_REALTIME minus the session clock, ns.
    explicit BridgeDecoder(int64_t realtimeMinusSession = 0) : offset_(realtimeMinusSession) {}
    // Decodes one step's bytes; false with err on a malformed record (what came before it is
    // kept in out).
    bool decode(std::string_view bytes, BridgeBatch& out, std::string& err);
    void setOffset(int64_t realtimeMinusSession) { offset_ = realtimeMinusSession; }

private:
    const std::string& text(uint32_t id) const;
    std::vector<std::string> strings_{std::string()};
    std::unordered_map<uint32_t, std::vector<uint32_t>> stacks_;
    int64_t offset_ = 0;
};

} // namespace fs::agent
