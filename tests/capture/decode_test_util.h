// Runs CUPTI activity buffers through the agent's decode path into a live stream and reads the
// stream back (tst_capture_decode, tst_capture_callbacks).
#pragma once

#include "capture/agent/decode.h"
#include "capture/protocol/control_server.h"
#include "capture/protocol/target_stream.h"
#include "capture_test_util.h"

#include <cupti.h>

#include <QTemporaryDir>
#include <cstring>
#include <vector>

namespace fstest {

// CUPTI lays records out back to back at 8-byte alignment; so do we.
struct BufferBuilder
{
    alignas(8) std::vector<uint8_t> bytes;
    template <class R> void add(const R& r)
    {
        const size_t at = bytes.size();
        bytes.resize(at + ((sizeof r + 7) & ~size_t{7}));
        std::memcpy(bytes.data() + at, &r, sizeof r);
    }
};

// A CUDA 13 MEMORY2 record of device memory (device 1, stream 7); pool: from a cudaMallocAsync
// pool.
inline CUpti_ActivityMemory4 memoryRecord(bool alloc, uint64_t addr, uint64_t bytes, uint64_t ts,
                                          bool pool, uint32_t correlation = 77)
{
    CUpti_ActivityMemory4 m;
    std::memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    m.memoryOperationType = alloc ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
                                  : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
    m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.correlationId = correlation;
    m.address = addr;
    m.bytes = bytes;
    m.timestamp = ts;
    m.deviceId = 1;
    m.streamId = 7;
    if (pool) {
        m.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
        m.memoryPoolConfig.address = 0x7f0000000000;
    }
    return m;
}

// Runs buf through decodeActivityBuffer into a streaming TargetStream and collects it. graphs,
// vmm: the launches and VMM calls the API callbacks saw (as the agent wires DecodeState).
inline Collected decodeBuffer(BufferBuilder& buf, int64_t offset,
                              fs::agent::DecodeState* stOut = nullptr,
                              fs::agent::GraphJoin* graphs = nullptr,
                              const fs::agent::VmmCalls* vmm = nullptr)
{
    using namespace fs;
    QTemporaryDir dir;
    proto::ControlServer::Options so;
    so.dir = dir.path().toStdString() + "/s";
    proto::ControlServer server(so);
    std::string err;
    if (!server.open(err)) qFatal("server: %s", err.c_str());
    proto::ControlClient client;
    if (!client.connect(server.path(), 5000, err) ||
        !client.command(proto::MsgType::Start, {}, 5000, err))
        qFatal("client: %s", err.c_str());
    proto::TargetStream stream(server, {});
    agent::DecodeState st;
    st.clockOffsetNs = offset;
    st.graphs = graphs;
    st.vmm = vmm;
    const size_t n = agent::decodeActivityBuffer(buf.bytes.data(), buf.bytes.size(), st, stream);
    stream.finish(proto::EndReason::TargetFinished);
    Collected c;
    c.drain(client, 5000);
    if (stOut) *stOut = st;
    c.others.emplace_back(0xffff, std::to_string(n));
    return c;
}

} // namespace fstest
