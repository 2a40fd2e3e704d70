#include "nvtx_mem.h"

#include <cstring>

namespace fs::agent {

namespace ev = proto::ev;

namespace {

uint64_t handleValue(const void* h)
{
    return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(h));
}

SideEvent make(uint8_t type, int64_t t, uint64_t address, uint64_t size)
{
    SideEvent s;
    s.e.type = type;
    s.e.time = t;
    s.e.address = address;
    s.e.size = size;
    s.e.level = ev::LevelFramework;
    return s;
}

// Element i of a batch whose elements are `stride` bytes apart (the caller's struct may be a
// newer, larger version); false when the element is too small to hold T.
template <class T> bool element(const void* base, size_t stride, size_t i, T& out)
{
    if (!base || stride < sizeof(T)) return false;
    std::memcpy(&out, static_cast<const char*>(base) + i * stride, sizeof(T));
    return true;
}

void appendUtf8(std::string& s, uint32_t c)
{
    if (c < 0x80) {
        s += static_cast<char>(c);
    } else if (c < 0x800) {
        s += static_cast<char>(0xc0 | (c >> 6));
        s += static_cast<char>(0x80 | (c & 0x3f));
    } else if (c < 0x10000) {
        s += static_cast<char>(0xe0 | (c >> 12));
        s += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
        s += static_cast<char>(0x80 | (c & 0x3f));
    } else if (c < 0x110000) {
        s += static_cast<char>(0xf0 | (c >> 18));
        s += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
        s += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
        s += static_cast<char>(0x80 | (c & 0x3f));
    }
}

} // namespace

std::string nvtxMessageText(uint32_t messageType, const nvtxMessageValue_t& m)
{
    constexpr size_t kMax = 4096; // a message is a label, not a payload
    switch (messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
        return m.ascii ? std::string(m.ascii, strnlen(m.ascii, kMax)) : std::string();
    case NVTX_MESSAGE_TYPE_UNICODE: {
        std::string s;
        for (const wchar_t* p = m.unicode; p && *p && s.size() < kMax; ++p)
            appendUtf8(s, static_cast<uint32_t>(*p));
        return s;
    }
    case NVTX_MESSAGE_TYPE_REGISTERED:
        // Our nvtxDomainRegisterString* hands out pointers to strings the agent keeps.
        return m.registered ? *reinterpret_cast<const std::string*>(m.registered) : std::string();
    default:
        return {};
    }
}

nvtxMemHeapHandle_t NvtxMemTracker::heapRegister(const nvtxMemHeapDesc_t* desc, int64_t t,
                                                 std::vector<SideEvent>& out)
{
    std::lock_guard lk(mu_);
    nvtxMemVirtualRangeDesc_t range{};
    const bool va = desc && desc->type == NVTX_MEM_TYPE_VIRTUAL_ADDRESS && desc->typeSpecificDesc &&
                    desc->typeSpecificDescSize >= sizeof(nvtxMemVirtualRangeDesc_t) &&
                    element(desc->typeSpecificDesc, sizeof range, 0, range) && range.ptr;
    if (!va) {
        // Not process address space (or malformed): hand out a unique handle, record nothing.
        ++ignored_;
        // Odd values cannot collide with the (aligned) addresses of real heaps.
        const uint64_t h = (nextOpaque_++ << 1) | 1;
        heaps_[h] = Heap{};
        return reinterpret_cast<nvtxMemHeapHandle_t>(static_cast<uintptr_t>(h));
    }
    const uint64_t addr = handleValue(range.ptr);
    Heap& h = heaps_[addr];
    if (h.virtualAddress) freeAll(h, t, out); // re-registered without unregister: start afresh
    h.address = addr;
    h.size = range.size;
    h.virtualAddress = true;
    SideEvent s = make(ev::RegionCreate, t, addr, range.size);
    s.e.regionKind =
        (desc->usage & NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR) ? ev::KindPool : ev::KindSegment;
    s.text = nvtxMessageText(desc->messageType, desc->message);
    out.push_back(std::move(s));
    return reinterpret_cast<nvtxMemHeapHandle_t>(static_cast<uintptr_t>(addr));
}

void NvtxMemTracker::freeRegion(uint64_t address, int64_t t, std::vector<SideEvent>& out)
{
    auto it = regionHeap_.find(address);
    uint64_t size = 0;
    if (it != regionHeap_.end()) {
        auto h = heaps_.find(it->second);
        if (h != heaps_.end()) {
            auto r = h->second.regions.find(address);
            if (r != h->second.regions.end()) {
                size = r->second;
                h->second.regions.erase(r);
                --regionCount_;
            }
        }
        regionHeap_.erase(it);
    }
    // An unknown region is still reported: ingest records it as an unknown free.
    out.push_back(make(ev::Free, t, address, size));
}

void NvtxMemTracker::track(uint64_t handle, Heap& h, uint64_t address, uint64_t size, int64_t t,
                           std::vector<SideEvent>& out)
{
    if (regionCount_ < kMaxRegions) {
        h.regions[address] = size;
        regionHeap_[address] = handle;
        ++regionCount_;
    }
    out.push_back(make(ev::Alloc, t, address, size));
}

void NvtxMemTracker::freeAll(Heap& h, int64_t t, std::vector<SideEvent>& out)
{
    for (const auto& [addr, size] : h.regions) {
        out.push_back(make(ev::Free, t, addr, size));
        regionHeap_.erase(addr);
    }
    regionCount_ -= h.regions.size();
    h.regions.clear();
}

void NvtxMemTracker::heapUnregister(nvtxMemHeapHandle_t heap, int64_t t,
                                    std::vector<SideEvent>& out)
{
    std::lock_guard lk(mu_);
    auto it = heaps_.find(handleValue(heap));
    if (it == heaps_.end() || it->first == 0) { // the process-wide heap cannot be unregistered
        ++ignored_;
        return;
    }
    // Unregistering a heap invalidates its regions: they end here, then the region goes.
    freeAll(it->second, t, out);
    if (it->second.virtualAddress) out.push_back(make(ev::RegionDestroy, t, it->first, 0));
    heaps_.erase(it);
}

void NvtxMemTracker::heapReset(nvtxMemHeapHandle_t heap, int64_t t, std::vector<SideEvent>& out)
{
    std::lock_guard lk(mu_);
    auto it = heaps_.find(handleValue(heap));
    if (it == heaps_.end()) return;
    freeAll(it->second, t, out);
}

void NvtxMemTracker::regionsRegister(const nvtxMemRegionsRegisterBatch_t* b, int64_t t,
                                     std::vector<SideEvent>& out)
{
    if (!b || b->regionType != NVTX_MEM_TYPE_VIRTUAL_ADDRESS) {
        std::lock_guard lk(mu_);
        ++ignored_;
        return;
    }
    std::lock_guard lk(mu_);
    const uint64_t hv = handleValue(b->heap);
    auto hit = heaps_.find(hv);
    if (hit == heaps_.end() && hv == 0) hit = heaps_.emplace(0, Heap{}).first; // process-wide
    if (hit == heaps_.end() || (hv != 0 && !hit->second.virtualAddress)) {
        ++ignored_;
        return;
    }
    for (size_t i = 0; i < b->regionCount; ++i) {
        nvtxMemVirtualRangeDesc_t r{};
        if (!element(b->regionDescElements, b->regionDescElementSize, i, r)) {
            ++ignored_;
            return;
        }
        const uint64_t addr = handleValue(r.ptr);
        // The region's handle is its address (NVTX: "this will also become the handle").
        if (b->regionHandleElementsOut)
            b->regionHandleElementsOut[i] =
                reinterpret_cast<nvtxMemRegionHandle_t>(static_cast<uintptr_t>(addr));
        // A region registered again without an unregister ends the old one first.
        if (regionHeap_.count(addr)) freeRegion(addr, t, out);
        track(hv, hit->second, addr, r.size, t, out);
    }
}

void NvtxMemTracker::fillHandles(const nvtxMemRegionsRegisterBatch_t* b)
{
    if (!b || b->regionType != NVTX_MEM_TYPE_VIRTUAL_ADDRESS || !b->regionHandleElementsOut) return;
    for (size_t i = 0; i < b->regionCount; ++i) {
        nvtxMemVirtualRangeDesc_t r{};
        if (!element(b->regionDescElements, b->regionDescElementSize, i, r)) return;
        b->regionHandleElementsOut[i] =
            reinterpret_cast<nvtxMemRegionHandle_t>(static_cast<uintptr_t>(handleValue(r.ptr)));
    }
}

void NvtxMemTracker::regionsResize(const nvtxMemRegionsResizeBatch_t* b, int64_t t,
                                   std::vector<SideEvent>& out)
{
    std::lock_guard lk(mu_);
    if (!b || b->regionType != NVTX_MEM_TYPE_VIRTUAL_ADDRESS) {
        ++ignored_;
        return;
    }
    for (size_t i = 0; i < b->regionDescCount; ++i) {
        nvtxMemVirtualRangeDesc_t r{};
        if (!element(b->regionDescElements, b->regionDescElementSize, i, r)) {
            ++ignored_;
            return;
        }
        const uint64_t addr = handleValue(r.ptr);
        auto it = regionHeap_.find(addr);
        const uint64_t heap = it == regionHeap_.end() ? 0 : it->second;
        freeRegion(addr, t, out);
        track(heap, heaps_[heap], addr, r.size, t, out);
    }
}

void NvtxMemTracker::regionsUnregister(const nvtxMemRegionsUnregisterBatch_t* b, int64_t t,
                                       std::vector<SideEvent>& out)
{
    std::lock_guard lk(mu_);
    if (!b || (b->refType != NVTX_MEM_REGION_REF_TYPE_POINTER &&
               b->refType != NVTX_MEM_REGION_REF_TYPE_HANDLE)) {
        ++ignored_;
        return;
    }
    for (size_t i = 0; i < b->refCount; ++i) {
        nvtxMemRegionRef_t ref{};
        if (!element(b->refElements, b->refElementSize, i, ref)) {
            ++ignored_;
            return;
        }
        // Handles are addresses (see regionsRegister), so both reference kinds read alike.
        freeRegion(b->refType == NVTX_MEM_REGION_REF_TYPE_POINTER ? handleValue(ref.pointer)
                                                                  : handleValue(ref.handle),
                   t, out);
    }
}

size_t NvtxMemTracker::heaps() const
{
    std::lock_guard lk(mu_);
    return heaps_.size();
}

size_t NvtxMemTracker::liveRegions() const
{
    std::lock_guard lk(mu_);
    return regionCount_;
}

uint64_t NvtxMemTracker::ignored() const
{
    std::lock_guard lk(mu_);
    return ignored_;
}

} // namespace fs::agent
