#include "flight_recorder.h"

#include "core/mapped_pieces.h"

#include <algorithm>
#include <fmt/format.h>
#include <limits>
#include <regex>
#include <stdexcept>
#include <sys/stat.h>
#include <tuple>

namespace fs::capture {

namespace {

using TrackKey = std::tuple<uint32_t, int, uint64_t>; // device, level, address

TrackKey keyOf(const Event& e)
{
    return {e.device, static_cast<int>(e.level), e.address};
}

// The margin under --max-size at which no window opens and an open one is cut: what one
// check interval of events and the closing state may still add.
int64_t sizeMargin(int64_t maxBytes)
{
    return std::clamp<int64_t>(maxBytes / 8, 64 << 10, 8 << 20);
}

constexpr int64_t kSizeCheckEvery = 4096;
// Bytes an event may take in the file, everything included (tables, indexes), at most: sessions
// take about 56.
constexpr int64_t kBytesPerEventBound = 96;

} // namespace

int64_t sessionFileBytes(const std::string& path)
{
    int64_t n = 0;
    struct stat st
    {
    };
    if (::stat(path.c_str(), &st) == 0) n += st.st_size;
    if (::stat((path + "-wal").c_str(), &st) == 0) n += st.st_size;
    return n;
}

FlightOptions flightOptionsFor(FlightOptions o, const IngestOptions& io)
{
    o.reorderNs = io.reorderWindowNs;
    o.framePattern = io.framePattern;
    if (o.maxBytes > 0) o.fileBytes = [path = io.path] { return sessionFileBytes(path); };
    return o;
}

// What is live at one instant, as the events that made it so (each re-created at a window's
// start). Mapped pieces are kept per region, maximal, as ingest keeps them.
struct FlightRecorder::State
{
    std::map<TrackKey, Event> regions;
    std::map<TrackKey, MappedPieces<char>> pieces; // key: the region's
    std::map<TrackKey, Event> blocks;
    std::map<std::pair<uint32_t, uint64_t>, Event> execs; // device, exec id

    size_t size() const
    {
        size_t n = regions.size() + blocks.size() + execs.size();
        for (const auto& [k, p] : pieces)
            n += p.pieces().size();
        return n;
    }

    // The region of the same track that holds [a, a + size).
    const TrackKey* regionOf(const Event& e) const
    {
        auto it = regions.upper_bound(TrackKey{e.device, static_cast<int>(e.level), e.address});
        if (it == regions.begin()) return nullptr;
        --it;
        const auto& [dev, lvl, addr] = it->first;
        if (dev != e.device || lvl != static_cast<int>(e.level)) return nullptr;
        if (addr + it->second.size < e.address + e.size) return nullptr;
        return &it->first;
    }

    void apply(const Event& e)
    {
        auto none = [](uint64_t, const MappedPieces<char>::Piece&) {};
        auto mark = [](uint64_t, uint64_t) { return char{}; };
        switch (e.type) {
        case EventType::Alloc:
            blocks[keyOf(e)] = e;
            break;
        case EventType::Free:
            blocks.erase(keyOf(e));
            break;
        case EventType::RegionCreate:
            regions[keyOf(e)] = e;
            break;
        case EventType::RegionDestroy:
            regions.erase(keyOf(e));
            pieces.erase(keyOf(e));
            break;
        case EventType::RegionMap:
            if (const TrackKey* r = regionOf(e)) pieces[*r].map(e.address, e.size, none, mark);
            break;
        case EventType::RegionUnmap:
            if (const TrackKey* r = regionOf(e)) {
                auto it = pieces.find(*r);
                if (it != pieces.end()) it->second.unmap(e.address, e.size, none, mark);
            }
            break;
        case EventType::GraphInstantiate:
            execs[{e.device, e.aux2}] = e;
            break;
        case EventType::GraphExecDestroy:
            execs.erase({e.device, e.aux2});
            break;
        default:
            break;
        }
    }

    // A map (or unmap) of every mapped piece at time t.
    void pieceEvents(EventType type, int64_t t, std::vector<Event>& out) const
    {
        for (const auto& [k, p] : pieces)
            for (const auto& [addr, piece] : p.pieces()) {
                Event m;
                m.type = type;
                m.time = t;
                m.device = std::get<0>(k);
                m.level = static_cast<Level>(std::get<1>(k));
                m.address = addr;
                m.size = piece.size;
                out.push_back(m);
            }
    }

    // The events that re-create this state at time t, in an order ingest accepts: regions,
    // their mapped pieces, blocks, graph execs.
    std::vector<Event> recreate(int64_t t) const
    {
        std::vector<Event> out;
        out.reserve(size());
        for (const auto& [k, e] : regions) {
            Event c = e;
            c.time = t;
            out.push_back(c);
        }
        pieceEvents(EventType::RegionMap, t, out);
        for (const auto& [k, e] : blocks) {
            Event c = e;
            c.time = t;
            out.push_back(c);
        }
        for (const auto& [k, e] : execs) {
            Event c = e;
            c.time = t;
            out.push_back(c);
        }
        return out;
    }

    // The events that end the state at time t: blocks freed, pieces unmapped, segments
    // released, graph execs destroyed (a later window re-creates what is still live then).
    std::vector<Event> close(int64_t t) const
    {
        std::vector<Event> out;
        for (const auto& [k, e] : blocks) {
            Event f;
            f.type = EventType::Free;
            f.time = t;
            f.device = e.device;
            f.level = e.level;
            f.address = e.address;
            f.size = e.size;
            f.stream = e.stream;
            out.push_back(f);
        }
        pieceEvents(EventType::RegionUnmap, t, out);
        for (const auto& [k, e] : regions) {
            Event d;
            d.type = EventType::RegionDestroy;
            d.time = t;
            d.device = e.device;
            d.level = e.level;
            d.address = e.address;
            d.size = e.size;
            out.push_back(d);
        }
        for (const auto& [k, e] : execs) {
            Event d;
            d.type = EventType::GraphExecDestroy;
            d.time = t;
            d.device = e.device;
            d.aux = e.aux;
            d.aux2 = e.aux2;
            out.push_back(d);
        }
        return out;
    }
};

FlightRecorder::FlightRecorder(EventSink& out, FlightOptions opts)
    : ForwardingSink(out), opts_(std::move(opts)), base_(std::make_unique<State>()),
      frameRe_(opts_.framePattern)
{
    if (opts_.keepNs <= 0) throw std::invalid_argument("the flight recorder needs --keep > 0");
    if (opts_.beforeNs < 0 || opts_.beforeNs > opts_.keepNs)
        throw std::invalid_argument("--before must lie between 0 and --keep");
    if (opts_.afterNs < 0) throw std::invalid_argument("--after must not be negative");
    if (opts_.maxBytes > 0 && !opts_.fileBytes)
        throw std::invalid_argument("--max-size needs the session's size");
}

FlightRecorder::~FlightRecorder() = default;

StringId FlightRecorder::intern(std::string_view s)
{
    const StringId id = next_.intern(s);
    // Only marks can trigger; their texts are kept (a metric mark per frame: small).
    std::vector<std::pair<std::string, double>> metrics;
    int64_t frame = -1;
    if (s.starts_with(kTriggerMarkPrefix) || parseMetricMessage(s, metrics, frame) ||
        std::regex_match(s.begin(), s.end(), frameRe_))
        markTexts_.emplace(id.value, std::string(s));
    return id;
}

void FlightRecorder::addFrameMetric(int64_t frame, const std::string& name, double value,
                                    const std::string& source)
{
    next_.addFrameMetric(frame, name, value, source);
    // Judged once the events up to now are released (the window then starts where it should).
    if (maxSeen_ != kNoTime) frameMetric(frame, name, value, maxSeen_);
}

void FlightRecorder::frameMetric(int64_t frame, const std::string& name, double value, int64_t t)
{
    if (!opts_.breaks || frame < 0) return;
    auto& m = frameMetrics_[frame];
    m[name] = value;
    if (!breaking_.count(frame) && opts_.breaks(m)) {
        breaking_.insert(frame);
        // The first frame of a run of breaking frames starts a collapse.
        if (!breaking_.count(frame - 1)) defer(t, fmt::format("collapse: frame {}", frame));
    }
    // Only the last few frames matter for the next decision.
    while (frameMetrics_.size() > 8)
        frameMetrics_.erase(frameMetrics_.begin());
    while (!breaking_.empty() && *breaking_.begin() < frameMetrics_.begin()->first - 1)
        breaking_.erase(breaking_.begin());
}

void FlightRecorder::add(const Event& e)
{
    ++stats_.eventsSeen;
    if (maxSeen_ == kNoTime || e.time > maxSeen_) maxSeen_ = e.time;
    if (stats_.firstEventNs == kNoTime || e.time < stats_.firstEventNs)
        stats_.firstEventNs = e.time;
    if (opts_.reorderNs == 0) {
        step(e);
        return;
    }
    // A heap on (time, arrival): released in time order, arrival order among equal times.
    pending_.push_back({e, pendingSeq_++});
    std::push_heap(pending_.begin(), pending_.end(), later);
    releaseUpTo(maxSeen_ - opts_.reorderNs);
}

bool FlightRecorder::later(const Pending& a, const Pending& b)
{
    return a.e.time != b.e.time ? a.e.time > b.e.time : a.seq > b.seq;
}

void FlightRecorder::releaseUpTo(int64_t t)
{
    while (!pending_.empty() && pending_.front().e.time <= t) {
        std::pop_heap(pending_.begin(), pending_.end(), later);
        const Event e = pending_.back().e;
        pending_.pop_back();
        step(e);
    }
}

void FlightRecorder::step(const Event& e)
{
    if (win_ && e.time > win_->w.endNs) closeWindow(win_->w.endNs);
    kept_.push_back(e);
    stats_.peakKept = std::max(stats_.peakKept, kept_.size());
    trim(e.time);
    if ((stats_.eventsSeen & 4095) == 0) stats_.peakLive = std::max(stats_.peakLive, base_->size());
    if (win_) forward(e);
    if (e.type == EventType::Oom) {
        fire(e.time, "oom");
    } else if (e.type == EventType::Mark || e.type == EventType::Range) {
        auto it = markTexts_.find(e.name.value);
        if (it != markTexts_.end()) {
            const std::string& msg = it->second;
            std::smatch m;
            if (std::regex_match(msg, m, frameRe_) && m.size() > 1) {
                try {
                    currentFrame_ = std::stoll(m[1].str());
                } catch (const std::exception&) {
                    // not a frame number ingest takes either
                }
            } else if (msg.starts_with(kTriggerMarkPrefix)) {
                std::string rest = msg.substr(kTriggerMarkPrefix.size());
                rest.erase(0, rest.find_first_not_of(" :"));
                fire(e.time, rest.empty() ? "mark" : "mark: " + rest);
            } else {
                std::vector<std::pair<std::string, double>> metrics;
                int64_t frame = -1;
                if (parseMetricMessage(msg, metrics, frame)) {
                    if (frame < 0) frame = currentFrame_;
                    for (const auto& [name, v] : metrics)
                        frameMetric(frame, name, v, e.time);
                }
            }
        }
    }
    firePending(e.time);
}

void FlightRecorder::firePending(int64_t upTo)
{
    while (!deferred_.empty() && deferred_.front().first <= upTo) {
        auto [t, why] = std::move(deferred_.front());
        deferred_.erase(deferred_.begin());
        fire(t, why);
    }
}

void FlightRecorder::trim(int64_t now)
{
    while (!kept_.empty() && kept_.front().time < now - opts_.keepNs) {
        base_->apply(kept_.front());
        kept_.pop_front();
    }
}

void FlightRecorder::forward(const Event& e)
{
    next_.add(e);
    win_->state->apply(e);
    ++win_->w.events;
    ++stats_.eventsWritten;
    if (opts_.maxBytes > 0 && ++sinceSizeCheck_ >= kSizeCheckEvery) {
        sinceSizeCheck_ = 0;
        checkSize();
    }
}

int64_t FlightRecorder::projectedBytes()
{
    // The file grows at ingest's commits: what was written since the last growth is not on disk
    // yet and is counted at an upper bound per event.
    const int64_t onDisk = opts_.fileBytes();
    if (onDisk != lastFileBytes_) {
        lastFileBytes_ = onDisk;
        writtenAtLastGrowth_ = stats_.eventsWritten;
    }
    return onDisk + (stats_.eventsWritten - writtenAtLastGrowth_) * kBytesPerEventBound;
}

bool FlightRecorder::nearMaxSize()
{
    return opts_.maxBytes > 0 && projectedBytes() >= opts_.maxBytes - sizeMargin(opts_.maxBytes);
}

void FlightRecorder::checkSize()
{
    if (!win_ || !nearMaxSize()) return;
    win_->w.trigger += "; cut short at --max-size";
    closeWindow(kept_.back().time); // the last event written
}

void FlightRecorder::trigger(const std::string& why)
{
    if (maxSeen_ != kNoTime) defer(maxSeen_, why.empty() ? "mark" : "mark: " + why);
}

// A trigger at t from outside the event stream fires once the events up to t are released
// (step), so its window starts from the state it should.
void FlightRecorder::defer(int64_t t, std::string why)
{
    deferred_.emplace_back(t, std::move(why));
    if (!kept_.empty() && kept_.back().time >= t) firePending(kept_.back().time);
}

void FlightRecorder::fire(int64_t t, const std::string& why)
{
    ++stats_.triggers;
    if (win_) {
        win_->w.endNs = std::max(win_->w.endNs, t + opts_.afterNs);
        if (win_->w.trigger.size() < 1024) win_->w.trigger += "; " + why;
        return;
    }
    if (nearMaxSize()) {
        ++stats_.windowsDropped;
        return;
    }
    openWindow(t, why);
}

void FlightRecorder::openWindow(int64_t t, const std::string& why)
{
    // Never before what is still kept (nor before the last window's end: its events are written).
    int64_t begin = t - opts_.beforeNs;
    if (!kept_.empty()) begin = std::max(begin, kept_.front().time);
    if (!windows_.empty()) begin = std::max(begin, windows_.back().endNs + 1);
    begin = std::min(begin, t);
    Open w;
    w.w.beginNs = begin;
    w.w.endNs = t + opts_.afterNs;
    w.w.trigger = why;
    w.state = std::make_unique<State>(*base_);
    auto it = kept_.begin();
    for (; it != kept_.end() && it->time < begin; ++it)
        w.state->apply(*it);
    win_ = std::move(w);
    for (const Event& c : win_->state->recreate(begin)) {
        next_.add(c);
        ++win_->w.stateEvents;
        ++stats_.eventsWritten;
    }
    // The kept events of the window so far (the trigger's own among them); a cut at --max-size
    // may close it meanwhile.
    for (; it != kept_.end() && win_; ++it)
        forward(*it);
}

void FlightRecorder::closeWindow(int64_t at)
{
    if (!win_) return;
    win_->w.endNs = at;
    for (const Event& c : win_->state->close(at)) {
        next_.add(c);
        ++stats_.eventsWritten;
    }
    next_.addWindow(win_->w.beginNs, win_->w.endNs, win_->w.trigger, win_->w.events);
    windows_.push_back(win_->w);
    win_.reset();
}

void FlightRecorder::finish()
{
    releaseUpTo(std::numeric_limits<int64_t>::max());
    if (!kept_.empty()) firePending(kept_.back().time);
    deferred_.clear();
    if (win_) closeWindow(std::min(win_->w.endNs, maxSeen_));
}

} // namespace fs::capture
