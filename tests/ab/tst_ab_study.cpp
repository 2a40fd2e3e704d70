// The verdicts of core/study on hand-made numbers (no video, no process): each verdict from the
// figures it needs, thresholds taken from the study (the same arm is normal or within the noise
// depending on the repeat's noise), study.json written and read back to the same judgement,
// a bad study.json named in the error.
#include "core/store/sqlite.h"
#include "core/study/ab_study.h"

#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <fstream>

using namespace fs;
using namespace fs::study;

namespace {

constexpr int64_t kFrames = 16;

// A run whose warp error is `base` on every frame (plus a small wobble), `broken` on the frames
// listed, scored as scoreVideo would (robust z within the run); every frame `mse` away from the
// baseline (SSIM 1 - mse / 1000), `farMse` on the frames listed in `far`.
Run makeRun(const std::string& folder, std::vector<int64_t> brokenFrames, double mse,
            std::vector<int64_t> far = {}, double farMse = 0)
{
    Run r;
    r.folder = folder;
    r.ran = true;
    r.frames = kFrames;
    std::vector<analysis::VideoPair> pairs;
    for (int64_t f = 1; f < kFrames; ++f) {
        analysis::VideoPair p;
        p.frame = f;
        p.reference = f - 1;
        const bool bad =
            std::find(brokenFrames.begin(), brokenFrames.end(), f) != brokenFrames.end();
        const double wobble = 0.02 * static_cast<double>(f % 3);
        p.values = {{"flow_l2_px", 1 + wobble},
                    {"warp_error", bad ? 80 : 1 + wobble},
                    {"flicker", bad ? 60 : 3 + wobble},
                    {"ssim_prev", bad ? 0.1 : 0.95 - wobble}};
        pairs.push_back(p);
    }
    r.scores = analysis::scoreVideo(pairs);
    for (int64_t f = 0; f < kFrames; ++f) {
        const bool isFar = std::find(far.begin(), far.end(), f) != far.end();
        const double m = isFar ? farMse : mse;
        r.vsBaseline.push_back(
            {f, m, m == 0 ? INFINITY : 10 * std::log10(255.0 * 255.0 / m), 1 - m / 1000});
    }
    return r;
}

Study makeStudy(Run repeat, std::vector<Run> changed)
{
    Study s;
    s.fragscopeVersion = "test";
    s.created = "2026-12-07T00:00:00Z";
    s.command = {"gen"};
    s.rules = analysis::defaultCollapseRules();
    Run base = makeRun("baseline-1", {7}, 0);
    base.vsBaseline.clear();
    s.arms.push_back({"baseline", Role::Baseline, {}, {base}});
    s.arms.push_back({"repeat", Role::Repeat, {}, {repeat}});
    Arm arm{"no-caching", Role::Changed, {{"PYTORCH_NO_CUDA_MEMORY_CACHING", "1"}}, {}};
    arm.runs = std::move(changed);
    s.arms.push_back(arm);
    return s;
}

} // namespace

class TstAbStudy : public QObject
{
    Q_OBJECT

private slots:
    void verdicts_data()
    {
        QTest::addColumn<bool>("repeatBad");
        QTest::addColumn<bool>("armBad");
        QTest::addColumn<double>("noise");   // every repeat frame's squared error
        QTest::addColumn<double>("armDist"); // the arm's squared error at the collapse
        QTest::addColumn<QString>("verdict");
        QTest::newRow("follows") << true << false << 0.0 << 500.0 << "follows_allocator";
        QTest::newRow("not allocator") << true << true << 0.0 << 0.0 << "not_allocator";
        QTest::newRow("not reproducible") << false << false << 0.0 << 500.0 << "not_reproducible";
        // Not broken, but no further from the baseline's bad frame than two unchanged runs
        // differ: the arm did not change the frame, so it cannot be called back to normal.
        QTest::newRow("within noise") << true << false << 600.0 << 500.0 << "undetermined";
    }
    void verdicts()
    {
        QFETCH(bool, repeatBad);
        QFETCH(bool, armBad);
        QFETCH(double, noise);
        QFETCH(double, armDist);
        QFETCH(QString, verdict);
        Run repeat =
            makeRun("repeat-1", repeatBad ? std::vector<int64_t>{7} : std::vector<int64_t>{}, noise,
                    {7}, repeatBad ? noise : 500);
        // A little spread in the noise so that it has a scale.
        for (auto& d : repeat.vsBaseline)
            d.mse *= 1 + 0.01 * static_cast<double>(d.frame % 4);
        Run arm = makeRun("no-caching-1", armBad ? std::vector<int64_t>{7} : std::vector<int64_t>{},
                          noise, {7}, armDist);
        Study s = makeStudy(repeat, {arm});
        judge(s);
        QVERIFY2(s.problem.empty(), s.problem.c_str());
        QCOMPARE(s.collapses.size(), size_t{1});
        QCOMPARE(s.collapses[0].firstFrame, int64_t{7});
        QCOMPARE(QString(verdictName(s.collapses[0].verdict)), verdict);
        QVERIFY(!s.collapses[0].reason.empty());
        QCOMPARE(s.noise.samples, int64_t{kFrames - 1}); // every frame but the collapse's
    }

    // No repeat run: reproducibility unknown, whatever the arms say.
    void noRepeatIsUndetermined()
    {
        Study s =
            makeStudy(makeRun("repeat-1", {7}, 0), {makeRun("no-caching-1", {}, 0, {7}, 500)});
        s.arms[1].runs[0].error = "the command failed: exit status 1";
        judge(s);
        QCOMPARE(s.collapses[0].verdict, Verdict::Undetermined);
        QVERIFY(s.collapses[0].reason.find("no repeat run") != std::string::npos);
    }

    // The noise floor is the repeat's: healthy frames only, the collapse's frame left out.
    void noiseFloorFromHealthyFrames()
    {
        Study s = makeStudy(makeRun("repeat-1", {7}, 4.0, {7}, 900),
                            {makeRun("no-caching-1", {}, 4.0, {7}, 500)});
        judge(s);
        QCOMPARE(s.noise.samples, int64_t{15});
        QCOMPARE(s.noise.mseMax, 4.0);
        QVERIFY(std::abs(s.noise.psnrMinDb - 10 * std::log10(255.0 * 255.0 / 4.0)) < 1e-9);
    }

    void jsonRoundTrip()
    {
        QTemporaryDir dir;
        Study s =
            makeStudy(makeRun("repeat-1", {7}, 0), {makeRun("no-caching-1", {}, 0, {7}, 500)});
        judge(s);
        s.collapses[0].sessionVerdict = "allocator-related: kernel variant shift";
        writeStudy(s, dir.path().toStdString());
        QVERIFY(isStudyFolder(dir.path().toStdString()));
        const Study back = readStudy(dir.path().toStdString());
        QCOMPARE(back.arms.size(), s.arms.size());
        QCOMPARE(back.arms[2].env, s.arms[2].env);
        QCOMPARE(back.collapses.size(), size_t{1});
        QCOMPARE(back.collapses[0].verdict, Verdict::FollowsAllocator);
        QCOMPARE(back.collapses[0].sessionVerdict, s.collapses[0].sessionVerdict);
        QVERIFY(std::isinf(back.arms[1].runs[0].vsBaseline[3].psnrDb)); // null: identical
        QCOMPARE(studyText(back), studyText(s));
        QCOMPARE(studyJson(back), studyJson(s));
    }

    void badStudyFileIsNamed()
    {
        QTemporaryDir dir;
        const std::string path = dir.path().toStdString() + "/study.json";
        std::ofstream(path) << R"({"format": "fragscope-study", "schema_version": 1, "arms": 3})";
        try {
            readStudy(dir.path().toStdString());
            QFAIL("read a bad study");
        } catch (const SessionError& e) {
            const std::string what = e.what();
            QVERIFY2(what.find(path) != std::string::npos, e.what());
        }
        QVERIFY(!isStudyFolder(dir.path().toStdString()));
        std::ofstream(path) << R"({"format": "something else", "schema_version": 1})";
        QVERIFY_THROWS_EXCEPTION(SessionError, readStudy(dir.path().toStdString()));
    }
};

QTEST_GUILESS_MAIN(TstAbStudy)
#include "tst_ab_study.moc"
