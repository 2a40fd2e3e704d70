#include "target_stream.h"

namespace fs::proto {

TargetStream::TargetStream(ControlServer& server, Options opts) : server_(server), opts_(opts)
{
    strings_.emplace(std::string(), 0);
    stringText_.emplace_back();
}

bool TargetStream::wanted()
{
    checkEpoch();
    return server_.streaming() || (opts_.keepUntilFirstStart && !everStarted_);
}

bool TargetStream::active()
{
    return wanted();
}

void TargetStream::checkEpoch()
{
    const uint64_t ep = server_.epoch();
    if (ep == epoch_ || !server_.streaming()) return;
    epoch_ = ep;
    Encoder pre;
    pre.begin(MsgType::StreamBegin);
    pre.putPod(opts_.clockOffsetNs);
    pre.putPod(ep);
    pre.end();
    replay(pre);
    if (everStarted_) {
        // Data buffered for a recorder that left belongs to nobody: the new one starts clean.
        dropped_ += pendingEvents_;
        pendingEvents_ = 0;
        enc_.clear();
    }
    everStarted_ = true;
    enc_.flushEvents();
    auto& b = pre.bytes();
    b.insert(b.end(), enc_.bytes().begin(), enc_.bytes().end());
    enc_.bytes().swap(b);
}

void TargetStream::replay(Encoder& enc)
{
    for (uint32_t id = 1; id < stringText_.size(); ++id)
        enc.string(id, stringText_[id]);
    for (const auto& [frames, id] : stacks_) {
        enc.begin(MsgType::Stack);
        enc.putPod(uint64_t{id.value}); // the wire carries stack ids as u64
        enc.put(frames.data(), frames.size() * sizeof(StringId));
        enc.end();
    }
    for (const auto& t : tables_)
        enc.put(t.data(), t.size());
}

StringId TargetStream::intern(std::string_view s)
{
    auto it = strings_.find(std::string(s));
    if (it != strings_.end()) return it->second;
    const StringId id{static_cast<uint32_t>(stringText_.size())};
    strings_.emplace(std::string(s), id);
    stringText_.emplace_back(s);
    if (wanted()) enc_.string(id.value, s);
    return id;
}

StackId TargetStream::internStack(const std::vector<StringId>& frames)
{
    auto it = stacks_.find(frames);
    if (it != stacks_.end()) return it->second;
    const StackId id{static_cast<uint32_t>(stacks_.size() + 1)};
    stacks_.emplace(frames, id);
    if (wanted()) {
        enc_.begin(MsgType::Stack);
        enc_.putPod(uint64_t{id.value}); // the wire carries stack ids as u64
        enc_.put(frames.data(), std::min(frames.size(), (kMaxPayload - 8) / 4) * sizeof(StringId));
        enc_.end();
    }
    return id;
}

void TargetStream::device(uint32_t id, uint64_t capacity, std::string_view name,
                          std::string_view uuid)
{
    Encoder e;
    e.begin(MsgType::Device);
    e.putPod(id);
    e.putPod(capacity);
    e.putStr0(name.substr(0, 1024));
    e.putStr0(uuid.substr(0, 1024));
    e.end();
    tables_.emplace_back(e.bytes().begin(), e.bytes().end());
    if (wanted()) enc_.put(e.bytes().data(), e.size());
}

void TargetStream::process(int64_t pid, int64_t startNs, std::string_view commandLine)
{
    Encoder e;
    e.begin(MsgType::Process);
    e.putPod(pid);
    e.putPod(startNs);
    e.put(commandLine.data(), std::min<size_t>(commandLine.size(), 65536));
    e.end();
    tables_.emplace_back(e.bytes().begin(), e.bytes().end());
    if (wanted()) enc_.put(e.bytes().data(), e.size());
}

void TargetStream::meta(const std::string& key, const std::string& value)
{
    Encoder e;
    e.begin(MsgType::Meta);
    e.putStr0(key.substr(0, 1024));
    e.put(value.data(), std::min<size_t>(value.size(), 65536));
    e.end();
    std::string frame(e.bytes().begin(), e.bytes().end());
    if (auto it = metaIndex_.find(key); it != metaIndex_.end())
        tables_[it->second] = frame;
    else {
        metaIndex_[key] = tables_.size();
        tables_.push_back(frame);
    }
    if (wanted()) enc_.put(frame.data(), frame.size());
}

void TargetStream::event(const WireEvent& e)
{
    ++produced_;
    if (!wanted()) {
        ++dropped_;
        return;
    }
    if (enc_.size() >= opts_.bufferCap) {
        ++dropped_; // the recorder cannot keep up (or has not come yet): count, never block here
        return;
    }
    enc_.event(e);
    ++pendingEvents_;
    if (enc_.size() >= opts_.flushBytes) flush();
}

void TargetStream::frameMetric(int64_t frame, std::string_view name, double value,
                               std::string_view source)
{
    if (!wanted()) return;
    enc_.begin(MsgType::FrameMetric);
    enc_.putPod(frame);
    enc_.putPod(value);
    enc_.putStr0(name.substr(0, 4096));
    enc_.put(source.data(), std::min<size_t>(source.size(), 4096));
    enc_.end();
}

void TargetStream::warn(std::string_view text)
{
    if (wanted()) enc_.frame(MsgType::Warn, text.substr(0, 65536));
}

void TargetStream::health(int64_t time, int64_t value, std::string_view kind,
                          std::string_view detail)
{
    if (!wanted()) return;
    enc_.begin(MsgType::Health);
    enc_.putPod(time);
    enc_.putPod(value);
    enc_.putStr0(kind.substr(0, 1024));
    enc_.put(detail.data(), std::min<size_t>(detail.size(), 65536));
    enc_.end();
}

void TargetStream::flush()
{
    checkEpoch();
    if (enc_.size() == 0 || !server_.streaming()) return;
    enc_.flushEvents();
    const uint64_t n = pendingEvents_;
    if (server_.sendStream(enc_.bytes().data(), enc_.size(), epoch_))
        server_.countEvents(n, 0);
    else
        dropped_ += n;
    pendingEvents_ = 0;
    enc_.clear();
}

void TargetStream::finish(EndReason reason)
{
    flush();
    server_.endStream(reason);
}

} // namespace fs::proto
