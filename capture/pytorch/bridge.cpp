#include "bridge.h"
#include "bridge_decode.h"
#include "python_api.h"

#include "capture/agent/agent_core.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>
#include <thread>

namespace fs::agent {

extern const char* const kBridgeScript;

namespace {

constexpr int kIdleMs = 200; // poll for a recorder
constexpr int kWaitMs = 20;  // poll for torch and CUDA while recording
constexpr int kPollMs = 20;  // while recording: how often the Python half looks
constexpr int kDefaultEntries = 32768;

int envInt(const char* name, int def, int lo, int hi)
{
    const char* v = std::getenv(name);
    if (!v || !*v) return def;
    const long n = std::strtol(v, nullptr, 10);
    return static_cast<int>(std::clamp<long>(n, lo, hi));
}

int64_t realtimeNs()
{
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

struct Bridge
{
    py::Api api;
    std::thread thread;
    std::mutex mu;
    std::condition_variable cv;
    bool quit = false;       // guarded by mu
    bool done = false;       // guarded by mu
    uint64_t forceSeq = 0;   // guarded by mu: drains asked for by bridgeDrainNow
    uint64_t forcedDone = 0; // guarded by mu: the last of them done
    BridgeDecoder decoder;
    py::Object* globals = nullptr;
    bool setUp = false;
    std::atomic<bool> active{false}; // the Python half has the history enabled
    int maxEntries = kDefaultEntries;
    int slowestMs = 100;
    std::string stacks = "none";
    int64_t gilNs = 0;
    int64_t steps = 0;
    int64_t events = 0;
};

Bridge* g_bridge = nullptr;
std::mutex g_bridgeMu;

// Runs one step of the Python half under the GIL; false when it cannot run at all.
bool step(Bridge& b, bool recording, bool force, std::string& bytes)
{
    const int gil = b.api.gilEnsure();
    const auto t0 = std::chrono::steady_clock::now(); // GIL held from here
    bool ok = true;
    if (!b.setUp) {
        b.setUp = true;
        b.globals = b.api.dictNew();
        ok = b.globals &&
             b.api.dictSetItemString(b.globals, "__builtins__", b.api.getBuiltins()) == 0;
        py::Object* r =
            ok ? b.api.runString(kBridgeScript, py::kFileInput, b.globals, b.globals, nullptr)
               : nullptr;
        if (r) {
            b.api.decRef(r);
            char init[256];
            std::snprintf(init, sizeof init,
                          "_fragscope_bridge = Bridge(%d, '%s', %g)\nimport atexit\n"
                          "atexit.register(_at_exit)\n",
                          b.maxEntries, b.stacks.c_str(), b.slowestMs / 1000.0);
            r = b.api.runString(init, py::kFileInput, b.globals, b.globals, nullptr);
            if (r) b.api.decRef(r);
        }
        ok = r != nullptr;
    }
    if (ok) {
        char expr[128];
        std::snprintf(expr, sizeof expr, "_fragscope_bridge.step(%d, %lld, False, %s)",
                      recording ? 1 : 0, static_cast<long long>(realtimeNs()),
                      force ? "True" : "False");
        py::Object* r = b.api.runString(expr, py::kEvalInput, b.globals, b.globals, nullptr);
        char* p = nullptr;
        py::ssize n = 0;
        if (r && b.api.bytesAsStringAndSize(r, &p, &n) == 0 && n > 0)
            bytes.assign(p, static_cast<size_t>(n));
        else
            ok = false;
        if (r) b.api.decRef(r);
    }
    if (!ok && b.api.errOccurred()) b.api.errPrint(); // a bridge bug: its traceback, once
    b.api.gilRelease(gil);
    b.gilNs +=
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    ++b.steps;
    return ok;
}

void publish(Bridge& b, BridgeBatch& batch)
{
    for (const auto& line : batch.logs) {
        coreLog(("PyTorch: " + line).c_str());
        coreWarn("PyTorch: " + line);
    }
    for (const auto& [k, v] : batch.meta)
        coreMeta(k, v);
    for (const auto& h : batch.health)
        coreHealth(h.time, h.value, h.kind, h.detail);
    b.events += static_cast<int64_t>(batch.events.size());
    coreEmit(batch.events);
}

void bridgeFigures(Bridge& b)
{
    coreMeta("pytorch.bridge_steps", std::to_string(b.steps));
    coreMeta("pytorch.bridge_gil_ns", std::to_string(b.gilNs));
    coreMeta("pytorch.bridge_events", std::to_string(b.events));
}

void loop(Bridge* b)
{
    int period = kIdleMs;
    int waits = 0; // consecutive polls that found no torch or no CUDA yet
    while (true) {
        uint64_t force = 0;
        {
            std::unique_lock lk(b->mu);
            b->cv.wait_for(lk, std::chrono::milliseconds(period),
                           [b] { return b->quit || b->forceSeq != b->forcedDone; });
            if (b->quit) break;
            if (b->forceSeq != b->forcedDone) force = b->forceSeq;
        }
        // Before Py_Initialize or once finalisation began the GIL is not ours to ask for.
        if (!b->api.isInitialized() || b->api.finalizing()) {
            if (b->setUp) break;
            continue;
        }
        const bool recording = coreRecording();
        if (!recording && !b->active) {
            period = kIdleMs; // an idle agent costs the host no GIL at all
            continue;
        }
        std::string bytes;
        if (!step(*b, recording, force != 0, bytes)) {
            coreLog("PyTorch bridge: its Python half failed; blocks are no longer recorded");
            break;
        }
        BridgeBatch batch;
        std::string err;
        b->decoder.setOffset(realtimeNs() - coreNow());
        if (!b->decoder.decode(bytes, batch, err)) {
            coreLog(("PyTorch bridge: " + err + "; blocks are no longer recorded").c_str());
            break;
        }
        publish(*b, batch);
        if (force != 0) {
            std::lock_guard lk(b->mu);
            b->forcedDone = force;
            b->cv.notify_all();
        }
        if (batch.status == 'X') {
            if (b->active) bridgeFigures(*b);
            break;
        }
        if (batch.status == 'R') {
            // The Python half decides when a drain is worth its cost (bridge.py, due()); polling
            // it costs one look at the allocator's counters.
            b->active = true;
            period = kPollMs;
        } else {
            if (batch.status == 'I' && b->active) bridgeFigures(*b);
            b->active = false;
            // Waiting for torch: every 20 ms for the first 10 s (blocks made meanwhile become
            // pre-existing), then every 200 ms (a Python program that never imports torch).
            waits = batch.status == 'W' ? waits + 1 : 0;
            period = batch.status == 'W' && waits < 10000 / kWaitMs ? kWaitMs : kIdleMs;
        }
    }
    std::lock_guard lk(b->mu);
    b->done = true;
    b->cv.notify_all();
}

} // namespace

bool bridgeWanted()
{
    const char* off = std::getenv("FRAGSCOPE_PYTORCH");
    if (off && std::strcmp(off, "0") == 0) return false;
    py::Api api;
    const char* why = nullptr;
    return api.resolve(why);
}

void bridgeStart()
{
    std::lock_guard lk(g_bridgeMu);
    if (g_bridge) return;
    const char* off = std::getenv("FRAGSCOPE_PYTORCH");
    if (off && std::strcmp(off, "0") == 0) return;
    auto* b = new Bridge(); // lives until exit, like the agent
    const char* why = nullptr;
    if (!b->api.resolve(why)) {
        delete b;
        return; // not a Python process: nothing to say
    }
    b->maxEntries = envInt("FRAGSCOPE_PYTORCH_MAX_ENTRIES", kDefaultEntries, 16, 1 << 24);
    b->slowestMs = envInt("FRAGSCOPE_PYTORCH_PERIOD_MS", 1000, kPollMs, 600000);
    if (const char* s = std::getenv("FRAGSCOPE_PYTORCH_STACKS")) {
        if (std::strcmp(s, "python") == 0 || std::strcmp(s, "all") == 0) b->stacks = s;
    }
    g_bridge = b;
    b->thread = std::thread(loop, b);
}

void bridgeDrainNow(int waitMs)
{
    Bridge* b = nullptr;
    {
        std::lock_guard lk(g_bridgeMu);
        b = g_bridge;
    }
    if (!b || !b->active.load()) return;
    std::unique_lock lk(b->mu);
    if (b->done) return;
    const uint64_t want = ++b->forceSeq;
    b->cv.notify_all();
    b->cv.wait_for(lk, std::chrono::milliseconds(waitMs),
                   [b, want] { return b->forcedDone >= want || b->done; });
}

void bridgeStop(int waitMs)
{
    Bridge* b = nullptr;
    {
        std::lock_guard lk(g_bridgeMu);
        b = g_bridge;
    }
    if (!b) return;
    std::unique_lock lk(b->mu);
    b->quit = true;
    b->cv.notify_all();
    const bool finished =
        b->cv.wait_for(lk, std::chrono::milliseconds(waitMs), [b] { return b->done; });
    lk.unlock();
    if (finished && b->thread.joinable())
        b->thread.join();
    else if (b->thread.joinable())
        b->thread.detach();
}

} // namespace fs::agent
