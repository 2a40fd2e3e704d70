#include "callbacks.h"

// cupti.h brings cuda.h and generated_cuda_meta.h (the cu*_params structs; it has no guard).

namespace fs::agent {

namespace ev = proto::ev;

const CUpti_CallbackId kApiCallbacks[] = {
    // VMM: reservations are invisible to the memory activity; the mapping calls' correlation
    // ids mark the MEMORY2 records that repeat a mapping (VmmCalls).
    CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve,
    CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree,
    CUPTI_DRIVER_TRACE_CBID_cuMemMap,
    CUPTI_DRIVER_TRACE_CBID_cuMemUnmap,
    CUPTI_DRIVER_TRACE_CBID_cuMemSetAccess,
    CUPTI_DRIVER_TRACE_CBID_cuMemRelease,
    // Allocation APIs: only their CUDA_ERROR_OUT_OF_MEMORY exits become events.
    CUPTI_DRIVER_TRACE_CBID_cuMemAlloc,
    CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemCreate,
    // Graphs: exec -> graph at instantiation, correlation id -> exec at launch.
    CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate,
    CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate_v2,
    CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags,
    CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams,
    CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuGraphExecDestroy,
};
const size_t kApiCallbackCount = sizeof kApiCallbacks / sizeof kApiCallbacks[0];

// ---- GraphJoin -------------------------------------------------------------------------

template <class K> void BoundedMap<K>::put(K k, uint64_t v)
{
    if (map.insert_or_assign(k, v).second) order.push_back(k);
    // An entry whose counterpart never comes (activities off, records dropped) must not stay
    // forever: the oldest go first.
    while (map.size() > kMaxEntries && !order.empty()) {
        map.erase(order.front());
        order.pop_front();
    }
    // Keys erased by take/destroy leave stale entries in the order queue: trim it as well.
    while (order.size() > 2 * kMaxEntries)
        order.pop_front();
    if (map.empty()) order.clear();
}

void GraphJoin::instantiated(uint64_t execId, uint64_t graphId)
{
    std::lock_guard lk(mu_);
    execs_.put(execId, graphId);
}

void GraphJoin::destroyed(uint64_t execId)
{
    std::lock_guard lk(mu_);
    execs_.map.erase(execId);
}

void GraphJoin::launched(uint32_t correlationId, uint64_t execId)
{
    std::lock_guard lk(mu_);
    launches_.put(correlationId, execId);
}

uint64_t GraphJoin::takeExec(uint32_t correlationId)
{
    std::lock_guard lk(mu_);
    auto it = launches_.map.find(correlationId);
    if (it == launches_.map.end()) return 0;
    const uint64_t exec = it->second;
    launches_.map.erase(it);
    if (launches_.map.empty()) launches_.order.clear();
    return exec;
}

void VmmCalls::called(uint32_t correlationId)
{
    std::lock_guard lk(mu_);
    calls_.put(correlationId, 0);
}

bool VmmCalls::contains(uint32_t correlationId) const
{
    std::lock_guard lk(mu_);
    return calls_.map.count(correlationId) != 0;
}

size_t VmmCalls::known() const
{
    std::lock_guard lk(mu_);
    return calls_.map.size();
}

uint64_t GraphJoin::graphOf(uint64_t execId) const
{
    std::lock_guard lk(mu_);
    auto it = execs_.map.find(execId);
    return it == execs_.map.end() ? 0 : it->second;
}

size_t GraphJoin::launchesPending() const
{
    std::lock_guard lk(mu_);
    return launches_.map.size();
}

size_t GraphJoin::execsKnown() const
{
    std::lock_guard lk(mu_);
    return execs_.map.size();
}

// ---- API exit -> event -----------------------------------------------------------------

namespace {

uint32_t streamOf(const ApiState& st, CUcontext ctx, CUstream s)
{
    return st.resolve.streamId ? st.resolve.streamId(ctx, s) : 0;
}

uint64_t execIdOf(const ApiState& st, CUgraphExec x)
{
    return st.resolve.execId ? st.resolve.execId(x) : 0;
}

// Stream-ordered allocations (cuMemAllocAsync, cuMemAllocFromPoolAsync) come from a pool.
template <class P>
bool poolRequest(const void* params, CUcontext ctx, const ApiState& st, proto::WireEvent& e)
{
    const auto* p = static_cast<const P*>(params);
    e.size = p->bytesize;
    e.stream = streamOf(st, ctx, p->hStream);
    e.level = ev::LevelPool;
    return true;
}

// The requested size, stream and level of an allocation API call; false for other calls.
bool allocationRequest(CUpti_CallbackId cbid, const void* params, const CUcontext ctx,
                       const ApiState& st, proto::WireEvent& e)
{
    e.level = ev::LevelDriver;
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc:
        e.size = static_cast<const cuMemAlloc_params*>(params)->bytesize;
        return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2:
        e.size = static_cast<const cuMemAlloc_v2_params*>(params)->bytesize;
        return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch: {
        const auto* p = static_cast<const cuMemAllocPitch_params*>(params);
        e.size = uint64_t{p->WidthInBytes} * p->Height;
        return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
        const auto* p = static_cast<const cuMemAllocPitch_v2_params*>(params);
        e.size = uint64_t{p->WidthInBytes} * p->Height;
        return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged:
        e.size = static_cast<const cuMemAllocManaged_params*>(params)->bytesize;
        return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate:
        e.size = static_cast<const cuMemCreate_params*>(params)->size;
        return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
        return poolRequest<cuMemAllocAsync_params>(params, ctx, st, e);
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz:
        return poolRequest<cuMemAllocAsync_ptsz_params>(params, ctx, st, e);
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
        return poolRequest<cuMemAllocFromPoolAsync_params>(params, ctx, st, e);
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz:
        return poolRequest<cuMemAllocFromPoolAsync_ptsz_params>(params, ctx, st, e);
    default:
        return false;
    }
}

// Every cuGraphInstantiate* variant starts with (CUgraphExec* phGraphExec, CUgraph hGraph): a
// GraphInstantiate event (graph id, exec id) beside the join of later launches to their exec.
template <class P>
bool instantiate(const void* params, ApiState& st, uint32_t device, proto::WireEvent& e)
{
    const auto* p = static_cast<const P*>(params);
    if (!p->phGraphExec) return false;
    const uint64_t exec = execIdOf(st, *p->phGraphExec);
    const uint64_t graph = st.resolve.graphId ? st.resolve.graphId(p->hGraph) : 0;
    if (exec == 0) return false;
    st.graphs.instantiated(exec, graph);
    e.type = ev::GraphInstantiate;
    e.device = device;
    e.aux = graph;
    e.aux2 = exec;
    return true;
}

} // namespace

bool apiExitEvent(CUpti_CallbackId cbid, const CUpti_CallbackData& info, int64_t time, ApiState& st,
                  proto::WireEvent& e)
{
    if (info.callbackSite != CUPTI_API_EXIT || !info.functionReturnValue || !info.functionParams)
        return false;
    const CUresult rc = *static_cast<const CUresult*>(info.functionReturnValue);
    const void* params = info.functionParams;
    e = proto::WireEvent{};
    e.time = time;
    if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
        if (!allocationRequest(cbid, params, info.context, st, e)) return false;
        e.type = ev::Oom;
        e.device = st.resolve.deviceId ? st.resolve.deviceId(info.context) : 0;
        e.aux = st.resolve.deviceFreeBytes ? st.resolve.deviceFreeBytes(info.context) : 0;
        ++st.ooms;
        return true;
    }
    if (rc != CUDA_SUCCESS) return false;
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate:
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap:
    case CUPTI_DRIVER_TRACE_CBID_cuMemSetAccess:
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap:
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease:
        st.vmm.called(info.correlationId);
        break;
    default:
        break;
    }
    // The device of a graph event (instantiation, exec destroyed): the call's context's.
    const auto device = [&] {
        return st.resolve.deviceId ? st.resolve.deviceId(info.context) : uint32_t{0};
    };
    // VMM reservations host an allocator's blocks (PyTorch expandable segments).
    e.level = ev::LevelFramework;
    e.regionKind = ev::KindVmm;
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve: {
        const auto* p = static_cast<const cuMemAddressReserve_params*>(params);
        e.type = ev::RegionCreate;
        e.address = p->ptr ? *p->ptr : 0;
        e.size = p->size;
        return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree: {
        const auto* p = static_cast<const cuMemAddressFree_params*>(params);
        e.type = ev::RegionDestroy;
        e.address = p->ptr;
        return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
        const auto* p = static_cast<const cuMemMap_params*>(params);
        e.type = ev::RegionMap;
        e.address = p->ptr;
        e.size = p->size;
        return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap: {
        const auto* p = static_cast<const cuMemUnmap_params*>(params);
        e.type = ev::RegionUnmap;
        e.address = p->ptr;
        e.size = p->size;
        return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate:
        return instantiate<cuGraphInstantiate_params>(params, st, device(), e);
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate_v2:
        return instantiate<cuGraphInstantiate_v2_params>(params, st, device(), e);
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags:
        return instantiate<cuGraphInstantiateWithFlags_params>(params, st, device(), e);
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams:
        return instantiate<cuGraphInstantiateWithParams_params>(params, st, device(), e);
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams_ptsz:
        return instantiate<cuGraphInstantiateWithParams_ptsz_params>(params, st, device(), e);
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch: {
        const auto* p = static_cast<const cuGraphLaunch_params*>(params);
        st.graphs.launched(info.correlationId, execIdOf(st, p->hGraph));
        return false;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz: {
        const auto* p = static_cast<const cuGraphLaunch_ptsz_params*>(params);
        st.graphs.launched(info.correlationId, execIdOf(st, p->hGraphExec));
        return false;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecDestroy: {
        const auto* p = static_cast<const cuGraphExecDestroy_params*>(params);
        const uint64_t exec = execIdOf(st, p->hGraphExec);
        st.graphs.destroyed(exec);
        e.type = ev::GraphExecDestroy;
        e.device = device();
        e.aux2 = exec;
        return exec != 0;
    }
    default:
        return false;
    }
}

} // namespace fs::agent
