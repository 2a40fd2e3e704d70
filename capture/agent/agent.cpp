// libfragscope-inject.so: loaded into a CUDA process through CUDA_INJECTION64_PATH (the driver
// calls InitializeInjection at cuInit) or by `fragscope attach` through a debugger-driven dlopen.
// It runs inside someone else's process, so it does little there: CUPTI fills fixed buffers, a
// flush thread decodes them into compact frames and sends them to the recorder over the control
// socket. Any failure logs one line and disables the agent; the host keeps running.
#include "decode.h"

#include "capture/protocol/control_server.h"
#include "capture/protocol/socket_dir.h"
#include "capture/protocol/target_stream.h"

#include <cupti.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
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
    std::vector<proto::WireEvent> side; // events from API callbacks and marks (host threads)
    std::vector<std::string> sideMarks; // mark texts, interned on the flush thread
    std::mutex bufMu;
    std::vector<uint8_t*> freeBuffers;
    size_t buffersAllocated = 0;
    std::thread flusher;
    std::mutex flushMu;
    std::condition_variable flushCv;
    bool quit = false;
    bool activitiesOn = false;
    bool autostart = false;
    CUpti_SubscriberHandle subscriber = nullptr;
    uint64_t cuptiDropped = 0;
};

Agent* g_agent = nullptr;
std::atomic<bool> g_disabled{false};
std::atomic<bool> g_initialized{false};

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

void pushSide(const proto::WireEvent& e)
{
    std::lock_guard lk(g_agent->sideMu);
    if (g_agent->side.size() < (1u << 20)) g_agent->side.push_back(e);
}

int64_t now()
{
    uint64_t t = 0;
    cuptiGetTimestamp(&t);
    return static_cast<int64_t>(t);
}

// VMM calls are invisible to the memory activity: catch them at API exit.
void CUPTIAPI apiCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                          const void* data)
{
    if (g_disabled.load() || !g_agent || domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
    const auto* info = static_cast<const CUpti_CallbackData*>(data);
    if (info->callbackSite != CUPTI_API_EXIT || !info->functionReturnValue ||
        *static_cast<const CUresult*>(info->functionReturnValue) != CUDA_SUCCESS)
        return;
    proto::WireEvent e{};
    e.time = now() + g_agent->decode.clockOffsetNs;
    e.level = proto::ev::LevelFramework; // VMM reservations host an allocator's blocks
    e.regionKind = proto::ev::KindVmm;
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve: {
        const auto* p = static_cast<const cuMemAddressReserve_params*>(info->functionParams);
        e.type = proto::ev::RegionCreate;
        e.address = p->ptr ? *p->ptr : 0;
        e.size = p->size;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree: {
        const auto* p = static_cast<const cuMemAddressFree_params*>(info->functionParams);
        e.type = proto::ev::RegionDestroy;
        e.address = p->ptr;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
        const auto* p = static_cast<const cuMemMap_params*>(info->functionParams);
        e.type = proto::ev::RegionMap;
        e.address = p->ptr;
        e.size = p->size;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap: {
        const auto* p = static_cast<const cuMemUnmap_params*>(info->functionParams);
        e.type = proto::ev::RegionUnmap;
        e.address = p->ptr;
        e.size = p->size;
        break;
    }
    default:
        return;
    }
    pushSide(e);
}

const CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_DEVICE,      CUPTI_ACTIVITY_KIND_MEMORY2,
    CUPTI_ACTIVITY_KIND_MEMORY_POOL, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_GRAPH_TRACE, CUPTI_ACTIVITY_KIND_MARKER};

bool setActivities(Agent& a, bool on)
{
    if (a.activitiesOn == on) return true;
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
    std::vector<proto::WireEvent> side;
    std::vector<std::string> marks;
    {
        std::lock_guard lk(a.sideMu);
        side.swap(a.side);
        marks.swap(a.sideMarks);
    }
    for (const auto& m : marks) {
        proto::WireEvent e{};
        e.type = proto::ev::Mark;
        e.time = now() + a.decode.clockOffsetNs;
        e.name = a.stream->intern(m);
        a.stream->event(e);
    }
    for (const auto& e : side)
        a.stream->event(e);
}

void flushLoop(Agent* a)
{
    auto lastStreaming = std::chrono::steady_clock::now();
    while (true) {
        {
            std::unique_lock lk(a->flushMu);
            a->flushCv.wait_for(lk, std::chrono::milliseconds(200), [a] { return a->quit; });
            if (a->quit) return;
        }
        if (g_disabled.load()) continue;
        const bool wanted = a->server->streaming() || a->autostart;
        // Record only while someone listens: an idle agent costs the host nothing but the socket.
        if (wanted) {
            lastStreaming = std::chrono::steady_clock::now();
            if (!setActivities(*a, true)) continue;
        } else if (a->activitiesOn &&
                   std::chrono::steady_clock::now() - lastStreaming > std::chrono::seconds(2)) {
            cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
            setActivities(*a, false);
        }
        if (a->activitiesOn) cuptiActivityFlushAll(0);
        std::lock_guard lk(a->mu);
        drainSide(*a);
        size_t dropped = 0;
        if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS &&
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
    if (!a) return;
    {
        std::lock_guard lk(a->flushMu);
        a->quit = true;
    }
    a->flushCv.notify_all();
    if (a->flusher.joinable()) a->flusher.join();
    if (!g_disabled.load() && a->activitiesOn)
        cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    {
        std::lock_guard lk(a->mu);
        drainSide(*a);
        a->stream->finish(proto::EndReason::TargetFinished);
    }
    a->server->close();
}

int initialize()
{
    if (g_initialized.exchange(true)) return 1;
    if (const char* off = std::getenv("FRAGSCOPE_AGENT_DISABLE"); off && *off == '1') return 1;
    uint32_t version = 0;
    if (CUptiResult r = cuptiGetVersion(&version); r != CUPTI_SUCCESS) {
        disable("cannot load CUPTI", r);
        return 1;
    }
    auto* a = new Agent(); // lives until exit: CUPTI may call back at any time
    g_agent = a;
    if (CUptiResult r = cuptiSubscribe(&a->subscriber,
                                       reinterpret_cast<CUpti_CallbackFunc>(apiCallback), nullptr);
        r != CUPTI_SUCCESS) {
        disable("cannot subscribe to CUPTI callbacks (no CUDA driver or no GPU?)", r);
        return 1;
    }
    for (CUpti_CallbackId id :
         {CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve, CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree,
          CUPTI_DRIVER_TRACE_CBID_cuMemMap, CUPTI_DRIVER_TRACE_CBID_cuMemUnmap})
        cuptiEnableCallback(1, a->subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
    if (CUptiResult r = cuptiActivityRegisterCallbacks(bufferRequested, bufferCompleted);
        r != CUPTI_SUCCESS) {
        disable("cannot register CUPTI activity buffers", r);
        return 1;
    }
    cuptiActivityEnableAllocationSource(1);
    // GPU/host clock calibration: CUPTI timestamps become the session clock, and the offset to
    // the host's realtime clock is recorded so other sources can be aligned.
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
    so.log = logLine;
    so.onMark = [a](const std::string& text) {
        std::lock_guard lk(a->sideMu);
        if (a->sideMarks.size() < 4096) a->sideMarks.push_back(text);
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
        return 1;
    }
    if (a->autostart && !setActivities(*a, true)) return 1;
    a->flusher = std::thread(flushLoop, a);
    // A forked child (DataLoader workers, multiprocessing) has none of our threads and cannot use
    // CUDA: the agent must do nothing there, least of all join a thread at exit.
    ::pthread_atfork(nullptr, nullptr, [] {
        g_disabled.store(true);
        g_agent = nullptr;
    });
    std::atexit(atExit);
    logLine(("recording agent ready; control socket " + a->server->path()).c_str());
    return 1;
}

} // namespace

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
