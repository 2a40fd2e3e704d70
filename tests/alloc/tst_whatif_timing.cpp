// The what-if replay over time (core/alloc replay_clock, fidelity; docs/whatif.md "Fidelity"): on
// bursts.pickle (tests/import/gen_snapshot_fixtures.py: release bursts spread over time by an
// empty_cache(), a free-and-retry, garbage collection and a failed request, one device each) the
// replay under the recorded settings makes every segment event at its recorded time, with
// reserved bytes equal at every event (the shared complete traces: tst_whatif); a model whose
// release rule is moved is reported as not exact, with the right counts.
#include "core/alloc/fidelity.h"
#include "core/alloc/replay.h"
#include "core/alloc/trace.h"
#include "core/alloc/whatif.h"
#include "core/import/importer.h"
#include "core/store/catalog.h"
#include "core/store/ingest.h"
#include "core/store/session.h"
#include "hand_session.h"
#include "testutil.h"

#include <QTemporaryDir>
#include <QTest>

#undef emit // Qt's keyword macro; Importer::emit is a plain member

using namespace fs;
using namespace fs::alloc;

namespace {
constexpr uint64_t MiB = 1024 * 1024;
constexpr int64_t us = 1000; // ns

std::string importSnapshot(const QString& src, const QString& out)
{
    auto imp = fs::import::makeImporter(fs::import::Format::PytorchSnapshot, src.toStdString());
    imp->prepare();
    IngestOptions o;
    o.path = out.toStdString();
    imp->configure(o);
    Ingest ing(o);
    ing.begin();
    imp->emit(ing);
    ing.end();
    return o.path;
}

const DeviceTrace& device(const Trace& t, uint32_t id)
{
    for (const DeviceTrace& d : t.devices)
        if (d.device == id) return d;
    throw std::runtime_error("no such device");
}
} // namespace

class TstWhatIfTiming : public QObject
{
    Q_OBJECT
    QTemporaryDir tmp_;
    std::string bursts_;

private slots:
    void initTestCase()
    {
        const QString generated = fstest::writeSnapshotFixtures(tmp_.path());
        QVERIFY2(generated.isEmpty(), qPrintable(generated));
        bursts_ = importSnapshot(tmp_.filePath("bursts.pickle"), tmp_.filePath("bursts.fragscope"));
    }

    // What the trace tells: which request owns each burst. Device 0: empty_cache() #1 at its
    // first release (1000 µs, before k's free at 250000 µs), and a burst right before w's
    // cudaMalloc (found to be an empty_cache() only by the replay); device 1: the 100 MiB
    // request's free-and-retry; device 2: big's garbage collection and the failed request's.
    void burstsAndOwners()
    {
        const Trace t = readTrace(bursts_);
        QVERIFY(t.complete);
        QCOMPARE(t.resolutionNs, us);
        const DeviceTrace& d0 = device(t, 0);
        QCOMPARE(d0.emptyCacheCalls, int64_t(1));
        QCOMPARE(d0.bursts.size(), size_t(2));
        QVERIFY(d0.bursts[0].emptyCache);
        QCOMPARE(d0.bursts[0].count, 3u);
        QCOMPARE(d0.bursts[0].bytes, 120 * MiB);
        QCOMPARE(d0.requests[d0.bursts[0].request].kind, Request::EmptyCache);
        QCOMPARE(d0.requests[d0.bursts[0].request].time, 1000 * us);
        QVERIFY(!d0.bursts[1].emptyCache);
        QCOMPARE(d0.bursts[1].bytes, 72 * MiB); // A, B and the small segment K
        const Request& w = d0.requests[d0.bursts[1].request];
        QCOMPARE(w.kind, Request::Alloc);
        QCOMPARE(w.time, 500000 * us);
        QVERIFY(w.flags & Request::kReleasedFirst);
        const std::vector<int64_t> times(d0.burstTimes.begin(), d0.burstTimes.end());
        QCOMPARE(times, (std::vector<int64_t>{1000 * us, 201000 * us, 201020 * us, 301000 * us,
                                              451000 * us, 451010 * us}));
        // Every recorded segment event has its request.
        for (const RecordedSegment& s : d0.segments) {
            QVERIFY(s.createdBy != kNoRequest);
            QVERIFY(s.destroyNs == kAliveNs || s.releasedBy != kNoRequest);
        }
        const DeviceTrace& d1 = device(t, 1);
        QCOMPARE(d1.emptyCacheCalls, int64_t(0));
        QCOMPARE(d1.bursts.size(), size_t(1));
        QCOMPARE(d1.requests[d1.bursts[0].request].size, 100 * MiB);
        const DeviceTrace& d2 = device(t, 2);
        QCOMPARE(d2.bursts.size(), size_t(2));
        QCOMPARE(d2.requests[d2.bursts[1].request].index, kFailedRequest);
        QCOMPARE(d2.usableBytes, 200 * MiB); // 80 MiB reserved + 120 MiB free at the OOM
    }

    // Under the recorded settings every segment event is at its recorded time, and the replay
    // says what it took from the trace.
    void recordedReplayIsExactInTime()
    {
        WhatIfOptions o;
        o.session = bursts_;
        const WhatIfResult r = whatIf(o);
        QVERIFY2(r.fidelity.reproduced, r.fidelity.verdict.c_str());
        QCOMPARE(r.fidelity.devices.size(), size_t(3));
        struct Expect
        {
            int64_t events, creations, releases, emptyCaches, before, retries, failures;
            int64_t spanNs;
        };
        // Device 0: 7 creations, 6 releases; the longest burst 1000 -> 201020 µs. Device 1:
        // 3 + 2, the retry's 1000 -> 151000 µs. Device 2: 4 + 3, the failed request's 2000 ->
        // 102000 µs; garbage collection needs no refusal (it releases X before the cudaMalloc)
        // and the failed request is refused by the model's own limit (the 200 MiB).
        const Expect want[3] = {{13, 7, 6, 2, 1, 0, 0, 200020 * us},
                                {5, 3, 2, 0, 0, 1, 0, 150000 * us},
                                {7, 4, 3, 0, 0, 0, 0, 100000 * us}};
        for (const DeviceFidelity& d : r.fidelity.devices) {
            const Expect& e = want[d.device];
            QCOMPARE(d.time.realEvents, e.events);
            QCOMPARE(d.time.replayEvents, e.events);
            QCOMPARE(d.time.timeDiffers, int64_t(0));
            QCOMPARE(d.time.maxTimeDiffNs, int64_t(0));
            QCOMPARE(d.time.maxReservedDiff, uint64_t(0));
            QCOMPARE(d.time.maxAllocatedDiff, uint64_t(0));
            QCOMPARE(d.taken.creations, e.creations);
            QCOMPARE(d.taken.releases, e.releases);
            QCOMPARE(d.taken.assumed, int64_t(0));
            QCOMPARE(d.taken.emptyCaches, e.emptyCaches);
            QCOMPARE(d.taken.emptyCachesBefore, e.before);
            QCOMPARE(d.taken.retries, e.retries);
            QCOMPARE(d.taken.failuresFollowed, e.failures);
            QCOMPARE(d.taken.maxBurstSpanNs, e.spanNs);
        }
        // The retry on device 1 failed with 70 MiB reserved asking for 100 MiB more.
        QCOMPARE(r.fidelity.devices[1].usableMark, 170 * MiB - 1);
        QVERIFY(r.fidelity.verdict.find("free-and-retries") != std::string::npos);
        // Garbage collection released X only, at its recorded time.
        QCOMPARE(r.runs[0].devices[2].ooms, int64_t(1));
    }

    // Expandable segments: mappings and unmappings in time. A 4 GiB reservation at E (the
    // model asks for 9/8 of the 1 GiB device, 1152 MiB: it gets E), six 1 MiB small-pool
    // blocks a..f mapped page by page (2 MiB pages at 10, 30, 50 ns), c and d kept; a, b, e, f
    // freed; then an empty_cache() gives back pages 0 and 2 (free blocks, by address), the
    // first unmapped at 1000 ns, the second 200 µs later (the device draining). The replay
    // maps at 10, 30, 50 and unmaps at 1000 and 201000: 5 mapping changes, all at their times.
    void expandableMappingsInTime()
    {
        const std::string path = tmp_.filePath("expandable-hand.fragscope").toStdString();
        auto ing = fstest::handSession(path);
        DeviceInfo di;
        di.id = 0;
        di.capacityBytes = 1ull << 30;
        ing->addDevice(di);
        const uint64_t E = 0x200000000;
        auto add = [&](EventType type, int64_t t, uint64_t addr, uint64_t size) {
            Event e = fstest::handEvent(type, t, addr, size);
            if (type == EventType::RegionCreate) {
                e.regionKind = RegionKind::Vmm;
                e.flags = 1;
            }
            ing->add(e);
        };
        add(EventType::RegionCreate, 0, E, 4ull << 30);
        for (int k = 0; k < 6; ++k) {
            const int64_t t = 10 * (k + 1);
            if (k % 2 == 0) add(EventType::RegionMap, t, E + k * MiB, 2 * MiB);
            add(EventType::Alloc, t, E + k * MiB, MiB);
        }
        for (int k : {0, 1, 4, 5})
            add(EventType::Free, 70 + k, E + k * MiB, MiB);
        add(EventType::RegionUnmap, 1000, E, 2 * MiB);
        add(EventType::RegionUnmap, 201000, E + 4 * MiB, 2 * MiB);
        ing->end();

        const Trace t = readTrace(path);
        QVERIFY(t.recorded.expandableSegments);
        const DeviceTrace& d = device(t, 0);
        QCOMPARE(d.mappingChanges.size(), size_t(5));
        QCOMPARE(d.emptyCacheCalls, int64_t(1));
        WhatIfOptions o;
        o.session = path;
        const WhatIfResult r = whatIf(o);
        const DeviceFidelity& f = r.fidelity.devices.at(0);
        QCOMPARE(f.addressesMatched, f.allocations);
        QCOMPARE(f.time.realEvents, int64_t(5));
        QCOMPARE(f.time.replayEvents, int64_t(5));
        QCOMPARE(f.time.timeDiffers, int64_t(0));
        QCOMPARE(f.time.maxReservedDiff, uint64_t(0));
        QCOMPARE(f.taken.creations, int64_t(3));
        QCOMPARE(f.taken.releases, int64_t(2));
        QCOMPARE(f.taken.maxBurstSpanNs, int64_t(200000));
        QCOMPARE(f.taken.emptyCaches, int64_t(1));
    }

    // A model whose release rule is moved: every empty_cache() one request late. Device 0's
    // first call then runs at k's free (250000 µs): A, B, C and now K too go at that request's
    // time. A, B, C were released at 1000, 201000 and 201020 µs, K at 451010 (empty_cache #2,
    // whose A and B still go at their times): 4 events at another time. Reserved, real against
    // replay: 92 vs 122 MiB at 1000 µs, 52 vs 122 at 201000, 2 vs 122 at 201020: 120 MiB apart.
    void movedReleaseRuleIsCaught()
    {
        const Trace t = readTrace(bursts_);
        ReplayOptions ro;
        ro.config = t.recorded;
        ro.lateEmptyCache = true;
        const std::vector<DeviceReplay> r = replay(t, ro);
        const TimeCourse c = compareTimeCourse(device(t, 0), r.at(0), t.resolutionNs);
        QCOMPARE(c.realEvents, int64_t(13));
        QCOMPARE(c.replayEvents, int64_t(13));
        QCOMPARE(c.timeDiffers, int64_t(4));
        QCOMPARE(c.maxReservedDiff, 120 * MiB);
        QCOMPARE(c.maxReservedDiffAt, 201020 * us);
        QCOMPARE(c.firstDiffer, 1000 * us);
        QVERIFY(!c.exact());
        QVERIFY(!r.at(0).followed);
        // The other devices have no empty_cache() call: still exact.
        QVERIFY(compareTimeCourse(device(t, 1), r.at(1), t.resolutionNs).exact());
        // What the GUI's banner and whatif's note say of such a recorded replay: not exact, and
        // by how much.
        Fidelity f;
        f.complete = true;
        DeviceFidelity d;
        d.time = c;
        f.devices.push_back(d);
        WhatIfResult w;
        const std::string banner = bannerText(f, w);
        QVERIFY2(banner.find("that replay is not exact: 4 segment events at another time or "
                             "missing in one run (13 in the real run, 13 in the replay)") !=
                     std::string::npos,
                 banner.c_str());
        QVERIFY(banner.find("reserved bytes differ by up to 120.00 MiB") != std::string::npos);
        QVERIFY(banner.find("may be the model's error") != std::string::npos);
    }

    // The replay as it was before issue 21 released a whole burst at its first release: on
    // device 1 the retry's second release (B1, 40 MiB at 151000 µs) went at 1000 µs. Rebuilt
    // here by hand from the recorded times: one event differs, reserved 40 MiB apart.
    void burstAtOnceIsNotExact()
    {
        const Trace t = readTrace(bursts_);
        const DeviceTrace& d1 = device(t, 1);
        DeviceReplay fake;
        fake.addresses.assign(d1.allocs.size(), 1);
        for (const RecordedAlloc& a : d1.allocs)
            fake.blockSizes.push_back(a.size);
        for (const RecordedSegment& s : d1.segments) {
            fake.segmentEvents.push_back({s.createNs, s.address, s.size, SegmentEvent::Create});
            if (s.destroyNs != kAliveNs)
                fake.segmentEvents.push_back({1000 * us, s.address, s.size, SegmentEvent::Release});
        }
        const TimeCourse c = compareTimeCourse(d1, fake, t.resolutionNs);
        QCOMPARE(c.timeDiffers, int64_t(1));
        QCOMPARE(c.maxTimeDiffNs, 150000 * us);
        QCOMPARE(c.maxReservedDiff, 40 * MiB);
        // At the trace's resolution, a few hundred ns are no difference.
        for (SegmentEvent& e : fake.segmentEvents)
            if (e.kind == SegmentEvent::Release) e.time = releaseOf(d1, e.address) + 300;
        QVERIFY(compareTimeCourse(d1, fake, t.resolutionNs).exact());
        // A block of another size than the recorded one (512 B larger: a different rounding or
        // an unsplit remainder) changes allocated bytes by 512 B while it lives: not exact.
        fake.blockSizes[0] += 512;
        const TimeCourse b = compareTimeCourse(d1, fake, t.resolutionNs);
        QCOMPARE(b.maxAllocatedDiff, uint64_t(512));
        QVERIFY(!b.exact());
    }

    // Other settings: a free-and-retry the recorded replay reproduced marks the device's usable
    // memory for the what-if runs (never less than the recorded peak: 100 MiB here, the mark is
    // 170 MiB - 1 B), and events the recording lacks are timed by the stated assumption.
    void otherSettingsStateTheirAssumption()
    {
        WhatIfOptions o;
        o.session = bursts_;
        RunSpec ex;
        ex.config = Config::parse("expandable_segments:True");
        o.runs.push_back(ex);
        o.output = tmp_.filePath("expandable.fragscope").toStdString();
        const WhatIfResult r = whatIf(o);
        QCOMPARE(r.runs.size(), size_t(2));
        // Device 1's usable memory in the what-if: the retry's mark (above its 100 MiB peak).
        Session kept = Session::open(o.output);
        const std::vector<store::DeviceRow> devs = store::devices(kept);
        QCOMPARE(devs.size(), size_t(3));
        QCOMPARE(devs[1].id, int64_t(1));
        QCOMPARE(devs[1].capacityBytes.value_or(0), 170 * MiB - 1);
        const DeviceFigures& d0 = r.runs[1].devices.at(0);
        QVERIFY(d0.timedByAssumption > 0);
        QVERIFY2(r.fidelity.verdict.find("timed by assumption") != std::string::npos,
                 r.fidelity.verdict.c_str());
        QVERIFY(r.fidelity.verdict.find("expandable_segments:True") != std::string::npos);
        for (const RunResult& run : r.runs)
            QCOMPARE(run.devices.at(0).ooms, int64_t(0));
    }

private:
    static int64_t releaseOf(const DeviceTrace& d, uint64_t address)
    {
        for (const RecordedSegment& s : d.segments)
            if (s.address == address) return s.destroyNs;
        return -1;
    }
};

QTEST_GUILESS_MAIN(TstWhatIfTiming)
#include "tst_whatif_timing.moc"
