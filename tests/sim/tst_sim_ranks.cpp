// Simulated ranks of one job (capture/sim/ranks.h, `fragscope simulate --ranks N`): the plan of
// each rank (memory, launch skew, wall clock, meta), file names, the simulator's ground truth,
// and the files the command writes.
#include "capture/sim/ranks.h"
#include "core/store/session.h"
#include "testutil.h"

#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>
#include <map>

using namespace fs;

namespace {

std::map<std::string, std::string> metaOf(const sim::RankSpec& s)
{
    return {s.meta.begin(), s.meta.end()};
}

} // namespace

class TestSimRanks : public QObject
{
    Q_OBJECT
private slots:
    void specsOfFourRanks()
    {
        sim::Config base; // 80 GiB, seed 17, session clock starting at 1 s
        sim::RanksConfig rc;
        rc.ranks = 4;
        const auto specs = sim::rankSpecs(base, rc);
        QCOMPARE(specs.size(), size_t(4));
        // Tight rank N/2 = 2: 80 GiB - 2 x 64 MiB - 3 GiB = 81604378624 - 134217728 - ... in
        // bytes: 85899345920 - 134217728 - 3221225472 = 82543902720.
        QVERIFY(!specs[0].tight && !specs[1].tight && specs[2].tight && !specs[3].tight);
        QCOMPARE(specs[0].config.capacityBytes, uint64_t(85899345920));
        QCOMPARE(specs[1].config.capacityBytes, uint64_t(85899345920 - 67108864));
        QCOMPARE(specs[2].config.capacityBytes, uint64_t(82543902720));
        QCOMPARE(specs[3].config.capacityBytes, uint64_t(85899345920 - 3 * 67108864));
        // Rank 0 starts at the wall-clock start; each next one 40 ms + [0, 20 ms) later.
        QCOMPARE(specs[0].startSkewNs, int64_t(0));
        for (size_t k = 1; k < specs.size(); ++k) {
            const int64_t gap = specs[k].startSkewNs - specs[k - 1].startSkewNs;
            QVERIFY2(gap >= 40'000'000 && gap < 60'000'000, qPrintable(QString::number(gap)));
        }
        for (const sim::RankSpec& s : specs) {
            // wall = 2025-01-06 08:00 UTC + skew + (t - 1 s): offset = start + skew - 1e9.
            QCOMPARE(s.realtimeOffsetNs, rc.wallClockStartNs + s.startSkewNs - 1'000'000'000);
            const auto m = metaOf(s);
            QCOMPARE(m.at("rank"), std::to_string(s.rank));
            QCOMPARE(m.at("world_size"), std::string("4"));
            QCOMPARE(m.at("clock_offset_realtime_ns"), std::to_string(s.realtimeOffsetNs));
            QCOMPARE(m.at("job_id"), metaOf(specs[0]).at("job_id"));
            QCOMPARE(m.at("sim.tight_rank"), std::string("2"));
            // The workload itself is the single-rank one: same seed, frames, steps, device 0.
            QCOMPARE(s.config.seed, base.seed);
            QCOMPARE(s.config.frames, base.frames);
            QCOMPARE(s.config.device, 0u);
        }
        // Another seed is another job.
        base.seed = 18;
        QVERIFY(metaOf(sim::rankSpecs(base, rc)[0]).at("job_id") != metaOf(specs[0]).at("job_id"));
    }

    void badConfigs()
    {
        sim::Config base;
        sim::RanksConfig rc;
        rc.ranks = 1;
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, sim::rankSpecs(base, rc));
        rc.ranks = 4;
        rc.tightRank = 4;
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, sim::rankSpecs(base, rc));
        rc.tightRank = 0;
        rc.deficitBytes = base.capacityBytes;
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, sim::rankSpecs(base, rc));
    }

    void rankPath_data()
    {
        QTest::addColumn<QString>("out");
        QTest::addColumn<QString>("expected");
        QTest::newRow("extension") << "run.fragscope"
                                   << "run.rank3.fragscope";
        QTest::newRow("folder") << "/tmp/x.y/run.fragscope"
                                << "/tmp/x.y/run.rank3.fragscope";
        QTest::newRow("no extension") << "/tmp/x.y/run"
                                      << "/tmp/x.y/run.rank3";
        QTest::newRow("dot file") << ".run"
                                  << ".run.rank3";
        QTest::newRow("two dots") << "a/b.c.fragscope"
                                  << "a/b.c.rank3.fragscope";
    }
    void rankPath()
    {
        QFETCH(QString, out);
        QFETCH(QString, expected);
        QCOMPARE(QString::fromStdString(sim::rankPath(out.toStdString(), 3)), expected);
    }

    void truthFromStats()
    {
        // Three ranks; frames as (coherence, ooms). Rank 1 collapses at frame 2, rank 2 at frame
        // 1 (first); OOMs: rank 0 in frame 3 and rank 1 in frame 3 (tied), rank 2 none.
        auto frames = [](std::vector<std::pair<double, int>> v) {
            sim::Stats s;
            for (auto [c, o] : v) {
                sim::FrameStats f;
                f.coherence = c;
                f.ooms = o;
                s.perFrame.push_back(f);
            }
            return s;
        };
        std::vector<sim::RankSpec> specs(3);
        for (int k = 0; k < 3; ++k)
            specs[size_t(k)].rank = k;
        const std::vector<sim::Stats> st = {
            frames({{0.9, 0}, {0.9, 0}, {0.9, 0}, {0.9, 1}}),
            frames({{0.9, 0}, {0.9, 0}, {0.01, 0}, {0.9, 2}}),
            frames({{0.9, 0}, {0.04, 0}, {0.9, 0}, {0.9, 0}}),
        };
        const sim::RanksTruth t = sim::ranksTruth(specs, st);
        QCOMPARE(t.firstCollapseRank, 2);
        QCOMPARE(t.firstCollapseFrame, int64_t(1));
        QCOMPARE(t.firstOomRank, 0); // frame 3 on both: the earlier-started rank, and a tie
        QCOMPARE(t.firstOomFrame, int64_t(3));
        QVERIFY(!t.firstOomUnique);
        QCOMPARE(t.firstCollapseFrames, (std::vector<int64_t>{-1, 2, 1}));
        QCOMPARE(t.firstOomFrames, (std::vector<int64_t>{3, 3, -1}));
    }

    void commandWritesOneSessionPerRank()
    {
        QTemporaryDir dir;
        const QString out = dir.filePath("job.fragscope");
        // 20 frames x 8 steps; the tight rank lacks 4 GiB: it collapses first (docs/simulator.md).
        const auto r = fstest::runCli({"simulate", "--ranks", "3", "--frames", "20", "--steps", "8",
                                       "--rank-deficit", "4294967296", "-o", out});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QVERIFY(!QFileInfo::exists(out));
        std::string job;
        for (int k = 0; k < 3; ++k) {
            const QString p = dir.filePath(QStringLiteral("job.rank%1.fragscope").arg(k));
            QVERIFY2(QFileInfo::exists(p), qPrintable(p));
            const SessionSummary s = Session::open(p.toStdString()).summary();
            QVERIFY(s.synthetic);
            QCOMPARE(s.meta.at("rank"), std::to_string(k));
            QCOMPARE(s.meta.at("world_size"), std::string("3"));
            if (k == 0) job = s.meta.at("job_id");
            QCOMPARE(s.meta.at("job_id"), job);
            QVERIFY(std::stoll(s.meta.at("clock_offset_realtime_ns")) > 1'700'000'000'000'000'000);
            QCOMPARE(s.frames, int64_t(20));
        }
        // The printed ground truth is the simulator's: the same configurations run here.
        sim::Config base;
        base.frames = 20;
        base.steps = 8;
        sim::RanksConfig rc;
        rc.ranks = 3;
        rc.deficitBytes = 4ull << 30;
        const auto specs = sim::rankSpecs(base, rc);
        std::vector<sim::Stats> stats;
        struct NullSink : EventSink
        {
            StringId intern(std::string_view) override { return {}; }
            StackId internStack(const std::vector<StringId>&) override { return {}; }
            void addDevice(const DeviceInfo&) override {}
            void addProcess(const ProcessInfo&) override {}
            void setMeta(const std::string&, const std::string&) override {}
            void add(const Event&) override {}
            void addFrameMetric(int64_t, const std::string&, double, const std::string&) override {}
            void warn(const std::string&) override {}
        };
        for (const sim::RankSpec& s : specs) {
            NullSink sink;
            stats.push_back(sim::Simulator(s.config).run(sink));
        }
        const sim::RanksTruth t = sim::ranksTruth(specs, stats);
        QCOMPARE(t.firstCollapseRank, 1); // the tight one (3 / 2)
        const QString text = QString::fromUtf8(r.out);
        QVERIFY2(text.contains(QStringLiteral("first to collapse: rank %1 at frame %2")
                                   .arg(t.firstCollapseRank)
                                   .arg(t.firstCollapseFrame)),
                 r.out.constData());
        // Every rank's line names its file.
        QCOMPARE(text.count(QRegularExpression(QStringLiteral("rank \\d: .*job\\.rank\\d"))), 3);
    }

    void badOptions()
    {
        QTemporaryDir dir;
        const QString out = dir.filePath("job.fragscope");
        for (const QStringList& extra :
             {QStringList{"--ranks", "1"}, QStringList{"--ranks", "3", "--tight-rank", "3"},
              QStringList{"--ranks", "2", "--live"}}) {
            const auto r = fstest::runCli(QStringList{"simulate", "-o", out} + extra);
            QCOMPARE(r.exitCode, 64);
            QVERIFY(r.err.contains("rank"));
        }
        QVERIFY(QDir(dir.path()).entryList(QDir::Files).isEmpty());
    }
};

QTEST_GUILESS_MAIN(TestSimRanks)
#include "tst_sim_ranks.moc"
