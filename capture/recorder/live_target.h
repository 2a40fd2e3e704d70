// An EventSink that makes the current process a capture target: it serves the same control
// socket and writes the same stream as the agent. `fragscope simulate --live` runs the simulator
// into it, so record/attach/live views are tested end to end without a GPU.
#pragma once

#include "capture/protocol/control_server.h"
#include "capture/protocol/target_stream.h"
#include "core/event_sink.h"

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace fs::capture {

class LiveTarget final : public EventSink
{
public:
    struct Options
    {
        std::string kind = "simulator";
        std::string commandLine;
        std::string socketDir; // default proto::socketDir()
        // From the environment `fragscope record` sets (FRAGSCOPE_AUTOSTART/LAUNCHED_BY) unless
        // overridden.
        bool waitForRecorder = false;
        uint32_t launchedBy = 0;
    };
    // Reads FRAGSCOPE_AUTOSTART=1 and FRAGSCOPE_LAUNCHED_BY into opts.
    static Options fromEnvironment(Options opts);

    explicit LiveTarget(Options opts);
    ~LiveTarget() override;

    bool open(std::string& err);
    const std::string& socketPath() const { return server_->path(); }
    // Blocks until a recorder sent Start (true) or timeoutMs passed (false).
    bool waitForRecorder(int timeoutMs) { return server_->waitForStart(timeoutMs); }
    const Options& options() const { return opts_; }
    // Flushes, tells the recorder the run is over and closes the socket.
    void finish();

    StringId intern(std::string_view s) override;
    StackId internStack(const std::vector<StringId>& frames) override;
    void addDevice(const DeviceInfo& d) override;
    void addProcess(const ProcessInfo& p) override;
    void setMeta(const std::string& key, const std::string& value) override;
    void add(const Event& e) override;
    void addFrameMetric(int64_t frame, const std::string& name, double value,
                        const std::string& source) override;
    void warn(const std::string& message) override;

    uint64_t eventsDropped() const { return stream_->eventsDropped(); }
    uint64_t eventsProduced() const { return stream_->eventsProduced(); }

private:
    void periodic();

    Options opts_;
    std::unique_ptr<proto::ControlServer> server_;
    std::unique_ptr<proto::TargetStream> stream_;
    std::mutex markMu_;
    std::vector<std::string> marks_; // from the control socket's Mark command
    int64_t lastTime_ = 0;
    uint32_t sinceCheck_ = 0;
    std::chrono::steady_clock::time_point lastFlush_;
    bool finished_ = false;
};

} // namespace fs::capture
