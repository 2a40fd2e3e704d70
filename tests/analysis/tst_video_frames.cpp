// Known answers for the video-metric scoring (core/analysis/video_frames): robust z-scores, the
// isolated-frame rule, the video-to-session frame map and its refusal, chunk worst values.
#include "core/analysis/video_frames.h"

#include <QTest>

#include <cmath>
#include <set>
#include <string>

using namespace fs::analysis;

namespace {

VideoPair pair(int64_t frame, double warp, double flow = 2.0, int64_t ref = -1)
{
    VideoPair p;
    p.frame = frame;
    p.reference = ref < 0 ? frame - 1 : ref;
    p.values = {{"warp_error", warp}, {"flow_l2_px", flow}, {"flicker", 10}, {"ssim_prev", 0.9}};
    return p;
}

} // namespace

class TstVideoFrames : public QObject
{
    Q_OBJECT
private slots:
    void robustScaleKnownAnswers_data()
    {
        QTest::addColumn<QList<double>>("values");
        QTest::addColumn<double>("floor");
        QTest::addColumn<double>("median");
        QTest::addColumn<double>("mad");
        QTest::addColumn<double>("scale");
        // 1 2 3 4 100: median 3; |x - 3| = 2 1 0 1 97 -> MAD 1; scale 1.4826.
        QTest::newRow("odd") << QList<double>{1, 2, 3, 4, 100} << 0.0 << 3.0 << 1.0 << 1.4826;
        // 1 2 3 4: median 2.5; deviations 1.5 .5 .5 1.5 -> MAD 1; scale 1.4826.
        QTest::newRow("even") << QList<double>{4, 1, 3, 2} << 0.0 << 2.5 << 1.0 << 1.4826;
        // All equal: MAD 0, so the floor is the scale.
        QTest::newRow("flat") << QList<double>{5, 5, 5, 5} << 0.5 << 5.0 << 0.0 << 0.5;
        // Deviations 0 .1 .1 .2 .2 -> MAD 0.1, and 1.4826 * 0.1 = 0.148 is under the floor 0.5.
        QTest::newRow("floored") << QList<double>{1.0, 1.1, 0.9, 1.2, 0.8} << 0.5 << 1.0 << 0.1
                                 << 0.5;
    }
    void robustScaleKnownAnswers()
    {
        QFETCH(QList<double>, values);
        QFETCH(double, floor);
        QFETCH(double, median);
        QFETCH(double, mad);
        QFETCH(double, scale);
        const std::vector<double> v(values.begin(), values.end());
        const RobustScale s = videoScale(v, floor);
        QCOMPARE(s.median, median);
        QVERIFY(std::abs(s.mad - mad) < 1e-12);
        QVERIFY(std::abs(s.scale - scale) < 1e-12);
    }

    // Warp errors 1.0 everywhere but frame 5 (40.0): median 1, MAD 0 -> scale = floor 0.5; frame
    // 5's z = (40 - 1) / 0.5 = 78, every other z = 0. Flow 2 px everywhere: flow z 0.
    void scoresAndZ()
    {
        std::vector<VideoPair> pairs;
        for (int i = 1; i <= 9; ++i)
            pairs.push_back(pair(i, i == 5 ? 40.0 : 1.0));
        const auto s = scoreVideo(pairs);
        QCOMPARE(s.size(), size_t{9});
        QCOMPARE(s[4].frame, int64_t{5});
        QCOMPARE(s[4].values.at("warp_error"), 40.0);
        QCOMPARE(s[4].values.at("warp_error_z"), 78.0);
        QCOMPARE(s[3].values.at("warp_error_z"), 0.0);
        QCOMPARE(s[4].values.at("flow_l2_px_z"), 0.0);
        QCOMPARE(s[0].values.size(), size_t{8}); // 4 metrics + 4 z-scores
        QCOMPARE(videoMetricNames().size(), size_t{8});
        QCOMPARE(videoMetricNames()[5], std::string("warp_error_z"));
    }

    // The registry (video_metric_registry.h, docs/architecture.md): every metric found by its
    // name and by its z-score's name, names unique, directions and per-frame scaling as listed.
    void registryByName()
    {
        std::set<std::string> names;
        for (const VideoMetric& m : videoMetrics()) {
            QVERIFY2(names.insert(m.name).second, m.name);
            QCOMPARE(findVideoMetric(m.name), &m);
            QCOMPARE(findVideoMetric(std::string(m.name) + "_z"), &m);
            QVERIFY(m.scaleFloor > 0);
            QVERIFY(std::string(m.unit).size() > 0 && std::string(m.description).size() > 0);
        }
        QCOMPARE(names.size(), size_t{4});
        QCOMPARE(findVideoMetric("nope"), nullptr);
        QCOMPARE(findVideoMetric("_z"), nullptr);
        // ssim_prev is the one where smaller is worse; flow and flicker are per frame.
        QVERIFY(!videoMetricHigherIsWorse("ssim_prev") && !videoMetricHigherIsWorse("ssim_prev_z"));
        QVERIFY(videoMetricHigherIsWorse("warp_error_z"));
        QVERIFY(findVideoMetric("flow_l2_px")->perFrame && findVideoMetric("flicker")->perFrame);
        QVERIFY(!findVideoMetric("warp_error")->perFrame);
        // A pair 4 -> 6 with flicker 8 (two frames apart): 8 / 2 = 4 per frame; SSIM 0.7 as is.
        VideoPair p = pair(6, 1.0, 4.0, 4);
        p.values["flicker"] = 8;
        p.values["ssim_prev"] = 0.7;
        const auto s = scoreVideo(std::vector<VideoPair>{p});
        QCOMPARE(s[0].values.at("flicker"), 4.0);
        QCOMPARE(s[0].values.at("flow_l2_px"), 2.0);
        QCOMPARE(s[0].values.at("ssim_prev"), 0.7);
    }

    // Frame 5 replaced: pairs 5 (4->5) and 6 (5->6) both break, so 5 is a candidate; the skip
    // pair 4->6 (warp 1.2, flow 4 px over two frames) is no break: frame 6 is then scored against
    // frame 4, with 4 / 2 = 2 px per frame and z (1.2 - 1) / 0.5 = 0.4. Only frame 5 breaks.
    void isolatedFrame()
    {
        std::vector<VideoPair> pairs;
        for (int i = 1; i <= 9; ++i)
            pairs.push_back(pair(i, i == 5 || i == 6 ? 40.0 : 1.0));
        QCOMPARE(isolatedBreakCandidates(pairs), std::vector<int64_t>{5});
        const VideoPair skip = pair(6, 1.2, 4.0, 4);
        const auto s = scoreVideo(pairs, std::vector<VideoPair>{skip});
        QCOMPARE(s[5].frame, int64_t{6});
        QCOMPARE(s[5].reference, int64_t{4});
        QCOMPARE(s[5].values.at("flow_l2_px"), 2.0);
        // Median of the final warps (1 x7, 1.2, 40) is 1, MAD 0 -> scale 0.5.
        QVERIFY(std::abs(s[5].values.at("warp_error_z") - 0.4) < 1e-9);
        QCOMPARE(s[4].values.at("warp_error_z"), 78.0);
        // A skip pair that breaks too (two broken frames in a row) changes nothing.
        const auto t = scoreVideo(pairs, std::vector<VideoPair>{pair(6, 30.0, 4.0, 4)});
        QCOMPARE(t[5].reference, int64_t{5});
        QCOMPARE(t[5].values.at("warp_error"), 40.0);
    }

    // A persistent jump breaks one pair only: no candidate, nothing measured twice.
    void jumpIsNoCandidate()
    {
        std::vector<VideoPair> pairs;
        for (int i = 1; i <= 9; ++i)
            pairs.push_back(pair(i, i == 4 ? 40.0 : 1.0));
        QVERIFY(isolatedBreakCandidates(pairs).empty());
    }

    void parseMap_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<bool>("ok");
        QTest::addColumn<qlonglong>("k");
        QTest::addColumn<qlonglong>("offset");
        QTest::newRow("k") << "4" << true << 4LL << 0LL;
        QTest::newRow("k:offset") << "4:1" << true << 4LL << 1LL;
        QTest::newRow("negative offset") << "2:-3" << true << 2LL << -3LL;
        QTest::newRow("zero") << "0" << false << 0LL << 0LL;
        QTest::newRow("text") << "four" << false << 0LL << 0LL;
        QTest::newRow("empty offset") << "4:" << false << 0LL << 0LL;
        QTest::newRow("trailing") << "4x" << false << 0LL << 0LL;
    }
    void parseMap()
    {
        QFETCH(QString, text);
        QFETCH(bool, ok);
        QFETCH(qlonglong, k);
        QFETCH(qlonglong, offset);
        std::string err;
        const auto m = parseFrameMap(text.toStdString(), &err);
        QCOMPARE(m.has_value(), ok);
        if (!ok) {
            QVERIFY(!err.empty());
            return;
        }
        QCOMPARE(m->perSessionFrame, k);
        QCOMPARE(m->offset, offset);
        QCOMPARE(QString::fromStdString(m->text()), text);
    }

    void fit()
    {
        std::vector<int64_t> session;
        for (int i = 0; i < 24; ++i)
            session.push_back(i);
        // 24 video frames on 24 session frames: the default map fits.
        QVERIFY(fitFrameMap(24, session, {}).fits);
        // 96 video frames: 4 per session frame fits; the default does not, and says so with both
        // counts and the map that fits.
        QVERIFY(fitFrameMap(96, session, {4, 0}).fits);
        const MapFit no = fitFrameMap(96, session, {});
        QVERIFY(!no.fits);
        QVERIFY2(no.problem.find("96 frames") != std::string::npos, no.problem.c_str());
        QVERIFY2(no.problem.find("session 24") != std::string::npos, no.problem.c_str());
        QVERIFY(no.suggestion.has_value());
        QCOMPARE(no.suggestion->text(), std::string("4"));
        // 24 video frames for 25 session frames: 24 is no multiple of 25, so no map fits (a
        // truncated video?) and none is suggested.
        session.push_back(24);
        const MapFit none = fitFrameMap(24, session, {});
        QVERIFY(!none.fits);
        QVERIFY(!none.suggestion.has_value());
        // Session frames numbered from 1: the offset moves video frame 0 there.
        const std::vector<int64_t> fromOne = {1, 2, 3};
        QVERIFY(!fitFrameMap(3, fromOne, {}).fits);
        QCOMPARE(fitFrameMap(3, fromOne, {}).suggestion->text(), std::string("1:1"));
        QVERIFY(fitFrameMap(3, fromOne, {1, 1}).fits);
        // A partial last chunk never fits.
        QVERIFY(!fitFrameMap(23, std::vector<int64_t>(session.begin(), session.begin() + 6), {4, 0})
                     .fits);
        // A session without frames: no map fits.
        QVERIFY(!fitFrameMap(10, std::vector<int64_t>{}, {}).fits);
    }

    // K = 2: session frame 0 holds video frames 0 and 1 (only 1 has metrics), session frame 1
    // holds 2 and 3. The worst of each: the larger warp error, the smaller SSIM.
    void chunkWorst()
    {
        std::vector<VideoFrameScore> s(3);
        s[0].frame = 1;
        s[0].values = {{"warp_error", 1.0}, {"ssim_prev", 0.9}, {"ssim_prev_z", 0.1}};
        s[1].frame = 2;
        s[1].values = {{"warp_error", 5.0}, {"ssim_prev", 0.95}, {"ssim_prev_z", -3.0}};
        s[2].frame = 3;
        s[2].values = {{"warp_error", 2.0}, {"ssim_prev", 0.5}, {"ssim_prev_z", 1.0}};
        const auto m = sessionFrameValues(s, {2, 0});
        QCOMPARE(m.size(), size_t{2});
        QCOMPARE(m.at(0).at("warp_error"), 1.0);
        QCOMPARE(m.at(1).at("warp_error"), 5.0);
        QCOMPARE(m.at(1).at("ssim_prev"), 0.5);
        QCOMPARE(m.at(1).at("ssim_prev_z"), -3.0);
        // With an offset of 10: session frames 10 and 11.
        QCOMPARE(sessionFrameValues(s, {2, 10}).begin()->first, int64_t{10});
    }
};

QTEST_GUILESS_MAIN(TstVideoFrames)
#include "tst_video_frames.moc"
