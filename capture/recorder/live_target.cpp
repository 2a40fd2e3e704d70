#include "live_target.h"

#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace fs::capture {

LiveTarget::Options LiveTarget::fromEnvironment(Options opts)
{
    if (const char* a = std::getenv("FRAGSCOPE_AUTOSTART"); a && std::strcmp(a, "1") == 0)
        opts.waitForRecorder = true;
    if (const char* l = std::getenv("FRAGSCOPE_LAUNCHED_BY"); l && *l)
        opts.launchedBy = static_cast<uint32_t>(std::strtoul(l, nullptr, 10));
    return opts;
}

LiveTarget::LiveTarget(Options opts) : opts_(std::move(opts))
{
    proto::ControlServer::Options so;
    so.dir = opts_.socketDir;
    so.kind = opts_.kind;
    so.commandLine = opts_.commandLine;
    so.launchedBy = opts_.launchedBy;
    so.onMark = [this](const std::string& text) {
        std::lock_guard lk(markMu_);
        if (marks_.size() < 4096) marks_.push_back(text);
    };
    server_ = std::make_unique<proto::ControlServer>(so);
    server_->setState(opts_.waitForRecorder ? proto::TargetState::WaitingForRecorder
                                            : proto::TargetState::Idle);
    proto::TargetStream::Options to;
    to.keepUntilFirstStart = false; // the simulator waits for the recorder instead
    stream_ = std::make_unique<proto::TargetStream>(*server_, to);
    lastFlush_ = std::chrono::steady_clock::now();
}

LiveTarget::~LiveTarget()
{
    finish();
}

bool LiveTarget::open(std::string& err)
{
    return server_->open(err);
}

void LiveTarget::finish()
{
    if (finished_) return;
    finished_ = true;
    periodic();
    stream_->finish(proto::EndReason::TargetFinished);
    server_->close();
}

void LiveTarget::periodic()
{
    std::vector<std::string> marks;
    {
        std::lock_guard lk(markMu_);
        marks.swap(marks_);
    }
    for (const auto& m : marks) {
        proto::WireEvent e{};
        e.type = proto::ev::Mark;
        e.time = lastTime_;
        e.name = stream_->intern(m).value;
        stream_->event(e);
    }
    stream_->flush();
    lastFlush_ = std::chrono::steady_clock::now();
}

StringId LiveTarget::intern(std::string_view s)
{
    return stream_->intern(s);
}

StackId LiveTarget::internStack(const std::vector<StringId>& frames)
{
    return stream_->internStack(frames);
}

void LiveTarget::addDevice(const DeviceInfo& d)
{
    stream_->device(d.id, d.capacityBytes, d.name, d.uuid);
}

void LiveTarget::addProcess(const ProcessInfo& p)
{
    stream_->process(p.pid, p.startTime, p.commandLine);
}

void LiveTarget::setMeta(const std::string& key, const std::string& value)
{
    stream_->meta(key, value);
}

void LiveTarget::add(const Event& e)
{
    proto::WireEvent w;
    w.time = e.time;
    w.endTime = e.endTime;
    w.address = e.address;
    w.size = e.size;
    w.requestedSize = e.requestedSize;
    w.aux = e.aux;
    w.aux2 = e.aux2;
    w.name = e.name.value;
    w.stream = e.stream;
    w.device = e.device;
    for (int k = 0; k < 3; ++k) {
        w.grid[k] = e.grid[k];
        w.block[k] = e.block[k];
    }
    w.type = static_cast<uint8_t>(e.type);
    w.level = static_cast<uint8_t>(e.level);
    w.regionKind = static_cast<uint8_t>(e.regionKind);
    w.flags = e.flags;
    lastTime_ = e.time;
    stream_->event(w);
    // Live views want data at least twice a second even when the producer is slow.
    if (++sinceCheck_ >= 1024) {
        sinceCheck_ = 0;
        if (std::chrono::steady_clock::now() - lastFlush_ > std::chrono::milliseconds(100))
            periodic();
    }
}

void LiveTarget::addFrameMetric(int64_t frame, const std::string& name, double value,
                                const std::string& source)
{
    stream_->frameMetric(frame, name, value, source);
}

void LiveTarget::warn(const std::string& message)
{
    stream_->warn(message);
}

} // namespace fs::capture
