// The flight recorder (`record`/`attach --keep DURATION`, docs/capture.md "Flight recording"):
// an EventSink in front of Ingest that keeps only the last DURATION of events in memory and
// writes windows around triggers to the session. A window holds the allocator's whole state at
// its start (live segments, mappings, blocks and graph execs, re-created at its first instant),
// then every event of its span as it came, then the state closed at its last instant, so every
// view and figure inside a window is exact; the session's `windows` table says which spans were
// kept and nothing is recorded between them.
//
// Triggers: an OOM event; a Mark whose message starts with "fragscope.trigger" (`fragscope mark
// PID`); a frame whose metrics start a collapse (the caller's rule test says the frame breaks a
// rule and the frame before did not). A trigger inside an open window extends it.
//
// Memory: the events of the last DURATION (plus the reorder slack) and the allocator state at
// the oldest of them; both are bounded by DURATION and by the live state, not by the run's length.
#pragma once

#include "core/event_sink.h"
#include "core/store/ingest.h" // IngestOptions, parseMetricMessage

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace fs::capture {

inline constexpr std::string_view kTriggerMarkPrefix = "fragscope.trigger";

struct FlightOptions
{
    int64_t keepNs = 0;   // events kept in memory (> 0)
    int64_t beforeNs = 0; // a window starts this long before its trigger (<= keepNs)
    int64_t afterNs = 0;  // ... and ends this long after its last trigger
    // > 0: the session file stays under this many bytes: no window opens when the file is within
    // the margin of it, and an open one is cut short (its trigger says so).
    int64_t maxBytes = 0;
    // Events may arrive out of order by this much (the agent's CUPTI buffers); the recorder
    // releases them in time order this late.
    int64_t reorderNs = 0;
    // The frame's metrics break a collapse rule (analysis::breaksAnyRule with the user's rules);
    // empty: no collapse triggers.
    std::function<bool(const std::map<std::string, double>&)> breaks;
    // The session's size on disk so far (file and write-ahead log); needed with maxBytes.
    std::function<int64_t()> fileBytes;
    // Marks that open frame N (metric marks without frame= belong to it): ingest's pattern.
    std::string framePattern = IngestOptions{}.framePattern;
};

// One window as written to the session (SessionSummary::windows reads it back as a
// RecordedWindow: begin, end, trigger "oom", "mark: TEXT", "collapse: frame N" joined by "; ",
// and the span's events), with the events that re-created the state at its start, written first.
struct FlightWindow : RecordedWindow
{
    int64_t stateEvents = 0;
};

struct FlightStats
{
    int64_t firstEventNs = kNoTime; // the earliest event seen (windows are reported from it)
    int64_t eventsSeen = 0;
    int64_t eventsWritten = 0; // the windows' events, state included
    int64_t triggers = 0;
    int64_t windowsDropped = 0; // triggers that found the file at --max-size
    size_t peakKept = 0;        // most events held at once
    size_t peakLive = 0;        // most live blocks, segments and mappings in the state
};

// A session file's size on disk with its write-ahead log (FlightOptions::fileBytes).
int64_t sessionFileBytes(const std::string& path);

// The frame-metric test of FlightOptions::breaks is the caller's; this applies the rest of the
// recorder's setup to ingest's options: the reorder slack, the file size for maxBytes.
FlightOptions flightOptionsFor(FlightOptions o, const IngestOptions& io);

class FlightRecorder final : public ForwardingSink
{
public:
    // out (ingest) receives what is kept, windows included; it must outlive the recorder.
    FlightRecorder(EventSink& out, FlightOptions opts);
    ~FlightRecorder() override;

    StringId intern(std::string_view s) override;
    void add(const Event& e) override;
    void addFrameMetric(int64_t frame, const std::string& name, double value,
                        const std::string& source) override;

    // Triggers a window now (the latest event time seen), as a trigger mark would.
    void trigger(const std::string& why);
    // Releases what is buffered and closes an open window at its end (or at the last event when
    // the run ended first); call before Ingest::end().
    void finish();

    const std::vector<FlightWindow>& windows() const { return windows_; }
    const FlightStats& stats() const { return stats_; }

private:
    struct State; // live segments, mappings, blocks and graph execs at one instant
    void step(const Event& e);
    void trim(int64_t now);
    void fire(int64_t t, const std::string& why);
    void defer(int64_t t, std::string why);
    void firePending(int64_t upTo);
    void openWindow(int64_t t, const std::string& why);
    void closeWindow(int64_t at);
    void forward(const Event& e);
    void checkSize();
    int64_t projectedBytes();
    bool nearMaxSize();
    void frameMetric(int64_t frame, const std::string& name, double value, int64_t t);

    FlightOptions opts_;
    struct Pending
    {
        Event e;
        uint64_t seq;
    };
    static bool later(const Pending& a, const Pending& b);
    void releaseUpTo(int64_t t);
    std::vector<Pending> pending_; // not yet released (reorder slack): a heap
    uint64_t pendingSeq_ = 0;
    int64_t maxSeen_ = kNoTime;
    std::deque<Event> kept_;      // released events of the last keepNs, in time order
    std::unique_ptr<State> base_; // the state before kept_.front()
    struct Open
    {
        FlightWindow w;
        std::unique_ptr<State> state; // the state at every instant of the window so far
    };
    std::optional<Open> win_;
    std::vector<FlightWindow> windows_;
    FlightStats stats_;
    // Texts of the strings that may trigger: trigger marks and metric marks, by session id.
    std::unordered_map<uint32_t, std::string> markTexts_;
    int64_t currentFrame_ = -1;
    std::map<int64_t, std::map<std::string, double>> frameMetrics_; // recent frames
    std::set<int64_t> breaking_;                                    // recent frames that broke
    int64_t sinceSizeCheck_ = 0;
    int64_t lastFileBytes_ = -1;
    int64_t writtenAtLastGrowth_ = 0;
    std::vector<std::pair<int64_t, std::string>> deferred_; // triggers waiting for their time
    std::regex frameRe_;
};

} // namespace fs::capture
