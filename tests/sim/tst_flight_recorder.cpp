// The flight recorder (capture/recorder/flight_recorder.h) on simulated runs: every window holds,
// event for event, the span of the whole recording it covers, and the allocator state inside it
// equals the whole recording's at every instant looked at; memory does not grow with the run's
// length; --max-size bounds the file; a run with nothing to trigger writes no window.
#include "capture/recorder/flight_recorder.h"
#include "capture/sim/simulator.h"
#include "core/analysis/history.h"
#include "core/analysis/types.h"
#include "core/store/allocations.h"
#include "core/store/ingest.h"
#include "core/store/regions.h"
#include "core/store/session.h"

#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <cstring>
#include <tuple>

using namespace fs;
using capture::FlightOptions;
using capture::FlightRecorder;

namespace {

// Keeps every event and window as they come; strings are interned in arrival order, so two runs
// of one simulation number them alike.
class RecordingSink final : public EventSink
{
public:
    std::vector<Event> events;
    struct Win
    {
        int64_t begin, end;
        std::string trigger;
        int64_t events;
        size_t endIndex; // events.size() when the window was recorded
    };
    std::vector<Win> windows;
    std::vector<std::string> text{""};

    StringId intern(std::string_view s) override
    {
        auto [it, added] = ids_.try_emplace(std::string(s), StringId{uint32_t(text.size())});
        if (added) text.emplace_back(s);
        return it->second;
    }
    StackId internStack(const std::vector<StringId>&) override { return kNoStack; }
    void addDevice(const DeviceInfo&) override {}
    void addProcess(const ProcessInfo&) override {}
    void setMeta(const std::string&, const std::string&) override {}
    void add(const Event& e) override { events.push_back(e); }
    void addFrameMetric(int64_t, const std::string&, double, const std::string&) override {}
    void warn(const std::string&) override {}
    void addWindow(int64_t b, int64_t e, const std::string& t, int64_t n) override
    {
        windows.push_back({b, e, t, n, events.size()});
    }

private:
    std::map<std::string, StringId> ids_;
};

bool same(const Event& a, const Event& b)
{
    return a.time == b.time && a.endTime == b.endTime && a.address == b.address &&
           a.size == b.size && a.requestedSize == b.requestedSize && a.aux == b.aux &&
           a.aux2 == b.aux2 && a.name == b.name && a.stream == b.stream && a.device == b.device &&
           a.type == b.type && a.level == b.level && a.regionKind == b.regionKind &&
           a.flags == b.flags;
}

sim::Config mixedRun(int64_t events)
{
    sim::Config cfg;
    cfg.frames = 24;
    cfg.steps = 6;
    cfg.seed = 5;
    cfg.mechanisms = sim::MechanismSet::Mixed;
    cfg.targetEvents = events;
    return cfg;
}

FlightOptions options(int64_t keepNs, int64_t beforeNs, int64_t afterNs)
{
    FlightOptions o;
    o.keepNs = keepNs;
    o.beforeNs = beforeNs;
    o.afterNs = afterNs;
    const auto rules = analysis::defaultCollapseRules();
    o.breaks = [rules](const std::map<std::string, double>& m) {
        return analysis::breaksAnyRule(m, rules);
    };
    return o;
}

// What is live at time t in a session: (device, level, address, size) of blocks and segments.
using Live = std::vector<std::tuple<int64_t, int64_t, uint64_t, uint64_t>>;
Live blocksAt(const Session& s, int64_t t)
{
    Live out;
    const auto [lo, hi] = store::allocationIdBounds(s);
    store::AllocationRecords::idRange(s, lo, hi, [&](const store::AllocationRecord& r) {
        if (r.allocNs <= t && (!r.freeNs || *r.freeNs > t))
            out.emplace_back(r.device, r.level, r.address, r.size);
        return true;
    });
    std::sort(out.begin(), out.end());
    return out;
}
Live segmentsAt(const Session& s, int64_t t)
{
    Live out;
    auto rows = store::RegionRows::all(s);
    store::RegionRow r;
    while (rows.next(r))
        if (r.createNs <= t && (!r.destroyNs || *r.destroyNs > t))
            out.emplace_back(r.device, r.level, r.address, r.size);
    std::sort(out.begin(), out.end());
    return out;
}

} // namespace

class TestFlightRecorder : public QObject
{
    Q_OBJECT

private slots:
    // Each window = the state at its start, then exactly the whole recording's events of its
    // span, then the state closed at its end.
    void windowsAreTheWholeRecordingsSpans()
    {
        const sim::Config cfg = mixedRun(300'000);
        RecordingSink whole;
        const sim::Stats st = sim::Simulator(cfg).run(whole);
        QVERIFY(st.ooms > 0 || st.collapsedFrames > 0); // something to trigger on
        const int64_t span = st.timeEnd - st.timeBegin;
        RecordingSink kept;
        FlightRecorder fr(kept, options(span / 20, span / 40, span / 80));
        sim::Simulator(cfg).run(fr);
        fr.finish();
        QVERIFY(!fr.windows().empty());
        QCOMPARE(kept.windows.size(), fr.windows().size());
        QCOMPARE(kept.text, whole.text);
        size_t from = 0;
        int64_t lastEnd = std::numeric_limits<int64_t>::min();
        for (size_t w = 0; w < kept.windows.size(); ++w) {
            const auto& win = kept.windows[w];
            const auto& fw = fr.windows()[w];
            QVERIFY(win.begin > lastEnd);
            QVERIFY(win.begin <= win.end);
            lastEnd = win.end;
            // The whole recording's events of the span.
            auto lo = std::lower_bound(whole.events.begin(), whole.events.end(), win.begin,
                                       [](const Event& e, int64_t t) { return e.time < t; });
            auto hi = std::upper_bound(lo, whole.events.end(), win.end,
                                       [](int64_t t, const Event& e) { return t < e.time; });
            const auto n = static_cast<size_t>(hi - lo);
            QCOMPARE(static_cast<size_t>(win.events), n);
            const size_t spanAt = from + static_cast<size_t>(fw.stateEvents);
            QVERIFY(spanAt + n <= win.endIndex);
            for (size_t i = 0; i < n; ++i)
                QVERIFY2(same(kept.events[spanAt + i], *(lo + static_cast<std::ptrdiff_t>(i))),
                         qPrintable(QString("window %1, event %2").arg(w).arg(i)));
            // The state written around the span sits at its ends.
            for (size_t i = from; i < spanAt; ++i)
                QCOMPARE(kept.events[i].time, win.begin);
            for (size_t i = spanAt + n; i < win.endIndex; ++i)
                QCOMPARE(kept.events[i].time, win.end);
            from = win.endIndex;
        }
        QCOMPARE(from, kept.events.size()); // nothing outside the windows
        QVERIFY(kept.events.size() < whole.events.size());
    }

    // Through ingest: inside every window, the blocks and segments alive at each instant looked
    // at are the whole recording's (the state re-created at the start is exact).
    void windowsHoldTheWholeRecordingsState()
    {
        QTemporaryDir dir;
        const sim::Config cfg = mixedRun(200'000);
        IngestOptions wo;
        wo.path = dir.filePath("whole.fragscope").toStdString();
        wo.synthetic = true;
        wo.durable = false;
        Ingest whole(wo);
        whole.begin();
        const sim::Stats st = sim::Simulator(cfg).run(whole);
        whole.end();
        const int64_t span = st.timeEnd - st.timeBegin;
        IngestOptions fo = wo;
        fo.path = dir.filePath("flight.fragscope").toStdString();
        Ingest flight(fo);
        flight.begin();
        FlightRecorder fr(flight, options(span / 10, span / 20, span / 40));
        sim::Simulator(cfg).run(fr);
        fr.finish();
        flight.end();
        const Session a = Session::open(wo.path);
        const Session b = Session::open(fo.path);
        const auto windows = b.summary().windows;
        QCOMPARE(windows.size(), fr.windows().size());
        QVERIFY(!windows.empty());
        QVERIFY(a.summary().windows.empty());
        int looked = 0;
        for (const RecordedWindow& w : windows) {
            for (int k = 0; k < 5; ++k) {
                // The start, three inner instants, the last instant before the end.
                const int64_t t = k == 4 ? w.endNs - 1 : w.beginNs + (w.endNs - w.beginNs) * k / 4;
                QCOMPARE(blocksAt(b, t), blocksAt(a, t));
                QCOMPARE(segmentsAt(b, t), segmentsAt(a, t));
                looked += !blocksAt(a, t).empty();
            }
            // Between windows nothing is alive: nothing is drawn as if it were known.
            QVERIFY(blocksAt(b, w.endNs).empty());
        }
        QVERIFY(looked > 0);
    }

    // Memory is bounded by --keep: a run four times longer holds no more events at once.
    void memoryDoesNotGrowWithTheRun()
    {
        std::vector<size_t> peaks;
        int64_t keep = 0;
        for (int64_t events : {100'000, 400'000}) {
            RecordingSink sink;
            const sim::Config cfg = mixedRun(events);
            if (keep == 0) {
                RecordingSink probe;
                const sim::Stats st = sim::Simulator(cfg).run(probe);
                keep = (st.timeEnd - st.timeBegin) / 10;
            }
            FlightRecorder fr(sink, options(keep, keep / 2, keep / 4));
            sim::Simulator(cfg).run(fr);
            fr.finish();
            QVERIFY(fr.stats().eventsSeen >= events);
            peaks.push_back(fr.stats().peakKept);
        }
        // The same keep over a 4x longer run: the peak is set by the event rate, not the length.
        QVERIFY2(peaks[1] < peaks[0] * 3 / 2,
                 qPrintable(QString("%1 vs %2").arg(peaks[0]).arg(peaks[1])));
    }

    // --max-size: the file stays under it, and the triggers that found it full are counted.
    void maxSizeBoundsTheFile()
    {
        QTemporaryDir dir;
        const sim::Config cfg = mixedRun(400'000);
        RecordingSink probe;
        const sim::Stats st = sim::Simulator(cfg).run(probe);
        const int64_t span = st.timeEnd - st.timeBegin;
        IngestOptions io;
        io.path = dir.filePath("bounded.fragscope").toStdString();
        io.synthetic = true;
        io.durable = false;
        Ingest ingest(io);
        ingest.begin();
        FlightOptions o = options(span / 4, span / 4, span / 8);
        o.maxBytes = 2 << 20;
        o.fileBytes = [&] { return capture::sessionFileBytes(io.path); };
        FlightRecorder fr(ingest, o);
        // A trigger at every progress call (about every 64k events) keeps windows coming.
        sim::Simulator(cfg).run(fr, [&](int64_t, int64_t) { fr.trigger("test"); });
        fr.finish();
        ingest.end();
        QVERIFY(fr.stats().triggers > 0);
        QVERIFY(fr.stats().windowsDropped > 0 ||
                std::any_of(fr.windows().begin(), fr.windows().end(), [](const auto& w) {
                    return w.trigger.find("cut short") != std::string::npos;
                }));
        const int64_t size = capture::sessionFileBytes(io.path);
        QVERIFY2(size <= o.maxBytes, qPrintable(QString::number(size)));
    }

    // Nothing here: runs without OOMs or collapses (five seeds; frames with the same allocator
    // events as a collapsing run, only with room enough) write no window and no event: the
    // collapse trigger's false alarms, 0 of 5 runs (60 healthy frames).
    void healthyRunWritesNothing()
    {
        int64_t frames = 0;
        for (uint64_t seed = 1; seed <= 5; ++seed) {
            sim::Config cfg;
            cfg.frames = 12;
            cfg.steps = 4;
            cfg.seed = seed;
            cfg.capacityBytes = 400ull << 30; // room for every workspace: no fallback, no collapse
            RecordingSink probe;
            const sim::Stats st = sim::Simulator(cfg).run(probe);
            QCOMPARE(st.ooms, int64_t{0});
            QCOMPARE(st.collapsedFrames, int64_t{0});
            frames += st.frames;
            const int64_t span = st.timeEnd - st.timeBegin;
            RecordingSink sink;
            FlightRecorder fr(sink, options(span / 4, span / 8, span / 8));
            sim::Simulator(cfg).run(fr);
            fr.finish();
            QCOMPARE(fr.stats().triggers, int64_t{0});
            QVERIFY(sink.windows.empty());
            QVERIFY(sink.events.empty());
            QVERIFY(fr.stats().eventsSeen > 1000);
        }
        QCOMPARE(frames, int64_t{60});
    }

    // Events out of order by up to the reorder slack give the same windows as ordered ones.
    void reorderedInputGivesTheSameWindows()
    {
        const sim::Config cfg = mixedRun(150'000);
        RecordingSink whole;
        const sim::Stats st = sim::Simulator(cfg).run(whole);
        const int64_t span = st.timeEnd - st.timeBegin;
        FlightOptions o = options(span / 10, span / 20, span / 40);
        RecordingSink ordered;
        {
            FlightRecorder fr(ordered, o);
            for (const Event& e : whole.events)
                fr.add(e);
            fr.finish();
        }
        // Swap neighbours in blocks of 64 (a CUPTI buffer's worth arriving late).
        std::vector<Event> shuffled = whole.events;
        for (size_t i = 0; i + 128 <= shuffled.size(); i += 128)
            std::swap_ranges(shuffled.begin() + static_cast<std::ptrdiff_t>(i),
                             shuffled.begin() + static_cast<std::ptrdiff_t>(i + 64),
                             shuffled.begin() + static_cast<std::ptrdiff_t>(i + 64));
        int64_t lag = 0, maxT = std::numeric_limits<int64_t>::min();
        for (const Event& e : shuffled) {
            maxT = std::max(maxT, e.time);
            lag = std::max(lag, maxT - e.time);
        }
        QVERIFY(lag > 0);
        o.reorderNs = lag;
        RecordingSink reordered;
        FlightRecorder fr(reordered, o);
        for (const Event& e : shuffled)
            fr.add(e);
        fr.finish();
        QCOMPARE(reordered.windows.size(), ordered.windows.size());
        for (size_t w = 0; w < ordered.windows.size(); ++w) {
            QCOMPARE(reordered.windows[w].begin, ordered.windows[w].begin);
            QCOMPARE(reordered.windows[w].end, ordered.windows[w].end);
            QCOMPARE(reordered.windows[w].events, ordered.windows[w].events);
        }
        QCOMPARE(reordered.events.size(), ordered.events.size());
    }

    // The gaps the views shade: windows [10,20] and [30,40] (given out of order) in [0,50]
    // leave [0,10], [20,30], [40,50]; a whole recording has none; a window over the whole span
    // leaves none; a range inside one window none.
    void unrecordedSpansKnownAnswers()
    {
        using Spans = std::vector<std::pair<int64_t, int64_t>>;
        const std::vector<RecordedWindow> w = {{30, 40, "b", 1}, {10, 20, "a", 1}};
        QCOMPARE(analysis::unrecordedSpans(w, 0, 50), (Spans{{0, 10}, {20, 30}, {40, 50}}));
        QCOMPARE(analysis::unrecordedSpans(w, 15, 35), (Spans{{20, 30}}));
        QCOMPARE(analysis::unrecordedSpans(w, 12, 18), Spans{});
        QCOMPARE(analysis::unrecordedSpans({}, 0, 50), Spans{});
        QCOMPARE(analysis::unrecordedSpans({{0, 50, "all", 1}}, 0, 50), Spans{});
        // Overlapping windows count once: [5,25] and [10,20] leave [0,5] and [25,30].
        QCOMPARE(analysis::unrecordedSpans({{5, 25, "a", 1}, {10, 20, "b", 1}}, 0, 30),
                 (Spans{{0, 5}, {25, 30}}));
    }

    void badOptionsAreRefused()
    {
        RecordingSink sink;
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, FlightRecorder(sink, options(0, 0, 0)));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, FlightRecorder(sink, options(10, 20, 0)));
        FlightOptions o = options(10, 5, 5);
        o.maxBytes = 1 << 20; // without a way to measure the file
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, FlightRecorder(sink, o));
    }
};

QTEST_GUILESS_MAIN(TestFlightRecorder)
#include "tst_flight_recorder.moc"
