// What a source writes to: Ingest (into a session file) or a live stream (capture/).
// Sources such as the simulator are written against this interface only.
#pragma once

#include "events.h"

#include <string>
#include <string_view>
#include <vector>

namespace fs {

// What a simulator knows about one frame and no capture could (synthetic sessions only; stored
// in the sim_truth_* tables, docs/session-format.md). The analysis never reads it: evaluations
// of the analysis do.
struct SimTruthFrame
{
    struct Kernel
    {
        std::string name;
        int64_t calls = 0;
        bool lowersCoherence = false; // the simulator's quality model counts these calls
    };
    // One thing that lowered the frame's quality in the simulator's model, and by how much.
    struct Cause
    {
        std::string mechanism;    // workspace_fallback, oom_retry, graph_inputs_moved, ...
        int64_t causeFrame = 0;   // the frame holding the event that started it
        double qualityFactor = 1; // the frame's score was multiplied by this
    };
    int64_t frame = 0;
    int64_t attentionCalls = 0;
    int64_t workspaceFailures = 0; // attention workspace requests the allocator could not serve
    int64_t ooms = 0;
    std::vector<Kernel> fallbackKernels; // calls per fallback kernel that ran in the frame
    std::vector<Cause> causes;           // empty: nothing lowered the frame's quality
};

class EventSink
{
public:
    virtual ~EventSink() = default;
    virtual StringId intern(std::string_view s) = 0;
    virtual StackId internStack(const std::vector<StringId>& frames) = 0;
    virtual void addDevice(const DeviceInfo& d) = 0;
    virtual void addProcess(const ProcessInfo& p) = 0;
    virtual void setMeta(const std::string& key, const std::string& value) = 0;
    virtual void add(const Event& e) = 0;
    virtual void addFrameMetric(int64_t frame, const std::string& name, double value,
                                const std::string& source) = 0;
    virtual void warn(const std::string& message) = 0;
    // Synthetic sources only; sinks with nowhere to keep it ignore it.
    virtual void addSimTruth(const SimTruthFrame&) {}
    // A flight recorder kept only [beginNs, endNs] of this stretch of the run
    // (capture/recorder/flight_recorder.h); sinks with nowhere to keep it ignore it.
    virtual void addWindow(int64_t /*beginNs*/, int64_t /*endNs*/, const std::string& /*trigger*/,
                           int64_t /*events*/)
    {
    }
};

// Drops everything (a run whose events nobody keeps: the simulator's probe and shared-pool runs).
class NullSink final : public EventSink
{
public:
    StringId intern(std::string_view) override { return StringId{1}; }
    StackId internStack(const std::vector<StringId>&) override { return StackId{1}; }
    void addDevice(const DeviceInfo&) override {}
    void addProcess(const ProcessInfo&) override {}
    void setMeta(const std::string&, const std::string&) override {}
    void add(const Event&) override {}
    void addFrameMetric(int64_t, const std::string&, double, const std::string&) override {}
    void warn(const std::string&) override {}
};

// Hands every call on to another sink; a sink that changes some of them (paces, restamps,
// filters events) overrides only those.
class ForwardingSink : public EventSink
{
public:
    explicit ForwardingSink(EventSink& next) : next_(next) {}
    StringId intern(std::string_view s) override { return next_.intern(s); }
    StackId internStack(const std::vector<StringId>& f) override { return next_.internStack(f); }
    void addDevice(const DeviceInfo& d) override { next_.addDevice(d); }
    void addProcess(const ProcessInfo& p) override { next_.addProcess(p); }
    void setMeta(const std::string& k, const std::string& v) override { next_.setMeta(k, v); }
    void add(const Event& e) override { next_.add(e); }
    void addFrameMetric(int64_t frame, const std::string& name, double value,
                        const std::string& source) override
    {
        next_.addFrameMetric(frame, name, value, source);
    }
    void warn(const std::string& m) override { next_.warn(m); }
    void addSimTruth(const SimTruthFrame& t) override { next_.addSimTruth(t); }
    void addWindow(int64_t beginNs, int64_t endNs, const std::string& trigger,
                   int64_t events) override
    {
        next_.addWindow(beginNs, endNs, trigger, events);
    }

protected:
    EventSink& next_;
};

} // namespace fs
