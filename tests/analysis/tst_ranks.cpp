// Ranks of one job as one run (core/analysis/ranks.h, `report --ranks`): alignment on the wall
// clock and on frames, the first rank to collapse or hit an OOM against the simulator's ground
// truth, per-rank figures equal to each rank's own report, rank numbering, and files of
// different jobs refused (simulated ranks and real PyTorch snapshots).
#include "capture/sim/ranks.h"
#include "core/analysis/engine.h"
#include "core/analysis/ranks.h"
#include "core/store/session.h"
#include "testutil.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

using namespace fs;
using namespace fs::analysis;

namespace {

QJsonObject json(const fstest::CliResult& r)
{
    return QJsonDocument::fromJson(r.out).object();
}

// The default track's entry of a single-file `report --json`.
QJsonObject reportTrack(const QJsonObject& report, const Track& t)
{
    for (const auto& v : report["tracks"].toArray()) {
        const QJsonObject o = v.toObject();
        if (o["device"].toInt() == static_cast<int>(t.device) &&
            o["level"].toString() == QString::fromLatin1(levelName(t.level)))
            return o;
    }
    return {};
}

} // namespace

class TestRanks : public QObject
{
    Q_OBJECT
    QTemporaryDir dir_;
    QStringList rankFiles_; // job.rank0 .. job.rank3
    sim::Config base_;
    sim::RanksConfig rc_;
    std::vector<sim::RankSpec> specs_;
    int truthCollapseRank_ = -1, truthOomRank_ = -1;
    int64_t truthCollapseFrame_ = -1;

    std::vector<RankInput> inputs(const QStringList& files)
    {
        std::vector<RankInput> in;
        for (const QString& f : files)
            in.push_back({f.toStdString(), Engine::open(f.toStdString()), nullptr});
        return in;
    }

    QString importSnapshot(const QString& rel, const QString& name)
    {
        const QString out = dir_.filePath(name);
        const auto r = fstest::runCli({"import", fstest::dataDir() + "/" + rel, "-o", out});
        if (r.exitCode != 0) qWarning("%s", r.err.constData());
        return out;
    }

private slots:
    void initTestCase()
    {
        // 4 ranks of 20 frames x 8 steps; rank 2 lacks 4 GiB. Smaller than the default run, and
        // still a tight rank that collapses and hits OOMs before the others (docs/simulator.md).
        base_.frames = 20;
        base_.steps = 8;
        rc_.ranks = 4;
        rc_.deficitBytes = 4ull << 30;
        specs_ = sim::rankSpecs(base_, rc_);
        const auto r =
            fstest::runCli({"simulate", "--ranks", "4", "--frames", "20", "--steps", "8",
                            "--rank-deficit", "4294967296", "-o", dir_.filePath("job.fragscope")});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        for (int k = 0; k < 4; ++k)
            rankFiles_ << dir_.filePath(QStringLiteral("job.rank%1.fragscope").arg(k));
        // The simulator's own ground truth, as it printed it.
        const QString out = QString::fromUtf8(r.out);
        const auto c = QRegularExpression(QStringLiteral("first to collapse: rank (\\d+) at frame "
                                                         "(\\d+)"))
                           .match(out);
        QVERIFY2(c.hasMatch(), r.out.constData());
        truthCollapseRank_ = c.captured(1).toInt();
        truthCollapseFrame_ = c.captured(2).toLongLong();
        const auto o = QRegularExpression(QStringLiteral("first OOM: rank (\\d+) in frame \\d+\\."))
                           .match(out);
        QVERIFY2(o.hasMatch(), "the tight rank should hit an OOM, alone first");
        truthOomRank_ = o.captured(1).toInt();
        QCOMPARE(truthCollapseRank_, 2); // the tight rank (4 / 2)
    }

    void wallClockAlignment()
    {
        const RankRun run = analyseRanks(inputs(rankFiles_));
        QCOMPARE(run.mode, RankAlignMode::WallClock);
        QCOMPARE(run.ranks.size(), size_t(4));
        QCOMPARE(run.referenceRank, 0);
        // Each rank's clock starts at its own process start; on the wall clock rank k started
        // startSkewNs after rank 0, so its offset onto rank 0's clock is exactly that.
        for (int k = 0; k < 4; ++k) {
            QCOMPARE(run.ranks[size_t(k)].rank, k);
            QCOMPARE(run.ranks[size_t(k)].offsetNs, specs_[size_t(k)].startSkewNs);
        }
        // Same schedule on every rank: frame 0 starts as far apart as the processes did.
        QVERIFY(run.frameSpreadOnWallClockNs.has_value());
        QCOMPARE(*run.frameSpreadOnWallClockNs, specs_.back().startSkewNs);
    }

    void frameAlignment()
    {
        const RankRun run = analyseRanks(inputs(rankFiles_), RankAlignMode::Frame);
        QCOMPARE(run.mode, RankAlignMode::Frame);
        QCOMPARE(run.alignFrame, int64_t(0));
        // Frame 0 starts at the same session time on every rank (identical schedules, clocks
        // that start at 1 s): nothing to shift.
        for (const RankSummary& r : run.ranks)
            QCOMPARE(r.offsetNs, int64_t(0));
    }

    void firstRanksMatchTheSimulator()
    {
        for (RankAlignMode m : {RankAlignMode::WallClock, RankAlignMode::Frame}) {
            const RankRun run = analyseRanks(inputs(rankFiles_), m);
            QVERIFY(run.firstCollapse);
            QCOMPARE(run.firstCollapse->rank, truthCollapseRank_);
            QCOMPARE(run.firstCollapse->frame, truthCollapseFrame_);
            QVERIFY(run.firstOom);
            QCOMPARE(run.firstOom->rank, truthOomRank_);
            // The per-frame table has every frame number, each on all four ranks; the truth's
            // frame has the tight rank collapsed, first.
            QCOMPARE(run.frames.size(), size_t(20));
            for (const RankFrame& f : run.frames)
                QCOMPARE(f.ranks, (std::vector<int>{0, 1, 2, 3}));
            bool found = false;
            for (const RankFrame& f : run.frames)
                if (f.frame == truthCollapseFrame_) {
                    found = true;
                    QCOMPARE(f.firstCollapseRank, truthCollapseRank_);
                    QVERIFY(std::count(f.collapsedRanks.begin(), f.collapsedRanks.end(),
                                       truthCollapseRank_) == 1);
                }
            QVERIFY(found);
            // The spread of peak reserved: the tight rank has the least.
            QCOMPARE(run.peakReservedMinRank, truthCollapseRank_);
            QVERIFY(run.peakReservedSpread() > 0);
        }
    }

    void perRankFiguresEqualEachRankAlone()
    {
        const RankRun run = analyseRanks(inputs(rankFiles_));
        const QJsonObject ranks =
            json(fstest::runCli({"report", "--ranks", rankFiles_[0], rankFiles_[1], rankFiles_[2],
                                 rankFiles_[3], "--json"}));
        QCOMPARE(ranks["first_collapse_rank"].toInt(), truthCollapseRank_);
        QCOMPARE(ranks["first_oom_rank"].toInt(), truthOomRank_);
        QCOMPARE(ranks["alignment"].toObject()["mode"].toString(), QStringLiteral("wall_clock"));
        for (size_t k = 0; k < run.ranks.size(); ++k) {
            const RankSummary& r = run.ranks[k];
            const auto alone = fstest::runCli({"report", QString::fromStdString(r.path), "--json"});
            QCOMPARE(alone.exitCode, 0);
            const QJsonObject rep = json(alone);
            const QJsonObject track = reportTrack(rep, *r.track);
            QVERIFY(!track.isEmpty());
            QCOMPARE(static_cast<uint64_t>(track["peak_reserved_bytes"].toDouble()),
                     r.peakReservedBytes);
            QCOMPARE(track["max_fragmentation_ratio"].toDouble(), r.maxFragmentationRatio);
            QCOMPARE(static_cast<size_t>(rep["collapses"].toArray().size()), r.collapses.size());
            QCOMPARE(static_cast<size_t>(rep["ooms"].toArray().size()), r.ooms.size());
            // The same figures in report --ranks' entry for the rank.
            const QJsonObject entry = ranks["ranks"].toArray()[int(k)].toObject();
            QCOMPARE(entry["file"].toString(), QString::fromStdString(r.path));
            QCOMPARE(entry["peak_reserved_bytes"].toDouble(),
                     track["peak_reserved_bytes"].toDouble());
            QCOMPARE(entry["ooms"].toArray().size(), rep["ooms"].toArray().size());
            // Collapse onsets on the rank's own clock are its report's frame starts.
            for (const RankEvent& c : r.collapses) {
                QCOMPARE(c.time, c.sessionTime + r.offsetNs);
                for (const auto& f : rep["frames"].toArray())
                    if (f.toObject()["index"].toInteger() == c.frame)
                        QCOMPARE(f.toObject()["start"].toInteger(), c.sessionTime);
            }
        }
    }

    void textListsTheFramesWithAFailure()
    {
        // The text's frame table lists exactly the frame numbers where some rank collapsed or
        // hit an OOM (the engine's per-frame rows with a collapsed or an OOM rank), as the JSON.
        const RankRun run = analyseRanks(inputs(rankFiles_));
        QList<qint64> want;
        for (const RankFrame& f : run.frames)
            if (!f.collapsedRanks.empty() || !f.oomRanks.empty()) want << f.frame;
        QVERIFY(!want.isEmpty());
        QVERIFY(want.size() < static_cast<qsizetype>(run.frames.size())); // some frames are quiet
        const QStringList args = {"report",      "--ranks",     rankFiles_[0],
                                  rankFiles_[1], rankFiles_[2], rankFiles_[3]};
        const auto text = fstest::runCli(args);
        QCOMPARE(text.exitCode, 0);
        const QString out = QString::fromUtf8(text.out);
        const qsizetype at = out.indexOf(QStringLiteral("Frames with a collapse or an OOM"));
        QVERIFY(at >= 0);
        QList<qint64> listed;
        const QStringList lines = out.mid(at).split('\n', Qt::SkipEmptyParts);
        for (qsizetype i = 2; i < lines.size(); ++i) // after the title and the column names
            listed << lines[i].split(' ', Qt::SkipEmptyParts).front().toLongLong();
        QCOMPARE(listed, want);
        QList<qint64> inJson;
        for (const auto& f : json(fstest::runCli(args + QStringList{"--json"}))["frames"].toArray())
            inJson << f.toObject()["frame"].toInteger();
        QCOMPARE(inJson, want);
    }

    void ranksNumberedByMetaWhateverTheOrder()
    {
        const RankRun run =
            analyseRanks(inputs({rankFiles_[3], rankFiles_[1], rankFiles_[0], rankFiles_[2]}));
        for (int k = 0; k < 4; ++k) {
            QCOMPARE(run.ranks[size_t(k)].rank, k);
            QCOMPARE(QString::fromStdString(run.ranks[size_t(k)].path), rankFiles_[k]);
        }
        QCOMPARE(run.firstCollapse->rank, truthCollapseRank_);
    }

    void otherJobRefused()
    {
        // Same shape, another seed: another job id.
        const auto r = fstest::runCli({"simulate", "--ranks", "2", "--frames", "3", "--steps", "2",
                                       "--seed", "5", "-o", dir_.filePath("other.fragscope")});
        QCOMPARE(r.exitCode, 0);
        const QString other = dir_.filePath("other.rank1.fragscope");
        QVERIFY_THROWS_EXCEPTION(RankAlignError, analyseRanks(inputs({rankFiles_[0], other})));
        const auto cli = fstest::runCli({"report", "--ranks", rankFiles_[0], other});
        QCOMPARE(cli.exitCode, 2);
        QVERIFY2(cli.err.contains("job ids differ") && cli.err.contains("--align none"),
                 cli.err.constData());
        // --align none shows them anyway, each on its own clock.
        const RankRun run = analyseRanks(inputs({rankFiles_[0], other}), RankAlignMode::None);
        QCOMPARE(run.mode, RankAlignMode::None);
        for (const RankSummary& s : run.ranks)
            QCOMPARE(s.offsetNs, int64_t(0));
        QCOMPARE(
            fstest::runCli({"report", "--ranks", rankFiles_[0], other, "--align", "none"}).exitCode,
            0);
    }

    void usage()
    {
        QCOMPARE(fstest::runCli({"report", "--ranks", rankFiles_[0]}).exitCode, 64);
        QCOMPARE(fstest::runCli({"report", "--ranks", rankFiles_[0], rankFiles_[1], "--align", "x"})
                     .exitCode,
                 64);
        QCOMPARE(
            fstest::runCli({"report", "--ranks", rankFiles_[0], "/nonexistent.fragscope"}).exitCode,
            2);
    }

    void realSnapshotsOfDifferentJobs()
    {
        FSTEST_REQUIRE_DATA("pytorch-snapshots");
        // Two real snapshots, from two people's runs months apart: PyTorch stamps its trace with
        // the wall clock, so they are told apart as different jobs.
        const QString a = importSnapshot("pytorch-snapshots/cs336-silmont2000-small.pickle",
                                         "silmont-small.fragscope");
        const QString b = importSnapshot("pytorch-snapshots/cs336-silmont2000-bf16.pickle",
                                         "silmont-bf16.fragscope");
        const auto in = inputs({a, b});
        for (const RankInput& i : in) {
            const RankIdentity id = rankIdentity(i.engine->summary(), i.path);
            QVERIFY(id.realtimeOffsetNs);
            QCOMPARE(*id.realtimeOffsetNs, int64_t(0));
        }
        try {
            analyseRanks(in);
            QFAIL("two jobs' snapshots were lined up");
        } catch (const RankAlignError& e) {
            QVERIFY2(QString(e.what()).contains("do not overlap on the wall clock"), e.what());
        }
        // Shown anyway with --align none: each rank's figures are its own report's.
        const RankRun run = analyseRanks(in, RankAlignMode::None);
        for (const RankSummary& r : run.ranks) {
            const QJsonObject rep =
                json(fstest::runCli({"report", QString::fromStdString(r.path), "--json"}));
            QCOMPARE(
                static_cast<uint64_t>(reportTrack(rep, *r.track)["peak_reserved_bytes"].toDouble()),
                r.peakReservedBytes);
        }
        // The same snapshot twice is trivially one job: offset 0 and equal figures.
        const RankRun same = analyseRanks(inputs({a, a}));
        QCOMPARE(same.mode, RankAlignMode::WallClock);
        QCOMPARE(same.ranks[1].offsetNs, int64_t(0));
        QCOMPARE(same.ranks[0].peakReservedBytes, same.ranks[1].peakReservedBytes);
        QCOMPARE(same.peakReservedSpread(), uint64_t(0));
    }

    void noCommonClockNorFrames()
    {
        FSTEST_REQUIRE_DATA("pytorch-snapshots");
        // flexgen's snapshot predates time_us: an ordinal axis, no clock, no frames.
        const QString ord = importSnapshot("pytorch-snapshots/flexgen-oom-v2.0-format.pickle",
                                           "flexgen-oom.fragscope");
        try {
            analyseRanks(inputs({ord, rankFiles_[0]}));
            QFAIL("an ordinal snapshot was lined up with a timed session");
        } catch (const RankAlignError& e) {
            QVERIFY2(QString(e.what()).contains("neither a wall clock nor a frame number"),
                     e.what());
        }
        QVERIFY_THROWS_EXCEPTION(RankAlignError,
                                 analyseRanks(inputs({ord, rankFiles_[0]}), RankAlignMode::Frame));
        QCOMPARE(analyseRanks(inputs({ord, rankFiles_[0]}), RankAlignMode::None).ranks.size(),
                 size_t(2));
    }
};

QTEST_GUILESS_MAIN(TestRanks)
#include "tst_ranks.moc"
