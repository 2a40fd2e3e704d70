// libfragscope-inject.so: loaded into a CUDA process through CUDA_INJECTION64_PATH (the driver
// calls InitializeInjection at cuInit), through NVTX_INJECTION64_PATH (NVTX calls
// InitializeInjectionNvtx2 at the first NVTX call; nvtx_inject.cpp), or by `fragscope attach`
// through a debugger-driven dlopen. The control socket, the stream and the flush thread (the
// core) start from whichever comes first; CUPTI is set up only by InitializeInjection, so a
// process without a driver still records its NVTX events. It runs inside someone else's process,
// so it does little there: CUPTI fills fixed buffers, a flush thread decodes them into compact
// frames and sends them to the recorder over the control socket. Any failure logs one line and
// disables the agent (or only its CUPTI part); the host keeps running.
#include "agent_core.h"
#include "callbacks.h"
#include "decode.h"

#include "capture/protocol/control_server.h"
#include "capture/protocol/socket_dir.h"
#include "capture/protocol/target_stream.h"
#include "capture/pytorch/bridge.h"

#include <cupti.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dlfcn.h>
#include <memory>
#include <mutex>
#include <pthread.h>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

using namespace fs;

constexpr size_t kBufferSize = 8u << 20; // CUPTI activity buffer
constexpr size_t kMaxBuffers = 16;       // fixed pool: beyond it CUPTI drops and counts
constexpr size_t kMaxSide = 1u << 20;    // host-thread events queued between two flushes
constexpr size_t kChunk = 4096;          // host-thread events per queue chunk
constexpr size_t kSpareChunks = 32;      // empty chunks kept for reuse (128 k events)
constexpr size_t kWakeSide = 1u << 15;   // queue length that wakes the flush thread early
constexpr int kExitWaitMs = 10000;       // at exit, how long to wait for a launching recorder

void logLine(const char* msg)
{
    char line[512];
    const int n = std::snprintf(line, sizeof line, "fragscope-agent[%d]: %s\n",
                                static_cast<int>(::getpid()), msg);
    if (n > 0) [[maybe_unused]]
        ssize_t w = ::write(2, line, static_cast<size_t>(std::min<int>(n, sizeof line - 1)));
}

struct Agent
{
    std::unique_ptr<proto::ControlServer> server;
    std::unique_ptr<proto::TargetStream> stream;
    agent::DecodeState decode;
    std::mutex mu; // stream + decode
    std::mutex sideMu;
    // Events from API callbacks, NVTX and control marks, in fixed chunks: a host thread appends
    // into a chunk that is already allocated (reused from `spare`), never moving what is queued,
    // however far the flush thread is behind. All three guarded by sideMu.
    std::vector<std::vector<agent::SideEvent>> side;
    std::vector<std::vector<agent::SideEvent>> spare;
    size_t sideCount = 0;
    std::vector<std::vector<agent::SideEvent>> draining; // flush thread only
    uint64_t sideDropped = 0; // guarded by sideMu; reported as a health row
    agent::ApiState api;      // API-callback state (graph joins, resolvers)
    std::mutex bufMu;
    std::vector<uint8_t*> freeBuffers;
    size_t buffersAllocated = 0;
    std::thread flusher;
    std::mutex flushMu;
    std::condition_variable flushCv;
    bool quit = false;
    std::atomic<bool> wake{false};    // host threads filled the queue: drain before the period ends
    std::mutex cuptiMu;               // activity enable/disable
    std::atomic<bool> cuptiOn{false}; // InitializeInjection set CUPTI up
    bool activitiesOn = false;        // guarded by cuptiMu
    std::atomic<bool> autostart{false};
    uint32_t launchedBy = 0; // pid of the `fragscope record` that started us
    CUpti_SubscriberHandle subscriber = nullptr;
    uint64_t cuptiDropped = 0;
};

Agent* g_agent = nullptr;
std::atomic<bool> g_disabled{false};
std::atomic<bool> g_cuptiInitialized{false}; // InitializeInjection ran
std::atomic<bool> g_coreUp{false};           // the socket, stream and flush thread run
std::mutex g_startMu;                        // one start at a time (CUDA and NVTX threads)
bool g_coreTried = false;                    // guarded by g_startMu

bool agentDisabledByEnv()
{
    const char* off = std::getenv("FRAGSCOPE_AGENT_DISABLE");
    return off && *off == '1';
}

void disable(const char* why, CUptiResult r = CUPTI_SUCCESS)
{
    if (g_disabled.exchange(true)) return;
    char msg[400];
    if (r != CUPTI_SUCCESS) {
        const char* s = nullptr;
        cuptiGetResultString(r, &s);
        std::snprintf(msg, sizeof msg,
                      "%s (CUPTI error %d: %s); agent disabled, the process continues", why,
                      static_cast<int>(r), s ? s : "?");
    } else {
        std::snprintf(msg, sizeof msg, "%s; agent disabled, the process continues", why);
    }
    logLine(msg);
    if (g_agent && g_agent->server) g_agent->server->setState(proto::TargetState::Disabled);
}

void CUPTIAPI bufferRequested(uint8_t** buffer, size_t* size, size_t* maxNumRecords)
{
    *maxNumRecords = 0;
    *buffer = nullptr;
    *size = 0;
    Agent* a = g_agent;
    if (!a) return;
    std::lock_guard lk(a->bufMu);
    if (!a->freeBuffers.empty()) {
        *buffer = a->freeBuffers.back();
        a->freeBuffers.pop_back();
    } else if (a->buffersAllocated < kMaxBuffers) {
        *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferSize));
        if (*buffer) ++a->buffersAllocated;
    }
    if (*buffer) *size = kBufferSize;
}

void CUPTIAPI bufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t validSize)
{
    Agent* a = g_agent;
    if (!a || !buffer) return;
    if (!g_disabled.load()) {
        std::lock_guard lk(a->mu);
        agent::decodeActivityBuffer(buffer, validSize, a->decode, *a->stream);
    }
    std::lock_guard lk(a->bufMu);
    a->freeBuffers.push_back(buffer);
}

int64_t now()
{
    uint64_t t = 0;
    cuptiGetTimestamp(&t); // works without a driver too (host clock)
    return static_cast<int64_t>(t);
}

// CUPTI lookups for the API callbacks (callbacks.h); each answers 0 when CUPTI cannot tell.
uint32_t streamIdOf(CUcontext ctx, CUstream s)
{
    uint32_t id = 0;
    return cuptiGetStreamIdEx(ctx, s, 0, &id) == CUPTI_SUCCESS ? id : 0;
}
uint32_t deviceIdOf(CUcontext ctx)
{
    uint32_t id = 0;
    return ctx && cuptiGetDeviceId(ctx, &id) == CUPTI_SUCCESS ? id : 0;
}
uint64_t graphIdOf(CUgraph g)
{
    uint32_t id = 0;
    return g && cuptiGetGraphId(g, &id) == CUPTI_SUCCESS ? id : 0;
}
uint64_t execIdOf(CUgraphExec x)
{
    uint32_t id = 0;
    return x && cuptiGetGraphExecId(x, &id) == CUPTI_SUCCESS ? id : 0;
}
// Free device memory at an OOM, through the driver that loaded us (never linked: the agent
// needs only CUPTI). The call happens on the failing thread, in its context, once per OOM.
uint64_t deviceFreeBytesOf(CUcontext)
{
    using MemGetInfo = CUresult (*)(size_t*, size_t*);
    static MemGetInfo fn = [] {
        void* h = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
        return h ? reinterpret_cast<MemGetInfo>(::dlsym(h, "cuMemGetInfo_v2")) : nullptr;
    }();
    size_t freeBytes = 0, total = 0;
    return fn && fn(&freeBytes, &total) == CUDA_SUCCESS ? freeBytes : 0;
}

// Driver-API exits: VMM calls, failed allocations, graph instantiations and launches
// (callbacks.cpp has the logic; this only hands the result to the flush thread).
void CUPTIAPI apiCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                          const void* data)
{
    Agent* a = g_agent;
    if (g_disabled.load() || !a || domain != CUPTI_CB_DOMAIN_DRIVER_API || !data) return;
    agent::SideEvent s;
    if (agent::apiExitEvent(cbid, *static_cast<const CUpti_CallbackData*>(data),
                            now() + a->decode.clockOffsetNs, a->api, s.e))
        agent::coreEmit(std::move(s));
}

const CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_DEVICE,      CUPTI_ACTIVITY_KIND_MEMORY2,
    CUPTI_ACTIVITY_KIND_MEMORY_POOL, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_GRAPH_TRACE, CUPTI_ACTIVITY_KIND_MARKER};

bool setActivities(Agent& a, bool on)
{
    std::lock_guard lk(a.cuptiMu);
    if (!a.cuptiOn.load() || a.activitiesOn == on) return true;
    for (CUpti_ActivityKind k : kKinds) {
        const CUptiResult r = on ? cuptiActivityEnable(k) : cuptiActivityDisable(k);
        // MARKER needs NVTX_INJECTION64_PATH to point at libcupti; without it NVTX is not seen.
        if (r != CUPTI_SUCCESS && k != CUPTI_ACTIVITY_KIND_MARKER &&
            k != CUPTI_ACTIVITY_KIND_DEVICE) {
            disable(on ? "cannot enable CUPTI activity recording" : "cannot disable CUPTI activity",
                    r);
            return false;
        }
    }
    a.activitiesOn = on;
    return true;
}

void drainSide(Agent& a)
{
    uint64_t dropped = 0;
    {
        std::lock_guard lk(a.sideMu);
        a.side.swap(a.draining);
        a.sideCount = 0;
        std::swap(dropped, a.sideDropped);
    }
    for (auto& chunk : a.draining) {
        for (auto& s : chunk) {
            if (!s.text.empty()) s.e.name = a.stream->intern(s.text).value;
            if (!s.frames.empty()) {
                std::vector<StringId> ids;
                ids.reserve(s.frames.size());
                for (const auto& f : s.frames)
                    ids.push_back(a.stream->intern(f));
                s.e.aux = a.stream->internStack(ids).value;
            }
            a.stream->event(s.e);
        }
        chunk.clear(); // keeps its capacity
    }
    {
        // Keep a working set's worth of chunks, not the largest burst ever seen.
        std::lock_guard lk(a.sideMu);
        for (auto& chunk : a.draining)
            if (a.spare.size() < kSpareChunks) a.spare.push_back(std::move(chunk));
    }
    a.draining.clear();
    if (dropped > 0)
        a.stream->health(now() + a.decode.clockOffsetNs, static_cast<int64_t>(dropped),
                         "dropped_records",
                         "host-side events (NVTX, API callbacks) over the queue");
}

void flushLoop(Agent* a)
{
    auto lastStreaming = std::chrono::steady_clock::now();
    while (true) {
        {
            std::unique_lock lk(a->flushMu);
            a->flushCv.wait_for(lk, std::chrono::milliseconds(200),
                                [a] { return a->quit || a->wake.load(); });
            if (a->quit) return;
            a->wake.store(false);
        }
        if (g_disabled.load()) continue;
        const bool cupti = a->cuptiOn.load();
        const bool wanted = a->server->streaming() || a->autostart;
        // Record only while someone listens: an idle agent costs the host nothing but the socket.
        if (wanted) {
            lastStreaming = std::chrono::steady_clock::now();
            if (!setActivities(*a, true)) continue;
        } else if (cupti && a->activitiesOn &&
                   std::chrono::steady_clock::now() - lastStreaming > std::chrono::seconds(2)) {
            cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
            setActivities(*a, false);
        }
        if (cupti && a->activitiesOn) cuptiActivityFlushAll(0);
        std::lock_guard lk(a->mu);
        drainSide(*a);
        size_t dropped = 0;
        if (cupti && cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS &&
            dropped > 0) {
            a->cuptiDropped += dropped;
            a->stream->health(now() + a->decode.clockOffsetNs, static_cast<int64_t>(dropped),
                              "dropped_records", "CUPTI activity buffers were full");
        }
        if (a->server->streaming())
            a->autostart = false; // the recorder came: from now on follow start/stop
        a->stream->flush();
    }
}

void atExit()
{
    Agent* a = g_agent;
    if (!a || !g_coreUp.load()) return;
    // Under `fragscope record` a short program can end before the recorder has connected: what
    // it kept would be lost, so give the recorder a few seconds to come and take it. Only the
    // recorder's own child waits: other programs a recorded script runs inherit the environment
    // but are not followed, and must not hang at exit.
    if (a->autostart && a->launchedBy != 0 && a->launchedBy == static_cast<uint32_t>(::getppid()) &&
        !g_disabled.load() && !a->server->streaming())
        a->server->waitForStart(kExitWaitMs);
    // The bridge took its last drain in Python's own atexit (the interpreter is gone by now).
    agent::bridgeStop(1000);
    {
        std::lock_guard lk(a->flushMu);
        a->quit = true;
    }
    a->flushCv.notify_all();
    if (a->flusher.joinable()) a->flusher.join();
    if (!g_disabled.load() && a->cuptiOn.load() && a->activitiesOn)
        cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    {
        std::lock_guard lk(a->mu);
        drainSide(*a);
        a->stream->finish(proto::EndReason::TargetFinished);
    }
    a->server->close();
}

Agent& agentObject()
{
    if (!g_agent) {
        g_agent = new Agent(); // lives until exit: CUPTI and NVTX may call back at any time
        g_agent->decode.graphs = &g_agent->api.graphs;
        g_agent->decode.vmm = &g_agent->api.vmm;
    }
    return *g_agent;
}

// The socket, the stream and the flush thread. Caller holds g_startMu.
bool startCoreLocked()
{
    if (g_coreTried) return g_coreUp.load() && !g_disabled.load();
    g_coreTried = true;
    if (g_disabled.load() || agentDisabledByEnv()) return false;
    Agent* a = &agentObject();
    uint32_t version = 0;
    cuptiGetVersion(&version);
    // Clock calibration: CUPTI timestamps are the session clock (host events use them too), and
    // the offset to the host's realtime clock is recorded so other sources can be aligned.
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    const int64_t host = ts.tv_sec * 1000000000LL + ts.tv_nsec;
    const int64_t gpu = now();

    const char* launched = std::getenv("FRAGSCOPE_LAUNCHED_BY");
    a->autostart = std::getenv("FRAGSCOPE_AUTOSTART") &&
                   std::string(std::getenv("FRAGSCOPE_AUTOSTART")) == "1";
    proto::ControlServer::Options so;
    so.kind = "agent";
    so.commandLine = proto::processCommandLine(::getpid());
    so.launchedBy = launched ? static_cast<uint32_t>(std::strtoul(launched, nullptr, 10)) : 0;
    a->launchedBy = so.launchedBy;
    so.log = logLine;
    so.onMark = [](const std::string& text) {
        agent::SideEvent s;
        s.e.type = proto::ev::Mark;
        s.e.time = agent::coreNow();
        s.text = text;
        agent::coreEmit(std::move(s));
    };
    so.beforeStop = [] {
        Agent* ag = g_agent;
        if (!ag || g_disabled.load()) return;
        agent::bridgeDrainNow(2000);
        std::lock_guard lk(ag->mu);
        drainSide(*ag);
        ag->stream->flush();
    };
    a->server = std::make_unique<proto::ControlServer>(so);
    proto::TargetStream::Options to;
    to.keepUntilFirstStart = a->autostart;
    to.flushBytes = 32u << 20; // the flush thread sends; decode never blocks on the socket
    a->stream = std::make_unique<proto::TargetStream>(*a->server, to);
    a->stream->process(::getpid(), gpu, so.commandLine);
    a->stream->meta("agent.cupti_version", std::to_string(version));
    a->stream->meta("agent.clock_offset_realtime_ns", std::to_string(host - gpu));
    a->stream->health(gpu, host - gpu, "clock_calibration",
                      "CLOCK_REALTIME minus CUPTI timestamp, ns");
    a->server->setState(a->autostart ? proto::TargetState::WaitingForRecorder
                                     : proto::TargetState::Idle);
    std::string err;
    if (!a->server->open(err)) {
        disable(("cannot open the control socket: " + err).c_str());
        return false;
    }
    a->flusher = std::thread(flushLoop, a);
    agent::bridgeStart(); // its own thread; nothing happens there outside a Python process
    // A forked child (DataLoader workers, multiprocessing) has none of our threads and cannot use
    // CUDA: the agent must do nothing there, least of all join a thread at exit.
    ::pthread_atfork(nullptr, nullptr, [] {
        g_disabled.store(true);
        g_agent = nullptr;
    });
    std::atexit(atExit);
    g_coreUp.store(true);
    logLine(("recording agent ready; control socket " + a->server->path()).c_str());
    return true;
}

// CUPTI's part, from InitializeInjection. Without a driver cuptiSubscribe fails: when nothing
// else started the agent that disables it (one line, nothing left behind); when NVTX already
// started the core, only GPU activity is missing and NVTX keeps recording.
int initialize()
{
    if (g_cuptiInitialized.exchange(true)) return 1;
    if (agentDisabledByEnv()) return 1;
    std::lock_guard lk(g_startMu);
    const bool coreFirst = g_coreUp.load();
    auto cuptiFailed = [&](const char* why, CUptiResult r) {
        if (!coreFirst && !agent::bridgeWanted()) {
            disable(why, r);
            return 1;
        }
        if (!coreFirst) {
            // A Python process (gdb attach, or a CPU-only torch that loaded us): the PyTorch
            // bridge may still record blocks, or say why it cannot.
            if (!startCoreLocked()) return 1;
            const char* s = nullptr;
            cuptiGetResultString(r, &s);
            char msg[400];
            std::snprintf(msg, sizeof msg,
                          "%s (CUPTI error %d: %s); GPU activity is not recorded, the PyTorch "
                          "bridge still runs",
                          why, static_cast<int>(r), s ? s : "?");
            logLine(msg);
            return 1;
        }
        const char* s = nullptr;
        cuptiGetResultString(r, &s);
        char msg[400];
        std::snprintf(msg, sizeof msg,
                      "%s (CUPTI error %d: %s); GPU activity is not recorded, NVTX still is", why,
                      static_cast<int>(r), s ? s : "?");
        logLine(msg);
        return 1;
    };
    uint32_t version = 0;
    if (CUptiResult r = cuptiGetVersion(&version); r != CUPTI_SUCCESS)
        return cuptiFailed("cannot load CUPTI", r);
    Agent* a = &agentObject();
    a->api.resolve = {streamIdOf, deviceIdOf, graphIdOf, execIdOf, deviceFreeBytesOf};
    if (CUptiResult r = cuptiSubscribe(&a->subscriber,
                                       reinterpret_cast<CUpti_CallbackFunc>(apiCallback), nullptr);
        r != CUPTI_SUCCESS)
        return cuptiFailed("cannot subscribe to CUPTI callbacks (no CUDA driver or no GPU?)", r);
    for (size_t i = 0; i < agent::kApiCallbackCount; ++i)
        cuptiEnableCallback(1, a->subscriber, CUPTI_CB_DOMAIN_DRIVER_API, agent::kApiCallbacks[i]);
    if (CUptiResult r = cuptiActivityRegisterCallbacks(bufferRequested, bufferCompleted);
        r != CUPTI_SUCCESS) {
        cuptiUnsubscribe(a->subscriber);
        return cuptiFailed("cannot register CUPTI activity buffers", r);
    }
    cuptiActivityEnableAllocationSource(1);
    if (!startCoreLocked()) return 1;
    a->cuptiOn.store(true);
    if (a->autostart) setActivities(*a, true);
    return 1;
}

// Appends e to the host-side queue (caller holds sideMu); false when it is full (counted).
bool queueLocked(Agent& a, agent::SideEvent&& e)
{
    if (a.sideCount >= kMaxSide) {
        ++a.sideDropped;
        return false;
    }
    if (a.side.empty() || a.side.back().size() == kChunk) {
        if (!a.spare.empty()) {
            a.side.push_back(std::move(a.spare.back()));
            a.spare.pop_back();
        } else {
            a.side.emplace_back();
            a.side.back().reserve(kChunk);
        }
    }
    a.side.back().push_back(std::move(e));
    ++a.sideCount;
    return true;
}

// A busy host (a sub-allocator reporting every block) fills the queue faster than the flush
// period drains it: drain early rather than let the queue regrow in the host's thread.
void wakeFlusher(Agent& a)
{
    {
        // Under the flusher's mutex: set between its predicate check and its wait, the flag
        // and the notification would otherwise be missed until the next period.
        std::lock_guard lk(a.flushMu);
        a.wake.store(true);
    }
    a.flushCv.notify_one();
}

} // namespace

namespace fs::agent {

bool coreStart()
{
    if (g_coreUp.load()) return !g_disabled.load();
    std::lock_guard lk(g_startMu);
    return startCoreLocked();
}

bool coreActive()
{
    return g_coreUp.load(std::memory_order_acquire) && !g_disabled.load(std::memory_order_relaxed);
}

bool coreRecording()
{
    Agent* a = g_agent;
    return coreActive() && a &&
           (a->autostart.load(std::memory_order_relaxed) || a->server->streaming());
}

int64_t coreNow()
{
    Agent* a = g_agent;
    return now() + (a ? a->decode.clockOffsetNs : 0);
}

void coreEmit(SideEvent&& e)
{
    Agent* a = g_agent;
    if (!a || g_disabled.load()) return;
    {
        std::lock_guard lk(a->sideMu);
        if (!queueLocked(*a, std::move(e)) || a->sideCount != kWakeSide) return;
    }
    wakeFlusher(*a);
}

void coreEmit(std::vector<SideEvent>& events)
{
    Agent* a = g_agent;
    if (!a || g_disabled.load() || events.empty()) return;
    bool wake = false;
    {
        std::lock_guard lk(a->sideMu);
        const size_t before = a->sideCount;
        for (auto& e : events)
            queueLocked(*a, std::move(e));
        wake = before < kWakeSide && a->sideCount >= kWakeSide;
    }
    events.clear();
    if (wake) wakeFlusher(*a);
}

void coreLog(const char* msg)
{
    logLine(msg);
}

void coreMeta(const std::string& key, const std::string& value)
{
    Agent* a = g_agent;
    if (!a || !coreActive()) return;
    std::lock_guard lk(a->mu);
    a->stream->meta(key, value);
}

void coreHealth(int64_t time, int64_t value, const std::string& kind, const std::string& detail)
{
    Agent* a = g_agent;
    if (!a || !coreActive()) return;
    std::lock_guard lk(a->mu);
    a->stream->health(time, value, kind, detail);
}

void coreWarn(const std::string& text)
{
    Agent* a = g_agent;
    if (!a || !coreActive()) return;
    std::lock_guard lk(a->mu);
    a->stream->warn(text);
}

} // namespace fs::agent

extern "C" {
// The CUDA driver's injection entry point (CUDA_INJECTION64_PATH). Never throws into the host.
__attribute__((visibility("default"))) int InitializeInjection(void)
{
    try {
        return initialize();
    } catch (...) {
        disable("internal error during start-up");
        return 1;
    }
}
}
