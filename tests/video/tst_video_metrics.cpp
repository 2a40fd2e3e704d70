// The video metrics on clips the test writes (clips.h): flow accuracy on a known translation,
// no break in a clean clip, exactly the broken frame in a clip with one, thumbnails, every bad
// input, cancel.
#include "clips.h"

#include "core/analysis/types.h"
#include "core/analysis/video_frames.h"
#include "core/store/sqlite.h"
#include "core/video/video_metrics.h"

#include <QFile>
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include <opencv2/imgcodecs.hpp>

#include <algorithm>
#include <set>
#include <unistd.h>

using namespace fs;
namespace clips = fstest::clips;

namespace {

// Frames the default collapse rules flag (warp_error_z > 6, …).
std::set<int64_t> flagged(const video::VideoAnalysis& a)
{
    std::set<int64_t> out;
    for (const auto& s : a.scores)
        if (analysis::breaksAnyRule(s.values, analysis::defaultCollapseRules()))
            out.insert(s.frame);
    return out;
}

// "frame 17: warp_error_z 18.2; largest elsewhere 1.3 (frame 4)"
QString breakFigures(const video::VideoAnalysis& a, int64_t broken)
{
    double at = 0, other = -1e9;
    int64_t where = -1;
    for (const auto& s : a.scores) {
        const double z = s.values.at("warp_error_z");
        if (s.frame == broken) {
            at = z;
        } else if (z > other) {
            other = z;
            where = s.frame;
        }
    }
    return QStringLiteral("frame %1: warp_error_z %2; largest elsewhere %3 (frame %4)")
        .arg(broken)
        .arg(at, 0, 'f', 1)
        .arg(other, 0, 'f', 2)
        .arg(where);
}

QString describe(const video::VideoAnalysis& a)
{
    QString s;
    for (const auto& f : a.scores)
        s += QStringLiteral("%1: flow %2 warp %3 z %4\n")
                 .arg(f.frame)
                 .arg(f.values.at("flow_l2_px"), 0, 'f', 2)
                 .arg(f.values.at("warp_error"), 0, 'f', 2)
                 .arg(f.values.at("warp_error_z"), 0, 'f', 1);
    return s;
}

} // namespace

class TstVideoMetrics : public QObject
{
    Q_OBJECT
    QTemporaryDir dir_;
    QString path(const QString& name) const { return dir_.filePath(name); }

    void expectError(const QString& input, const QString& names, const QString& says)
    {
        try {
            video::analyzeVideo(input.toStdString());
            QFAIL(qPrintable("no error for " + input));
        } catch (const SessionError& e) {
            const QString msg = QString::fromStdString(e.what());
            QVERIFY2(msg.contains(names), qPrintable(msg));
            QVERIFY2(msg.contains(says, Qt::CaseInsensitive), qPrintable(msg));
        }
    }

private slots:
    // A texture moved by exactly d px per frame: every frame's flow_l2_px is d within 5 %.
    void translationAccuracy_data()
    {
        QTest::addColumn<QString>("file");
        QTest::addColumn<double>("dx");
        QTest::addColumn<double>("dy");
        QTest::newRow("h264 1 px") << "t1.mp4" << 1.0 << 0.0;
        QTest::newRow("h264 2.5 px") << "t25.mp4" << 2.5 << 0.0;
        QTest::newRow("h264 6 px") << "t6.mp4" << 6.0 << 0.0;
        QTest::newRow("h264 3,4 px (5 px)") << "t34.mp4" << 3.0 << 4.0;
        QTest::newRow("vp8 4 px") << "t4.webm" << 4.0 << 0.0;
        QTest::newRow("mjpeg 3 px") << "t3.avi" << 3.0 << 0.0;
        QTest::newRow("png folder 2 px") << "t2frames" << 2.0 << 0.0;
    }
    void translationAccuracy()
    {
        QFETCH(QString, file);
        QFETCH(double, dx);
        QFETCH(double, dy);
        clips::translated(path(file), 24, dx, dy);
        const auto a = video::analyzeVideo(path(file).toStdString());
        QCOMPARE(a.frames, int64_t{24});
        QCOMPARE(a.width, clips::kWidth);
        QCOMPARE(a.scores.size(), size_t{23});
        const double d = std::hypot(dx, dy);
        double worst = 0;
        for (const auto& s : a.scores) {
            const double flow = s.values.at("flow_l2_px");
            worst = std::max(worst, std::abs(flow - d) / d);
            QVERIFY2(
                std::abs(flow - d) <= 0.05 * d,
                qPrintable(QStringLiteral("frame %1: %2 px for %3").arg(s.frame).arg(flow).arg(d)));
        }
        qInfo("%s: flow_l2_px within %.2f %% of %.2f px on every frame", qPrintable(file),
              100 * worst, d);
        QVERIFY2(flagged(a).empty(), qPrintable(describe(a)));
        QCOMPARE(a.folder, !file.contains('.'));
    }

    // A clean, smoothly moving clip: no frame passes the default rules (warp_error_z > 6 …).
    void cleanClip()
    {
        clips::smooth(path("clean.mp4"), 40);
        const auto a = video::analyzeVideo(path("clean.mp4").toStdString());
        QCOMPARE(a.frames, int64_t{40});
        QVERIFY2(flagged(a).empty(), qPrintable(describe(a)));
        QVERIFY(a.skips.empty()); // no candidate: no second decode
        double maxZ = -1e9;
        for (const auto& s : a.scores)
            maxZ = std::max(maxZ, s.values.at("warp_error_z"));
        QVERIFY2(maxZ < analysis::kVideoBreakZ, qPrintable(describe(a)));
        qInfo("clean clip: largest warp_error_z %.2f (rule: > %g)", maxZ, analysis::kVideoBreakZ);
    }

    // Frame 17 replaced by another scene: frame 17 and no other is flagged; frame 18 is scored
    // against frame 16 (the isolated-frame rule), so it is not flagged for following 17.
    void replacedFrame()
    {
        clips::smooth(path("replaced.mp4"), 40, 17);
        const auto a = video::analyzeVideo(path("replaced.mp4").toStdString());
        QCOMPARE(flagged(a), std::set<int64_t>{17});
        qInfo("replaced %s", qPrintable(breakFigures(a, 17)));
        QCOMPARE(a.skips.size(), size_t{1});
        const auto& f18 = a.scores[17];
        QCOMPARE(f18.frame, int64_t{18});
        QCOMPARE(f18.reference, int64_t{16});
        // Well beyond the rule, not at its edge.
        QVERIFY2(a.scores[16].values.at("warp_error_z") > 2 * analysis::kVideoBreakZ,
                 qPrintable(describe(a)));
        QVERIFY2(a.scores[16].values.at("ssim_prev") < a.scores[15].values.at("ssim_prev"),
                 qPrintable(describe(a)));
    }

    // A sudden 20 px jump at frame 9: frame 9 and no other.
    void jump()
    {
        clips::smooth(path("jump.mp4"), 40, -1, 9);
        const auto a = video::analyzeVideo(path("jump.mp4").toStdString());
        QCOMPARE(flagged(a), std::set<int64_t>{9});
        qInfo("jump %s", qPrintable(breakFigures(a, 9)));
        QVERIFY(a.skips.empty());
    }

    // Every frame has a JPEG thumbnail showing it; every frame after the first a flow image in
    // quarter pixels (2 px per frame: level 8).
    void thumbnails()
    {
        clips::translated(path("thumbs"), 6, 2.0);
        const auto a = video::analyzeVideo(path("thumbs").toStdString());
        QCOMPARE(a.images.size(), size_t{6});
        QVERIFY(a.images[0].flowPng.empty());
        for (int i = 0; i < 6; ++i) {
            const auto& img = a.images[static_cast<size_t>(i)];
            const cv::Mat t = cv::imdecode(img.thumbnailJpeg, cv::IMREAD_COLOR);
            QCOMPARE(t.cols, clips::kWidth); // 160 px is under the 320 px thumbnail size
            const cv::Mat orig = cv::imread(QStringLiteral("%1/frame_%2.png")
                                                .arg(path("thumbs"))
                                                .arg(i, 4, 10, QLatin1Char('0'))
                                                .toStdString());
            QVERIFY2(cv::PSNR(t, orig) > 30, qPrintable(QString::number(cv::PSNR(t, orig))));
            if (i == 0) continue;
            const cv::Mat flow = cv::imdecode(img.flowPng, cv::IMREAD_UNCHANGED);
            QCOMPARE(flow.type(), CV_8UC1);
            QCOMPARE(flow.cols, clips::kWidth / 2);
            QVERIFY2(std::abs(cv::mean(flow)[0] - 8.0) < 0.5,
                     qPrintable(QString::number(cv::mean(flow)[0])));
        }
        // The content hash of a folder: the SHA-256 of its `sha256sum` lines.
        QCOMPARE(a.sha256.size(), size_t{64});
    }

    // A clip from Debian's ffmpeg and its generated sources (a Mandelbrot zoom, H.264 in mkv):
    // smooth, so no frame breaks.
    void ffmpegGeneratedClip()
    {
        const QString ffmpeg = QStandardPaths::findExecutable("ffmpeg");
        if (ffmpeg.isEmpty()) QSKIP("ffmpeg not found (apt-get install ffmpeg; scripts/deps.sh)");
        QProcess p;
        p.start(ffmpeg, {"-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                         "mandelbrot=s=160x120:rate=24", "-frames:v", "32", "-c:v", "libx264",
                         "-pix_fmt", "yuv420p", path("mandelbrot.mkv")});
        QVERIFY(p.waitForFinished(60000));
        QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
        const auto a = video::analyzeVideo(path("mandelbrot.mkv").toStdString());
        QCOMPARE(a.frames, int64_t{32});
        QVERIFY2(flagged(a).empty(), qPrintable(describe(a)));
    }

    // The module's measurements and the registry (docs/architecture.md): exactly one
    // measurement per registered metric, by name (the loader refuses a module where they differ).
    void everyRegisteredMetricIsMeasured()
    {
        std::vector<std::string> measured = fs::video::measuredMetricNames();
        std::vector<std::string> registered;
        for (const auto& m : fs::analysis::videoMetrics())
            registered.emplace_back(m.name);
        std::sort(measured.begin(), measured.end());
        std::sort(registered.begin(), registered.end());
        QCOMPARE(measured, registered);
        QCOMPARE(std::set<std::string>(measured.begin(), measured.end()).size(), measured.size());
    }

    void declaredFrames()
    {
        clips::translated(path("declared.mp4"), 12, 1.0);
        QCOMPARE(video::declaredFrames(path("declared.mp4").toStdString()), int64_t{12});
    }

    void badInput()
    {
        // Not a video.
        QFile text(path("notes.mp4"));
        QVERIFY(text.open(QIODevice::WriteOnly));
        text.write("these are not the frames you are looking for\n");
        text.close();
        expectError(path("notes.mp4"), "notes.mp4", "not a video");
        QFile empty(path("empty.mp4"));
        QVERIFY(empty.open(QIODevice::WriteOnly));
        empty.close();
        expectError(path("empty.mp4"), "empty.mp4", "empty");
        expectError(path("missing.mp4"), "missing.mp4", "cannot open");
        // Truncated: an mp4 loses its index (written last), a webm stream just ends early.
        clips::smooth(path("whole.mp4"), 24);
        clips::smooth(path("whole.webm"), 24);
        for (const QString& f : {QStringLiteral("whole.mp4"), QStringLiteral("whole.webm")}) {
            QFile in(path(f));
            QVERIFY(in.open(QIODevice::ReadOnly));
            const QByteArray bytes = in.readAll();
            const QString cut = path("cut-" + f);
            QFile out(cut);
            QVERIFY(out.open(QIODevice::WriteOnly));
            out.write(bytes.left(bytes.size() * 6 / 10));
            out.close();
            expectError(cut, "cut-" + f, f.endsWith("mp4") ? "truncated" : "ends after");
        }
        // One frame: a video, and a lone image FFmpeg reads as one.
        clips::smooth(path("one.mp4"), 1);
        expectError(path("one.mp4"), "one.mp4", "only 1 frame");
        cv::imwrite(path("still.png").toStdString(), clips::texture(64, 48, 3));
        expectError(path("still.png"), "still.png", "only 1 frame");
        // A folder with a frame of another size.
        clips::translated(path("sizes"), 4, 1.0);
        cv::imwrite(path("sizes/frame_0002.png").toStdString(), clips::texture(80, 60, 3));
        expectError(path("sizes"), "frame_0002.png", "80x60");
        // A folder with a gap in its numbering, a corrupt frame, no frames at all.
        clips::translated(path("gap"), 4, 1.0);
        QVERIFY(QFile::remove(path("gap/frame_0001.png")));
        expectError(path("gap"), "gap", "missing");
        clips::translated(path("corrupt"), 4, 1.0);
        QFile bad(path("corrupt/frame_0003.png"));
        QVERIFY(bad.open(QIODevice::WriteOnly | QIODevice::Truncate));
        bad.write("\x89PNG garbage");
        bad.close();
        expectError(path("corrupt"), "frame_0003.png", "cannot read the image");
        QDir().mkpath(path("nothing"));
        expectError(path("nothing"), "nothing", "no PNG or JPEG frames");
        // An unreadable folder (root reads any folder: only checked as another user).
        clips::translated(path("locked"), 3, 1.0);
        QFile::setPermissions(path("locked"), QFileDevice::Permissions());
        if (::geteuid() != 0) expectError(path("locked"), "locked", "cannot read the folder");
        QFile::setPermissions(path("locked"), QFileDevice::ReadOwner | QFileDevice::WriteOwner |
                                                  QFileDevice::ExeOwner);
    }

    void cancel()
    {
        clips::smooth(path("cancel.mp4"), 24);
        std::atomic<bool> stop{false};
        video::AnalyzeOptions o;
        o.cancel = &stop;
        int64_t seen = 0;
        o.progress = [&](int64_t done, int64_t total) {
            QCOMPARE(total, int64_t{24});
            seen = done;
            if (done == 5) stop = true;
        };
        QVERIFY_THROWS_EXCEPTION(video::Cancelled,
                                 video::analyzeVideo(path("cancel.mp4").toStdString(), o));
        QCOMPARE(seen, int64_t{5});
    }
};

QTEST_GUILESS_MAIN(TstVideoMetrics)
#include "tst_video_metrics.moc"
