// An EventSink for the simulator tests that checks the allocator invariants on the event stream
// itself, independently of the simulator's own bookkeeping: no two live blocks overlap, every
// block lies inside a live segment of its stream, segments are 2 MiB aligned and never overlap,
// a segment is released only when empty, reserved bytes never exceed the capacity, frees match
// their allocations, and time never goes backwards. It also collects what each frame ran.
#pragma once

#include "core/event_sink.h"
#include "core/store/ingest.h"

#include <QString>
#include <QStringList>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace fstest {

class CheckingSink final : public fs::EventSink
{
public:
    struct Range
    {
        uint64_t size;
        uint32_t stream;
    };
    struct FrameView
    {
        int64_t start = 0;
        int64_t end = 0;
        std::set<std::string> kernels;
        std::map<std::string, double> metrics;
    };

    explicit CheckingSink(uint64_t capacity) : capacity_(capacity) { text_.emplace_back(); }

    fs::StringId intern(std::string_view s) override
    {
        auto [it, added] =
            ids_.try_emplace(std::string(s), static_cast<fs::StringId>(text_.size()));
        if (added) text_.emplace_back(s);
        return it->second;
    }
    fs::StackId internStack(const std::vector<fs::StringId>&) override { return fs::kNoStack; }
    void addDevice(const fs::DeviceInfo& d) override { devices.push_back(d); }
    void addProcess(const fs::ProcessInfo&) override {}
    void setMeta(const std::string& k, const std::string& v) override { meta[k] = v; }
    void addFrameMetric(int64_t, const std::string&, double, const std::string&) override
    {
        ++directMetrics;
    }
    void warn(const std::string& m) override { fail("warning: " + m); }
    void addSimTruth(const fs::SimTruthFrame& t) override { truths.push_back(t); }

    void add(const fs::Event& e) override
    {
        ++events;
        ++byType[e.type];
        if (e.time < lastTime_) fail("time went backwards");
        lastTime_ = e.time;
        switch (e.type) {
        case fs::EventType::RegionCreate:
            // Memory outside the allocator (the mixed mechanisms' external growth): driver-level
            // regions, not segments; the allocator's invariants do not apply to them.
            if (e.level == fs::Level::Driver) {
                ++driverRegions;
                break;
            }
            onCreate(e);
            break;
        case fs::EventType::RegionDestroy:
            if (e.level == fs::Level::Driver) break;
            onDestroy(e);
            break;
        case fs::EventType::Alloc:
            onAlloc(e);
            break;
        case fs::EventType::Free:
            onFree(e);
            break;
        case fs::EventType::Kernel:
            if (current_ && e.time >= current_->start && e.endTime <= current_->end)
                current_->kernels.insert(text(e.name));
            break;
        case fs::EventType::Range:
            onRange(e);
            break;
        case fs::EventType::Mark:
            onMark(e);
            break;
        default:
            break;
        }
    }

    std::string text(fs::StringId id) const
    {
        return id.value < text_.size() ? text_[id.value] : std::string();
    }
    uint64_t reserved() const { return reserved_; }
    uint64_t peakReserved() const { return peakReserved_; }
    size_t liveBlocks() const { return blocks_.size(); }
    size_t liveSegments() const { return segments_.size(); }

    QStringList violations;
    int64_t events = 0;
    int64_t directMetrics = 0;
    std::map<fs::EventType, int64_t> byType;
    std::map<int64_t, FrameView> frames;
    std::map<std::string, std::string> meta;
    int64_t driverRegions = 0;             // regions outside the allocator created
    std::vector<fs::SimTruthFrame> truths; // the simulator's ground truth, per frame
    std::vector<fs::DeviceInfo> devices;

private:
    static constexpr uint64_t kGranule = 2ull << 20;

    void fail(const std::string& what)
    {
        if (violations.size() < 20)
            violations << QString::fromStdString(what + " (event " + std::to_string(events) + ")");
    }

    void onCreate(const fs::Event& e)
    {
        if (e.level != fs::Level::Framework || e.regionKind != fs::RegionKind::Segment)
            fail("segment with the wrong level or kind");
        if (e.address % kGranule || e.size % kGranule || e.size == 0)
            fail("segment not 2 MiB aligned");
        auto next = segments_.lower_bound(e.address);
        if (next != segments_.end() && next->first < e.address + e.size)
            fail("segment overlaps the next one");
        if (next != segments_.begin() &&
            std::prev(next)->first + std::prev(next)->second.size > e.address)
            fail("segment overlaps the previous one");
        segments_[e.address] = {e.size, e.stream};
        reserved_ += e.size;
        peakReserved_ = std::max(peakReserved_, reserved_);
        if (reserved_ > capacity_) fail("reserved exceeds the capacity");
    }

    void onDestroy(const fs::Event& e)
    {
        auto it = segments_.find(e.address);
        if (it == segments_.end()) {
            fail("release of an unknown segment");
            return;
        }
        auto b = blocks_.lower_bound(e.address);
        if (b != blocks_.end() && b->first < e.address + it->second.size)
            fail("segment released while a block in it is live");
        reserved_ -= it->second.size;
        segments_.erase(it);
    }

    void onAlloc(const fs::Event& e)
    {
        if (e.level != fs::Level::Framework) fail("block not at framework level");
        if (e.size % 512 || e.size < e.requestedSize || e.size == 0)
            fail("block size not rounded to 512 B or below the request");
        auto s = segments_.upper_bound(e.address);
        if (s == segments_.begin()) {
            fail("block outside any segment");
        } else {
            --s;
            if (e.address + e.size > s->first + s->second.size)
                fail("block outside any segment");
            else if (s->second.stream != e.stream)
                fail("block on a segment of another stream");
        }
        auto next = blocks_.lower_bound(e.address);
        if (next != blocks_.end() && next->first < e.address + e.size)
            fail("block overlaps the next live block");
        if (next != blocks_.begin() &&
            std::prev(next)->first + std::prev(next)->second.size > e.address)
            fail("block overlaps the previous live block");
        blocks_[e.address] = {e.size, e.stream};
        if (text(e.name).empty()) fail("block without a tag");
    }

    void onFree(const fs::Event& e)
    {
        auto it = blocks_.find(e.address);
        if (it == blocks_.end()) {
            fail("free of an unknown block");
            return;
        }
        if (e.size != it->second.size) fail("free size differs from the allocation");
        blocks_.erase(it);
    }

    void onRange(const fs::Event& e)
    {
        const std::string msg = text(e.name);
        if (msg.rfind("frame ", 0) != 0) {
            fail("range that is not a frame: " + msg);
            return;
        }
        const int64_t idx = std::stoll(msg.substr(6));
        if (frames.count(idx)) fail("frame range repeated");
        FrameView& f = frames[idx];
        f.start = e.time;
        f.end = e.endTime;
        current_ = &f;
    }

    void onMark(const fs::Event& e)
    {
        std::vector<std::pair<std::string, double>> values;
        int64_t frame = -1;
        if (!fs::parseMetricMessage(text(e.name), values, frame)) return;
        if (frame < 0 || !frames.count(frame)) fail("metric for an unknown frame");
        for (const auto& [k, v] : values)
            frames[frame].metrics[k] = v;
    }

    uint64_t capacity_;
    uint64_t reserved_ = 0;
    uint64_t peakReserved_ = 0;
    int64_t lastTime_ = 0;
    std::map<uint64_t, Range> segments_;
    std::map<uint64_t, Range> blocks_;
    std::unordered_map<std::string, fs::StringId> ids_;
    std::vector<std::string> text_;
    FrameView* current_ = nullptr;
};

} // namespace fstest
