// The diagnosis in CI: the realistic simulator (docs/simulator.md "Realistic mechanisms") on ten
// fixed seeds, every collapse's verdict and ranked rows scored against the recorded cause with
// bench_diagnosis's scoring (bench/diagnosis/diagnosis_score.h), and the bench's goals checked on
// the counts seen. Short frames (8 steps), so that it stays in the default suite (a few seconds);
// bench_diagnosis measures the same on many seeds.
#include "diagnosis_score.h"

#include <QTemporaryDir>
#include <QTest>

#include <fmt/format.h>

using namespace fs;
using namespace fs::bench;

class TstDiagnosis : public QObject
{
    Q_OBJECT

    DiagnosisResult result_;
    bool ran_ = false;

    const DiagnosisResult& run()
    {
        if (ran_) return result_;
        QTemporaryDir dir;
        DiagnosisOptions o;
        o.seeds = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
        o.frames = 48;
        o.steps = 8;
        o.mechanisms = sim::MechanismSet::Realistic;
        o.dir = dir.path().toStdString();
        result_ = runDiagnosis(o);
        ran_ = true;
        std::string table;
        for (const auto& [m, t] : result_.byMechanism)
            table += fmt::format("  {:<19} {:>3} collapses, top-1 {}, top-3 {}\n", m, t.collapses,
                                 t.top1, t.top3);
        qInfo("%s%s", table.c_str(), diagnosisJson(result_).c_str());
        return result_;
    }

private slots:
    void everyCollapseIsCounted()
    {
        const DiagnosisResult& r = run();
        // Every mechanism came up, and every collapse is scored or counted as ambiguous.
        for (const auto& [m, t] : r.byMechanism)
            QVERIFY2(t.collapses > 0, m.c_str());
        int64_t perMechanism = 0;
        for (const auto& [m, t] : r.byMechanism)
            perMechanism += t.collapses;
        QCOMPARE(perMechanism, r.all.collapses);
        QCOMPARE(r.ambiguous, r.noCause + r.contentAndAllocator);
        QVERIFY(r.content > 0);
        QVERIFY(r.confounded > 0); // content collapses on frames with benign allocator events
        QCOMPARE(r.noReport, int64_t{0});
        QCOMPARE(r.calledAllocator, r.calledRight + r.contentBlamed);
    }

    // The bench's goals on the counts seen. The verdict's side holds: what it calls
    // allocator-related is (>= 90 %), and content-caused collapses on frames with a benign
    // allocator event are not blamed (<= 10 %). The per-mechanism top-1 / top-3 goals and the
    // margin over the baselines fall short, as on the bench's seeds: a mechanism that also
    // occurs in 0-40 % of the healthy frames at the same magnitudes cannot be told from those
    // occurrences by its footprint, and the verdict refuses a figure that more than 5 % of
    // healthy frames reach (docs/analysis.md "Base rates", "Measured figures"). They are
    // expected failures: a change that meets one shows as XPASS and fails the test, so that its
    // author moves it to the checks that hold.
    void goals()
    {
        const DiagnosisResult& r = run();
        for (const std::string& m : missedGoals(r))
            qInfo("goal missed: %s", m.c_str());
        QVERIFY2(r.precision() >= kPrecisionGoal,
                 fmt::format("precision {}", r.precision()).c_str());
        QVERIFY2(r.falseBlameConfounded() <= kConfoundedBlameGoal,
                 fmt::format("false blame confounded {}", r.falseBlameConfounded()).c_str());
        for (const auto& [m, t] : r.byMechanism) {
            QEXPECT_FAIL("", "base rates: docs/analysis.md \"Measured figures\"", Continue);
            QVERIFY2(t.share(t.top1) >= kTop1Goal, (m + " top-1").c_str());
            QEXPECT_FAIL("", "base rates: docs/analysis.md \"Measured figures\"", Continue);
            QVERIFY2(t.share(t.top3) >= kTop3Goal, (m + " top-3").c_str());
        }
        QEXPECT_FAIL("", "base rates: docs/analysis.md \"Measured figures\"", Continue);
        QVERIFY(r.all.share(r.all.top1) >= r.bestBaseline().second + kBaselineMargin);
    }

    // The ranking's part, whatever the verdict: the cause's row comes first at least as often as
    // under any baseline ordering of the same rows. (Not by the bench's 20-point margin: the
    // rarest-kind baseline, which orders by the same base rates, comes within it here.)
    void rankingAtLeastTheBaselines()
    {
        const DiagnosisResult& r = run();
        const auto [best, share] = r.bestBaseline();
        QVERIFY2(r.all.share(r.all.rankedFirst) >= share,
                 fmt::format("ranked first {}, best baseline {} {}", r.all.share(r.all.rankedFirst),
                             best, share)
                     .c_str());
    }
};

QTEST_GUILESS_MAIN(TstDiagnosis)
#include "tst_diagnosis.moc"
