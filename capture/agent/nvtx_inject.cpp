// The agent as an NVTX tool (NVTX_INJECTION64_PATH = libfragscope-inject.so). CUPTI has no
// callbacks for the NVTX memory extension, so the agent takes NVTX's injection itself: NVTX calls
// InitializeInjectionNvtx2 with its export table, from which we fill the CORE and CORE2 (domain)
// function slots with the handlers below; the memory extension calls
// InitializeInjectionNvtxExtension, whose slots get the NvtxMemTracker handlers. Marks and
// ranges become Mark/Range events stamped on the host (session clock) here, so frames and
// `metric` marks keep working without CUPTI; heaps and regions become framework-level regions
// and allocations (nvtx_mem.h). Handlers never throw into the host and cost a lock and a copy.
#include "agent_core.h"
#include "nvtx_mem.h"

#include <atomic>
#include <cstdint>
#include <deque>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace fs::agent {
namespace {

namespace ev = proto::ev;

struct OpenRange
{
    std::string text;
    int64_t start;
};

constexpr size_t kMaxDepth = 1024;        // push/pop nesting kept per thread and domain
constexpr size_t kMaxStartEnd = 1u << 16; // start/end ranges open at once
constexpr size_t kMaxStrings = 1u << 20;  // registered strings and domains

struct NvtxState
{
    NvtxMemTracker mem;
    std::mutex mu;
    std::unordered_map<uint64_t, OpenRange> started; // nvtxRangeStart id -> range
    std::atomic<uint64_t> nextRangeId{1};
    std::deque<std::string> strings; // registered strings and domain names: stable addresses
};

NvtxState& state()
{
    static NvtxState* s = new NvtxState(); // never destroyed: NVTX may call during exit
    return *s;
}

// Push/pop ranges nest per thread (and per domain).
thread_local std::unordered_map<const void*, std::vector<OpenRange>>* t_stacks = nullptr;

std::vector<OpenRange>& stack(const void* domain)
{
    if (!t_stacks) t_stacks = new std::unordered_map<const void*, std::vector<OpenRange>>();
    return (*t_stacks)[domain];
}

std::string attrText(const nvtxEventAttributes_t* a)
{
    if (!a || a->size < offsetof(nvtxEventAttributes_t, message) + sizeof(a->message)) return {};
    return nvtxMessageText(a->messageType, a->message);
}

std::string wideText(const wchar_t* w)
{
    nvtxMessageValue_t m{};
    m.unicode = w;
    return nvtxMessageText(NVTX_MESSAGE_TYPE_UNICODE, m);
}

void mark(std::string text)
{
    SideEvent s;
    s.e.type = ev::Mark;
    s.e.time = coreNow();
    s.text = std::move(text);
    coreEmit(std::move(s));
}

void range(std::string text, int64_t start)
{
    SideEvent s;
    s.e.type = ev::Range;
    s.e.time = start;
    s.e.endTime = coreNow();
    s.text = std::move(text);
    coreEmit(std::move(s));
}

constexpr int64_t kIdle =
    std::numeric_limits<int64_t>::min(); // start time of a range pushed while idle: never sent

// Text is only made when someone records (message is a callable producing it).
template <class M> int push(const void* domain, M message)
{
    auto& st = stack(domain);
    if (st.size() >= kMaxDepth) return static_cast<int>(st.size());
    // Idle pushes still nest, so that pops stay paired, but cost no copy.
    if (coreRecording())
        st.push_back({message(), coreNow()});
    else
        st.push_back({{}, kIdle});
    return static_cast<int>(st.size()) - 1;
}

int pop(const void* domain)
{
    auto& st = stack(domain);
    if (st.empty()) return -1; // NVTX: a pop without a push returns a negative value
    OpenRange r = std::move(st.back());
    st.pop_back();
    if (r.start != kIdle && coreRecording()) range(std::move(r.text), r.start);
    return static_cast<int>(st.size());
}

template <class M> nvtxRangeId_t start(M message)
{
    NvtxState& s = state();
    const nvtxRangeId_t id = s.nextRangeId.fetch_add(1);
    if (!coreRecording()) return id; // its end finds nothing and sends nothing
    std::string text = message();
    std::lock_guard lk(s.mu);
    if (s.started.size() < kMaxStartEnd) s.started[id] = {std::move(text), coreNow()};
    return id;
}

template <class M> void markIfRecording(M message)
{
    if (coreRecording()) mark(message());
}

void end(nvtxRangeId_t id)
{
    NvtxState& s = state();
    OpenRange r;
    {
        std::lock_guard lk(s.mu);
        auto it = s.started.find(id);
        if (it == s.started.end()) return;
        r = std::move(it->second);
        s.started.erase(it);
    }
    range(std::move(r.text), r.start);
}

const std::string* keep(std::string text)
{
    NvtxState& s = state();
    std::lock_guard lk(s.mu);
    if (s.strings.size() >= kMaxStrings) return nullptr;
    s.strings.push_back(std::move(text));
    return &s.strings.back();
}

// Every handler: nothing when the agent is off, never an exception into the host.
template <class F> auto guarded(F f, decltype(f()) fallback) -> decltype(f())
{
    if (!coreActive()) return fallback;
    try {
        return f();
    } catch (...) {
        return fallback;
    }
}

// ---- CORE ----
void NVTX_API markEx(const nvtxEventAttributes_t* a)
{
    guarded([&] { return markIfRecording([&] { return attrText(a); }), 0; }, 0);
}
void NVTX_API markA(const char* m)
{
    guarded([&] { return markIfRecording([&] { return std::string(m ? m : ""); }), 0; }, 0);
}
void NVTX_API markW(const wchar_t* m)
{
    guarded([&] { return markIfRecording([&] { return wideText(m); }), 0; }, 0);
}
nvtxRangeId_t NVTX_API rangeStartEx(const nvtxEventAttributes_t* a)
{
    return guarded([&] { return start([&] { return attrText(a); }); }, nvtxRangeId_t{0});
}
nvtxRangeId_t NVTX_API rangeStartA(const char* m)
{
    return guarded([&] { return start([&] { return std::string(m ? m : ""); }); },
                   nvtxRangeId_t{0});
}
nvtxRangeId_t NVTX_API rangeStartW(const wchar_t* m)
{
    return guarded([&] { return start([&] { return wideText(m); }); }, nvtxRangeId_t{0});
}
void NVTX_API rangeEnd(nvtxRangeId_t id)
{
    guarded([&] { return end(id), 0; }, 0);
}
int NVTX_API rangePushEx(const nvtxEventAttributes_t* a)
{
    return guarded([&] { return push(nullptr, [&] { return attrText(a); }); }, -1);
}
int NVTX_API rangePushA(const char* m)
{
    return guarded([&] { return push(nullptr, [&] { return std::string(m ? m : ""); }); }, -1);
}
int NVTX_API rangePushW(const wchar_t* m)
{
    return guarded([&] { return push(nullptr, [&] { return wideText(m); }); }, -1);
}
int NVTX_API rangePop()
{
    return guarded([&] { return pop(nullptr); }, -1);
}

// ---- CORE2 (domains) ----
void NVTX_API domainMarkEx(nvtxDomainHandle_t, const nvtxEventAttributes_t* a)
{
    guarded([&] { return markIfRecording([&] { return attrText(a); }), 0; }, 0);
}
nvtxRangeId_t NVTX_API domainRangeStartEx(nvtxDomainHandle_t, const nvtxEventAttributes_t* a)
{
    return guarded([&] { return start([&] { return attrText(a); }); }, nvtxRangeId_t{0});
}
void NVTX_API domainRangeEnd(nvtxDomainHandle_t, nvtxRangeId_t id)
{
    guarded([&] { return end(id), 0; }, 0);
}
int NVTX_API domainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a)
{
    return guarded([&] { return push(d, [&] { return attrText(a); }); }, -1);
}
int NVTX_API domainRangePop(nvtxDomainHandle_t d)
{
    return guarded([&] { return pop(d); }, -1);
}
nvtxStringHandle_t NVTX_API domainRegisterStringA(nvtxDomainHandle_t, const char* s)
{
    return guarded(
        [&] {
            return reinterpret_cast<nvtxStringHandle_t>(const_cast<std::string*>(
                keep(s ? std::string(s, strnlen(s, 4096)) : std::string())));
        },
        nvtxStringHandle_t{nullptr});
}
nvtxStringHandle_t NVTX_API domainRegisterStringW(nvtxDomainHandle_t, const wchar_t* s)
{
    return guarded(
        [&] {
            return reinterpret_cast<nvtxStringHandle_t>(
                const_cast<std::string*>(keep(wideText(s))));
        },
        nvtxStringHandle_t{nullptr});
}
// Domains only need to be distinct non-null handles: the name's copy serves as one.
nvtxDomainHandle_t NVTX_API domainCreateA(const char* name)
{
    return guarded(
        [&] {
            return reinterpret_cast<nvtxDomainHandle_t>(
                const_cast<std::string*>(keep(name ? name : "")));
        },
        nvtxDomainHandle_t{nullptr});
}
nvtxDomainHandle_t NVTX_API domainCreateW(const wchar_t* name)
{
    return guarded(
        [&] {
            return reinterpret_cast<nvtxDomainHandle_t>(
                const_cast<std::string*>(keep(wideText(name))));
        },
        nvtxDomainHandle_t{nullptr});
}

// ---- MEM extension ----
// Region traffic is skipped while idle (like CUDA allocations before an attach, regions
// registered then are unknown to a later recording).
template <class F> void memCall(F f)
{
    guarded(
        [&] {
            if (!coreRecording()) return 0;
            std::vector<SideEvent> out;
            f(coreNow(), out);
            coreEmit(out);
            return 0;
        },
        0);
}
nvtxMemHeapHandle_t NVTX_API memHeapRegister(nvtxDomainHandle_t, const nvtxMemHeapDesc_t* d)
{
    return guarded(
        [&] {
            std::vector<SideEvent> out;
            // Heaps are tracked even while idle (rare calls; their handles must stay right).
            nvtxMemHeapHandle_t h = state().mem.heapRegister(d, coreNow(), out);
            if (coreRecording()) coreEmit(out);
            return h;
        },
        reinterpret_cast<nvtxMemHeapHandle_t>(intptr_t{-1})); // NVTX_MEM_HEAP_HANDLE_NO_TOOL
}
void NVTX_API memHeapUnregister(nvtxDomainHandle_t, nvtxMemHeapHandle_t h)
{
    guarded(
        [&] {
            std::vector<SideEvent> out;
            state().mem.heapUnregister(h, coreNow(), out);
            if (coreRecording()) coreEmit(out);
            return 0;
        },
        0);
}
void NVTX_API memHeapReset(nvtxDomainHandle_t, nvtxMemHeapHandle_t h)
{
    memCall([&](int64_t t, std::vector<SideEvent>& out) { state().mem.heapReset(h, t, out); });
}
void NVTX_API memRegionsRegister(nvtxDomainHandle_t, const nvtxMemRegionsRegisterBatch_t* b)
{
    // Idle: no events, but the caller still gets its region handles.
    if (coreActive() && !coreRecording()) return NvtxMemTracker::fillHandles(b);
    memCall(
        [&](int64_t t, std::vector<SideEvent>& out) { state().mem.regionsRegister(b, t, out); });
}
void NVTX_API memRegionsResize(nvtxDomainHandle_t, const nvtxMemRegionsResizeBatch_t* b)
{
    memCall([&](int64_t t, std::vector<SideEvent>& out) { state().mem.regionsResize(b, t, out); });
}
void NVTX_API memRegionsUnregister(nvtxDomainHandle_t, const nvtxMemRegionsUnregisterBatch_t* b)
{
    memCall(
        [&](int64_t t, std::vector<SideEvent>& out) { state().mem.regionsUnregister(b, t, out); });
}

template <class F> NvtxFunctionPointer fn(F* f)
{
    return reinterpret_cast<NvtxFunctionPointer>(f);
}

bool assign(const NvtxExportTableCallbacks* cb, NvtxCallbackModule module,
            std::initializer_list<std::pair<unsigned, NvtxFunctionPointer>> slots)
{
    NvtxFunctionTable table = nullptr;
    unsigned size = 0;
    if (!cb->GetModuleFunctionTable(module, &table, &size) || !table) return false;
    for (const auto& [id, f] : slots)
        if (id < size && table[id]) *table[id] = f;
    return true;
}

int initializeNvtx(NvtxGetExportTableFunc_t getExportTable)
{
    if (!getExportTable || !coreStart()) return 0; // 0: NVTX turns every call into a no-op
    const auto* cb =
        static_cast<const NvtxExportTableCallbacks*>(getExportTable(NVTX_ETID_CALLBACKS));
    if (!cb || cb->struct_size < sizeof(NvtxExportTableCallbacks)) {
        coreLog("NVTX export table missing; NVTX markers are not recorded");
        return 0;
    }
    if (!assign(cb, NVTX_CB_MODULE_CORE,
                {{NVTX_CBID_CORE_MarkEx, fn(markEx)},
                 {NVTX_CBID_CORE_MarkA, fn(markA)},
                 {NVTX_CBID_CORE_MarkW, fn(markW)},
                 {NVTX_CBID_CORE_RangeStartEx, fn(rangeStartEx)},
                 {NVTX_CBID_CORE_RangeStartA, fn(rangeStartA)},
                 {NVTX_CBID_CORE_RangeStartW, fn(rangeStartW)},
                 {NVTX_CBID_CORE_RangeEnd, fn(rangeEnd)},
                 {NVTX_CBID_CORE_RangePushEx, fn(rangePushEx)},
                 {NVTX_CBID_CORE_RangePushA, fn(rangePushA)},
                 {NVTX_CBID_CORE_RangePushW, fn(rangePushW)},
                 {NVTX_CBID_CORE_RangePop, fn(rangePop)}}))
        return 0;
    assign(cb, NVTX_CB_MODULE_CORE2,
           {{NVTX_CBID_CORE2_DomainMarkEx, fn(domainMarkEx)},
            {NVTX_CBID_CORE2_DomainRangeStartEx, fn(domainRangeStartEx)},
            {NVTX_CBID_CORE2_DomainRangeEnd, fn(domainRangeEnd)},
            {NVTX_CBID_CORE2_DomainRangePushEx, fn(domainRangePushEx)},
            {NVTX_CBID_CORE2_DomainRangePop, fn(domainRangePop)},
            {NVTX_CBID_CORE2_DomainRegisterStringA, fn(domainRegisterStringA)},
            {NVTX_CBID_CORE2_DomainRegisterStringW, fn(domainRegisterStringW)},
            {NVTX_CBID_CORE2_DomainCreateA, fn(domainCreateA)},
            {NVTX_CBID_CORE2_DomainCreateW, fn(domainCreateW)}});
    return 1;
}

int initializeExtension(nvtxExtModuleInfo_t* info)
{
    if (!info || !coreStart()) return 0;
    // Other extension modules (payload, counters) get no handlers: NVTX makes them no-ops.
    if (info->moduleId != NVTX_EXT_MODULEID_MEM || info->segmentsCount < 1 || !info->segments)
        return 1;
    nvtxExtModuleSegment_t& seg = info->segments[0];
    const std::pair<unsigned, intptr_t> slots[] = {
        {NVTX3EXT_CBID_nvtxMemHeapRegister, reinterpret_cast<intptr_t>(memHeapRegister)},
        {NVTX3EXT_CBID_nvtxMemHeapUnregister, reinterpret_cast<intptr_t>(memHeapUnregister)},
        {NVTX3EXT_CBID_nvtxMemHeapReset, reinterpret_cast<intptr_t>(memHeapReset)},
        {NVTX3EXT_CBID_nvtxMemRegionsRegister, reinterpret_cast<intptr_t>(memRegionsRegister)},
        {NVTX3EXT_CBID_nvtxMemRegionsResize, reinterpret_cast<intptr_t>(memRegionsResize)},
        {NVTX3EXT_CBID_nvtxMemRegionsUnregister, reinterpret_cast<intptr_t>(memRegionsUnregister)},
    };
    for (const auto& [id, f] : slots)
        if (id < seg.slotCount && seg.functionSlots) seg.functionSlots[id] = f;
    return 1;
}

} // namespace
} // namespace fs::agent

extern "C" {
// NVTX's injection entry points (NVTX_INJECTION64_PATH). Return 1 on success; 0 makes NVTX turn
// the calls into no-ops, which is what a disabled agent wants. Never throw into the host.
__attribute__((visibility("default"))) int
InitializeInjectionNvtx2(NvtxGetExportTableFunc_t getExportTable)
{
    try {
        return fs::agent::initializeNvtx(getExportTable);
    } catch (...) {
        return 0;
    }
}

__attribute__((visibility("default"))) int
InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t* moduleInfo)
{
    try {
        return fs::agent::initializeExtension(moduleInfo);
    } catch (...) {
        return 0;
    }
}
}
