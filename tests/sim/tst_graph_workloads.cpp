// The simulator's CUDA-graph workloads (capture/sim/graph_workload.h) against the graphs
// analysis: every per-pool figure, the graphs that ran concurrently, the re-captures and the
// sharing what-if's savings equal what the simulator recorded as its ground truth, exactly.
#include "capture/sim/simulator.h"
#include "core/alloc/graph_sharing.h"
#include "core/analysis/engine.h"
#include "core/store/graphs.h"
#include "core/store/ingest.h"
#include "core/store/session.h"

#include <QTemporaryDir>
#include <QtTest>

using namespace fs;
using namespace fs::analysis;

namespace {

struct Run
{
    sim::Stats stats;
    std::string path;
};

Run simulate(const sim::Config& cfg, const std::string& path)
{
    IngestOptions o;
    o.path = path;
    o.sourceKind = "simulator";
    o.synthetic = true;
    o.aliveAtEndIsAnomaly = false; // the graphs' outputs live until the end
    Ingest in(o);
    in.begin();
    Run r{sim::Simulator(cfg).run(in), path};
    in.end();
    return r;
}

const GraphInfo* graphNamed(const GraphsReport& r, const std::string& name)
{
    for (const GraphInfo& g : r.graphs)
        if (g.name == name) return &g;
    return nullptr;
}

} // namespace

class TstGraphWorkloads : public QObject
{
    Q_OBJECT
    QTemporaryDir dir_;

private slots:
    void initTestCase() { QVERIFY(dir_.isValid()); }

    void truthEqualsAnalysis_data()
    {
        QTest::addColumn<int>("workload");
        QTest::addColumn<int>("frames");
        QTest::addColumn<int>("steps");
        QTest::addColumn<int>("replays");
        QTest::addColumn<int>("seed");
        QTest::newRow("decode-graphs")
            << static_cast<int>(sim::WorkloadKind::DecodeGraphs) << 24 << 20 << 1500 << 17;
        QTest::newRow("decode-graphs seed 3")
            << static_cast<int>(sim::WorkloadKind::DecodeGraphs) << 24 << 20 << 700 << 3;
        QTest::newRow("video-graphs")
            << static_cast<int>(sim::WorkloadKind::VideoGraphs) << 6 << 4 << 0 << 17;
        QTest::newRow("video-graphs seed 5")
            << static_cast<int>(sim::WorkloadKind::VideoGraphs) << 9 << 3 << 0 << 5;
    }

    void truthEqualsAnalysis()
    {
        QFETCH(int, workload);
        QFETCH(int, frames);
        QFETCH(int, steps);
        QFETCH(int, replays);
        QFETCH(int, seed);
        sim::Config cfg;
        cfg.workload = static_cast<sim::WorkloadKind>(workload);
        cfg.frames = frames;
        cfg.steps = steps;
        cfg.replays = std::max(replays, 1);
        cfg.seed = static_cast<uint64_t>(seed);
        const Run run = simulate(cfg, dir_.filePath(QTest::currentDataTag()).toStdString());
        QVERIFY(run.stats.graphs.has_value());
        const sim::GraphTruth& t = *run.stats.graphs;
        const auto e = Engine::open(run.path);
        QCOMPARE(e->summary().health.anomalyTotal(), int64_t{0});
        const GraphsReport r = alloc::graphsReport(*e);
        QCOMPARE(r.health.total(), int64_t{0});
        QCOMPARE(r.health.graphsWithUnknownPool, int64_t{0});

        // Graphs: names, captures, replays and pools.
        QCOMPARE(r.graphs.size(), t.graphs.size());
        for (const sim::GraphTruth::Graph& tg : t.graphs) {
            const GraphInfo* g = graphNamed(r, tg.name);
            QVERIFY2(g, tg.name.c_str());
            QCOMPARE(static_cast<int64_t>(g->captures.size()), tg.captures);
            QCOMPARE(g->launches, tg.replays);
            QCOMPARE(g->replay.count, tg.replays);
            QCOMPARE(g->poolSource, PoolSource::Recorded);
            QCOMPARE(g->pool, tg.pool);
        }
        // Every pool's figures at the end and at its peak.
        QCOMPARE(r.pools.size(), t.pools.size());
        for (const sim::GraphTruth::Pool& tp : t.pools) {
            const PoolInfo* p = nullptr;
            for (const PoolInfo& q : r.pools)
                if (q.pool == tp.pool && q.level == Level::Framework) p = &q;
            QVERIFY2(p, qPrintable(QString::number(tp.pool)));
            QCOMPARE(p->reservedBytes, tp.reservedAtEnd);
            QCOMPARE(p->allocatedBytes, tp.allocatedAtEnd);
            QCOMPARE(p->peakReservedBytes, tp.peakReserved);
            QCOMPARE(p->peakAllocatedBytes, tp.peakAllocated);
            QCOMPARE(p->segments, tp.segmentsAtEnd);
            QCOMPARE(p->segmentsCreated, tp.segmentsCreated);
        }
        // The graphs that ran concurrently, as the workload scheduled them.
        std::vector<std::pair<std::string, std::string>> concurrent;
        for (const auto& [a, b] : r.concurrent)
            concurrent.push_back(std::minmax(r.graphs[a].name, r.graphs[b].name));
        std::sort(concurrent.begin(), concurrent.end());
        QCOMPARE(concurrent, t.concurrent);
        // Re-captures: what moved and what the capture before still held.
        std::vector<Recapture> rcs;
        for (const sim::GraphTruth::Recapture& tr : t.recaptures) {
            const GraphInfo* g = graphNamed(r, tr.graph);
            QVERIFY(g);
            auto it = std::find_if(g->recaptures.begin(), g->recaptures.end(),
                                   [&](const Recapture& x) { return x.time == tr.time; });
            QVERIFY(it != g->recaptures.end());
            QCOMPARE(it->allocations, tr.allocations);
            QCOMPARE(it->previousAllocations, tr.previousAllocations);
            QCOMPARE(it->moved, tr.moved);
            QCOMPARE(it->movedBytes, tr.movedBytes);
            QCOMPARE(it->heldAllocations, tr.heldAllocations);
            QCOMPARE(it->heldBytes, tr.heldBytes);
            QVERIFY(it->samePool);
        }
        int64_t recaptures = 0;
        for (const GraphInfo& g : r.graphs)
            recaptures += static_cast<int64_t>(g.recaptures.size());
        QCOMPARE(recaptures, static_cast<int64_t>(t.recaptures.size()));
        if (cfg.workload == sim::WorkloadKind::VideoGraphs) QVERIFY(recaptures >= 3);

        // The sharing what-if: the groups and what merging them saves, against the
        // simulator's own runs with those pools merged.
        QCOMPARE(r.sharing.size(), t.groups.size());
        for (size_t i = 0; i < t.groups.size(); ++i) {
            QCOMPARE(r.sharing[i].pools, t.groups[i].pools);
            QVERIFY(r.sharing[i].computed);
            QCOMPARE(r.sharing[i].peakReservedBefore, t.groups[i].peakReservedBefore);
            QCOMPARE(r.sharing[i].peakReservedAfter, t.groups[i].peakReservedAfter);
            QVERIFY(r.sharing[i].peakReservedSavedBytes > 0);
        }
        QVERIFY(r.sharingAll.computed);
        QVERIFY(r.sharingAll.reproduced);
        QCOMPARE(r.sharingAll.recordedPeakReserved, run.stats.peakReserved);
        QCOMPARE(r.sharingAll.peakReservedBefore, t.all.peakReservedBefore);
        QCOMPARE(r.sharingAll.peakReservedAfter, t.all.peakReservedAfter);
        // The truth is in the session too, labelled synthetic.
        Session s = Session::open(run.path);
        const std::string meta = s.meta("sim.graphs_truth");
        QVERIFY(meta.find("\"synthetic\":true") != std::string::npos);
        QCOMPARE(s.meta("synthetic"), std::string("1"));
    }

    void defaultRunUnchanged()
    {
        // The graph workloads sit beside the default run, which captures no graph and records
        // no graph truth.
        sim::Config cfg;
        QCOMPARE(cfg.workload, sim::WorkloadKind::VideoDiffusion);
        cfg.frames = 2;
        cfg.steps = 2;
        const Run run = simulate(cfg, dir_.filePath("default.fragscope").toStdString());
        QVERIFY(!run.stats.graphs.has_value());
        Session s = Session::open(run.path);
        QCOMPARE(s.meta("sim.graphs_truth"), std::string());
        QCOMPARE(s.meta("sim.workload"), std::string());
        const store::GraphRows rows = store::readGraphRows(s);
        QVERIFY(rows.capturesRecorded); // the tables exist, and the default run fills none
        QCOMPARE(rows.captures.size(), size_t{0});
        QCOMPARE(rows.execs.size(), size_t{0});
        sim::WorkloadKind k;
        QVERIFY(sim::parseWorkload("decode-graphs", k));
        QCOMPARE(k, sim::WorkloadKind::DecodeGraphs);
        QVERIFY(!sim::parseWorkload("decode", k));
    }
};

QTEST_GUILESS_MAIN(TstGraphWorkloads)
#include "tst_graph_workloads.moc"
