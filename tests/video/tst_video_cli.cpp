// `fragscope metrics compute` end to end: a simulated session plus a generated video through
// collapses, precursors and `report --json`; replacing a video; the frame map and its refusal;
// thumbnails kept in the session; every bad input leaves the session untouched.
#include "clips.h"
#include "testutil.h"

#include "../foundation/sessionbuilder.h"
#include "core/sha256.h"
#include "core/store/debug_query.h"
#include "core/store/session.h"
#include "core/store/videos.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include <opencv2/imgcodecs.hpp>

using namespace fs;
namespace clips = fstest::clips;
using fstest::runCli;

class TstVideoCli : public QObject
{
    Q_OBJECT
    QTemporaryDir dir_;
    QString path(const QString& name) const { return dir_.filePath(name); }
    QString session_; // a simulated 24-frame run, copied per test

    QString freshSession(const QString& name)
    {
        const QString p = path(name);
        QFile::remove(p);
        QFile::copy(session_, p);
        return p;
    }
    static int64_t count(const QString& session, const std::string& sql)
    {
        return store::debugQuery(Session::open(session.toStdString())).scalar(sql);
    }
    static QJsonObject json(const QByteArray& out)
    {
        QJsonParseError e;
        const QJsonDocument d = QJsonDocument::fromJson(out, &e);
        if (e.error != QJsonParseError::NoError) qWarning() << e.errorString() << out.left(400);
        return d.object();
    }

private slots:
    void initTestCase()
    {
        session_ = path("sim.fragscope");
        const auto r = runCli({"simulate", "-o", session_, "--frames", "24", "--no-index"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        clips::smooth(path("broken17.mp4"), 24, 17);
        clips::smooth(path("jump9.mp4"), 24, -1, 9);
    }

    // The simulator writes its own flow_l2_px (source nvtx): the video's would replace it, so
    // the command asks for --replace first and writes nothing.
    void asksBeforeReplacingOtherSources()
    {
        const QString s = freshSession("ask.fragscope");
        const std::string before = sha256File(s.toStdString());
        const auto r = runCli({"metrics", "compute", s, path("broken17.mp4")});
        QCOMPARE(r.exitCode, 64);
        QVERIFY2(r.err.contains("flow_l2_px") && r.err.contains("--replace"), r.err.constData());
        QCOMPARE(sha256File(s.toStdString()), before);
    }

    // Frame 17 replaced by another scene: one collapse at frame 17 from the video's
    // warp_error_z, with precursors, in `report --json` and `collapse`.
    void endToEnd()
    {
        const QString s = freshSession("e2e.fragscope");
        const auto r = runCli({"metrics", "compute", s, path("broken17.mp4"), "--replace"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QVERIFY2(r.out.contains("frames breaking warp_error_z > 6: 17 "), r.out.constData());
        QCOMPARE(count(s, "SELECT COUNT(*) FROM frame_metrics WHERE source = 'video: "
                          "broken17.mp4'"),
                 int64_t{23 * 8}); // frames 1-23, four metrics and four z-scores
        QCOMPARE(count(s, "SELECT COUNT(*) FROM video_frames"), int64_t{24});
        QCOMPARE(count(s, "SELECT COUNT(*) FROM sources WHERE kind = 'video'"), int64_t{1});

        const auto rep = runCli({"report", s, "--json"});
        QVERIFY2(rep.exitCode == 0, rep.err.constData());
        const QJsonObject o = json(rep.out);
        bool found = false;
        for (const auto& c : o["collapses"].toArray()) {
            const QJsonObject col = c.toObject()["collapse"].toObject();
            if (col["first_frame"].toInt() != 17) continue;
            found = true;
            QVERIFY(col["broken_rules"].toArray().first().toString().startsWith("warp_error_z"));
            QVERIFY(!c.toObject()["precursors"].toArray().isEmpty());
        }
        QVERIFY2(found, rep.out.left(2000).constData());
        // No collapse from the video anywhere else.
        for (const auto& c : o["collapses"].toArray())
            for (const auto& rule : c.toObject()["collapse"].toObject()["broken_rules"].toArray())
                if (rule.toString().startsWith("warp_error_z"))
                    QCOMPARE(c.toObject()["collapse"].toObject()["first_frame"].toInt(), 17);
        const QJsonObject f17 = o["frames"].toArray().at(17).toObject();
        QCOMPARE(f17["frame"].toInt(), 17);
        QVERIFY(f17["metrics"].toObject()["warp_error_z"].toDouble() > 6);
        QVERIFY(f17["metrics"].toObject().contains("ssim_prev"));
        QVERIFY(o["rules"].toArray().contains(QJsonValue("warp_error_z > 6")));

        const auto col = runCli({"collapse", s, "--frame", "17"});
        QVERIFY2(col.exitCode == 0, col.err.constData());
        QVERIFY2(col.out.contains("warp_error_z"), col.out.constData());
        QVERIFY2(col.out.contains("precursors"), col.out.constData());
    }

    // A second video replaces the first: its metrics, frames and source only.
    void secondVideoReplaces()
    {
        const QString s = freshSession("twice.fragscope");
        QCOMPARE(runCli({"metrics", "compute", s, path("broken17.mp4"), "--replace"}).exitCode, 0);
        const auto r = runCli({"metrics", "compute", s, path("jump9.mp4"), "--json"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const QJsonObject o = json(r.out);
        QCOMPARE(o["replaced_video"].toBool(), true);
        QCOMPARE(o["breaks"].toArray(), QJsonArray({9}));
        QCOMPARE(o["frames"].toArray().size(), 23);
        QCOMPARE(o["video"].toObject()["sha256"].toString(),
                 QString::fromStdString(sha256File(path("jump9.mp4").toStdString())));
        QCOMPARE(count(s, "SELECT COUNT(*) FROM frame_metrics WHERE source LIKE 'video: %'"),
                 int64_t{23 * 8});
        QCOMPARE(count(s, "SELECT COUNT(*) FROM frame_metrics WHERE source = 'video: "
                          "broken17.mp4'"),
                 int64_t{0});
        QCOMPARE(count(s, "SELECT COUNT(*) FROM videos"), int64_t{1});
        QCOMPARE(count(s, "SELECT COUNT(*) FROM video_frames"), int64_t{24});
        QCOMPARE(count(s, "SELECT COUNT(*) FROM sources WHERE kind = 'video'"), int64_t{1});
        // The simulator's own coherence_score stays.
        QCOMPARE(count(s, "SELECT COUNT(*) FROM frame_metrics WHERE name = 'coherence_score'"),
                 int64_t{24});
    }

    // Two video frames per session frame: refused without --map (both counts and the map that
    // fits), written with it; every video frame keeps its own metrics.
    void frameMap()
    {
        const QString s = freshSession("map.fragscope");
        clips::smooth(path("double.webm"), 48);
        const std::string before = sha256File(s.toStdString());
        const auto no = runCli({"metrics", "compute", s, path("double.webm"), "--replace"});
        QCOMPARE(no.exitCode, 64);
        QVERIFY2(no.err.contains("48 frames") && no.err.contains("session 24") &&
                     no.err.contains("--map 2 fits"),
                 no.err.constData());
        QCOMPARE(sha256File(s.toStdString()), before);
        const auto bad = runCli({"metrics", "compute", s, path("double.webm"), "--map", "x"});
        QCOMPARE(bad.exitCode, 64);
        const auto ok =
            runCli({"metrics", "compute", s, path("double.webm"), "--replace", "--map", "2"});
        QVERIFY2(ok.exitCode == 0, ok.err.constData());
        // Session frame 0 holds video frames 0 and 1 (1 has metrics): all 24 session frames.
        QCOMPARE(count(s, "SELECT COUNT(DISTINCT frame) FROM frame_metrics WHERE source LIKE "
                          "'video: %'"),
                 int64_t{24});
        QCOMPARE(count(s, "SELECT COUNT(*) FROM video_frame_metrics WHERE name = 'warp_error'"),
                 int64_t{47});
        QCOMPARE(count(s, "SELECT MAX(session_frame) FROM video_frames"), int64_t{23});
        QCOMPARE(count(s, "SELECT frames_per_session_frame FROM videos"), int64_t{2});
        // The session frame's value is its chunk's worst: frame 5 holds video frames 10, 11.
        Session sess = Session::open(s.toStdString());
        Stmt st = store::debugQuery(sess).prepare(
            "SELECT (SELECT value FROM frame_metrics WHERE frame = 5 AND name = 'warp_error'),"
            " (SELECT MAX(value) FROM video_frame_metrics WHERE idx IN (10, 11) AND"
            " name = 'warp_error')");
        QVERIFY(st.step());
        QCOMPARE(st.f64(0), st.f64(1));
    }

    // The thumbnails in the session show the video's frames.
    void thumbnailsRoundTrip()
    {
        const QString s = freshSession("thumbs.fragscope");
        clips::translated(path("thumbframes"), 24, 2.0);
        QCOMPARE(runCli({"metrics", "compute", s, path("thumbframes"), "--replace"}).exitCode, 0);
        const auto images = store::VideoImages::open(s.toStdString());
        QVERIFY(images);
        QCOMPARE(images->video().frames, int64_t{24});
        QVERIFY(images->video().folder);
        QCOMPARE(images->video().source, std::string("video: thumbframes"));
        for (int i : {0, 11, 23}) {
            QCOMPARE(images->shownFrame(i), int64_t{i});
            const std::vector<uint8_t> jpeg = images->thumbnail(i);
            const cv::Mat t = cv::imdecode(jpeg, cv::IMREAD_COLOR);
            const cv::Mat orig = cv::imread(QStringLiteral("%1/frame_%2.png")
                                                .arg(path("thumbframes"))
                                                .arg(i, 4, 10, QLatin1Char('0'))
                                                .toStdString());
            QCOMPARE(t.size(), orig.size());
            QVERIFY(cv::PSNR(t, orig) > 30);
            // Another frame is a worse match: the right frame came back.
            const cv::Mat other = cv::imread(QStringLiteral("%1/frame_%2.png")
                                                 .arg(path("thumbframes"))
                                                 .arg((i + 5) % 24, 4, 10, QLatin1Char('0'))
                                                 .toStdString());
            QVERIFY(cv::PSNR(t, other) < cv::PSNR(t, orig) - 5);
        }
        QVERIFY(images->flow(0).empty());
        QVERIFY(!images->flow(1).empty());
    }

    // A module whose metrics are not this build's registry's (one renamed: ssim_prev -> ssim) is
    // refused by name, naming both lists, before any work (docs/architecture.md): no version
    // number had to change for the loader to tell.
    void staleModuleIsRefusedByName()
    {
        const QString s = freshSession("stale.fragscope");
        QProcessEnvironment env;
        env.insert("FRAGSCOPE_VIDEO_MODULE", FRAGSCOPE_STALE_VIDEO_MODULE);
        const auto r = fstest::runCliIn({}, {"metrics", "compute", s, path("broken17.mp4")}, env);
        QVERIFY2(r.exitCode != 0, r.err.constData());
        QVERIFY2(r.err.contains("not this fragscope's video module (it measures flicker, "
                                "flow_l2_px, ssim, warp_error, expected flicker, flow_l2_px, "
                                "ssim_prev, warp_error)"),
                 r.err.constData());
        QCOMPARE(count(s, "SELECT COUNT(*) FROM frame_metrics WHERE name = 'ssim_prev'"), 0);
    }

    void badInput_data()
    {
        QTest::addColumn<QString>("what");
        QTest::addColumn<int>("exitCode");
        QTest::addColumn<QString>("says");
        QTest::newRow("not a video") << "text" << 2 << "not a video";
        QTest::newRow("truncated") << "truncated" << 2 << "ends after";
        QTest::newRow("one frame") << "one" << 2 << "only 1 frame";
        QTest::newRow("frame sizes") << "sizes" << 2 << "all frames must have one size";
        QTest::newRow("missing folder") << "nofolder" << 2 << "cannot open";
        QTest::newRow("no frames in the session") << "noframes" << 2 << "no frames";
        QTest::newRow("not a session") << "nosession" << 2 << "not a fragscope session";
        QTest::newRow("usage") << "usage" << 64 << "SESSION VIDEO";
    }
    void badInput()
    {
        QFETCH(QString, what);
        QFETCH(int, exitCode);
        QFETCH(QString, says);
        QString s = freshSession("bad.fragscope");
        QString video = path("bad-" + what + ".webm");
        if (what == "text") {
            QFile f(video);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write("not a video\n");
        } else if (what == "truncated") {
            clips::smooth(path("whole.webm"), 24);
            QFile in(path("whole.webm"));
            QVERIFY(in.open(QIODevice::ReadOnly));
            QFile out(video);
            QVERIFY(out.open(QIODevice::WriteOnly));
            out.write(in.readAll().left(in.size() / 2));
        } else if (what == "one") {
            clips::smooth(video, 1);
        } else if (what == "sizes") {
            video = path("bad-sizes");
            clips::translated(video, 24, 1.0);
            cv::imwrite((video + "/frame_0005.png").toStdString(), clips::texture(80, 60, 2));
        } else if (what == "nofolder") {
            video = path("no-such-folder");
        } else if (what == "noframes") {
            s = path("noframes.fragscope");
            QFile::remove(s);
            fstest::writeSmallSession(s.toStdString(), 10);
            clips::smooth(video, 24);
        } else if (what == "nosession") {
            s = path("bad-session.fragscope");
            QFile f(s);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write("SQLite format 3\0 but nothing else", 33);
            f.close();
            clips::smooth(video, 24);
        }
        const std::string before = sha256File(s.toStdString());
        const QStringList args = what == "usage"
                                     ? QStringList{"metrics", "compute", s}
                                     : QStringList{"metrics", "compute", s, video, "--replace"};
        const auto r = runCli(args);
        QCOMPARE(r.exitCode, exitCode);
        QVERIFY2(r.err.contains(says.toUtf8()), r.err.constData());
        if (what != "usage" && what != "nosession" && what != "noframes")
            QVERIFY2(r.err.contains(QFileInfo(video).fileName().toUtf8()), r.err.constData());
        if (what == "noframes" || what == "nosession")
            QVERIFY2(r.err.contains(QFileInfo(s).fileName().toUtf8()), r.err.constData());
        QCOMPARE(sha256File(s.toStdString()), before);
    }
};

QTEST_GUILESS_MAIN(TstVideoCli)
#include "tst_video_cli.moc"
