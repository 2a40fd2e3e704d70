// The video in the GUI: File › Add video… on a worker (progress, cancel, the frame-map question),
// the frames table's thumbnails, the collapse inspector's frames f-1, f, f+1 (a click selects
// one), the flow overlay, and the exported strip showing the right frames.
#include "clips.h"
#include "main_window.h"
#include "testutil.h"
#include "video_controller.h"

#include "core/store/debug_query.h"
#include "core/store/session.h"
#include "core/versions.h"
#include "render/frame_strip.h"
#include "widgets/frame_strip_widget.h"
#include "widgets/frames_model.h"

#include <QAction>
#include <QApplication>
#include <QHeaderView>
#include <QPainter>
#include <QProgressDialog>
#include <QSignalSpy>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>

using namespace fs;
namespace clips = fstest::clips;

namespace {

void waitLoaded(gui::MainWindow& w)
{
    QTRY_VERIFY_WITH_TIMEOUT(!w.busy(), 60000);
    QApplication::processEvents();
}

// The frame whose centre colour is nearest (numbered()), or -1.
int frameOfColour(QColor c)
{
    int best = -1;
    double bestD = 1e9;
    for (int i = 0; i < 24; ++i) {
        const cv::Vec3b k = clips::frameColour(i);
        const double d = std::hypot(c.blue() - k[0], c.green() - k[1], c.red() - k[2]);
        if (d < bestD) {
            bestD = d;
            best = i;
        }
    }
    return bestD < 20 ? best : -1;
}

} // namespace

class TstVideoGui : public QObject
{
    Q_OBJECT
    QTemporaryDir dir_;
    QString sim_; // a simulated 24-frame run
    QStringList errors_;

    QString path(const QString& n) const { return dir_.filePath(n); }
    QString fresh(const QString& name)
    {
        QFile::remove(path(name));
        QFile::copy(sim_, path(name));
        return path(name);
    }
    std::unique_ptr<gui::MainWindow> window(const QString& session)
    {
        auto w = std::make_unique<gui::MainWindow>();
        w->setErrorReporter(
            [this](const QString& t, const QString& m) { errors_ << t + ": " + m; });
        w->resize(1600, 1000);
        w->show();
        w->openFile(session);
        waitLoaded(*w);
        return w;
    }
    // Adds `video` through File › Add video…'s controller and waits for the reload.
    void add(gui::MainWindow& w, const QString& video)
    {
        QSignalSpy added(w.video(), &gui::VideoController::added);
        w.video()->start(video);
        QTRY_COMPARE_WITH_TIMEOUT(added.count(), 1, 120000);
        waitLoaded(w);
        QTRY_VERIFY_WITH_TIMEOUT(w.scene() && w.scene()->video, 30000);
        waitLoaded(w);
    }

private slots:
    void initTestCase()
    {
        sim_ = path("sim.fragscope");
        const auto r = fstest::runCli({"simulate", "-o", sim_, "--frames", "24", "--no-index"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        clips::numbered(path("numbered"), 24);
    }

    // Without a video: no thumbnail column, the strip says how to get one, the actions work.
    void noVideo()
    {
        auto w = window(fresh("plain.fragscope"));
        QVERIFY(!w->scene()->video);
        QVERIFY(w->framesView()->isColumnHidden(views::FramesModel::Thumbnail));
        QVERIFY(w->video()->addVideoAction()->isEnabled() == fs::videoBuilt());
        w->framesView()->setCurrentIndex(
            w->framesView()->model()->index(w->framesModel()->rowOf(3), 0));
        QVERIFY(w->frameStrip()->panels().empty());
    }

    // File › Add video…: progress on a worker, the session reloaded with the video's metrics
    // and frames; the thumbnail column, the inspector's three frames, a click selects.
    void addVideoAndSee()
    {
        const QString s = fresh("gui.fragscope");
        auto w = window(s);
        // The simulator's own flow_l2_px: the controller asks, the test says yes.
        QStringList asked;
        w->video()->setQuestion([&](const QString&, const QString& text) {
            asked << text;
            return true;
        });
        QSignalSpy progress(w->video(), &gui::VideoController::progress);
        add(*w, path("numbered"));
        QVERIFY2(errors_.isEmpty(), qPrintable(errors_.join('\n')));
        QCOMPARE(asked.size(), 1);
        QVERIFY2(asked.front().contains("flow_l2_px"), qPrintable(asked.front()));
        QVERIFY(progress.count() >= 20);
        QCOMPARE(progress.last().at(1).toInt(), 24);
        QVERIFY(w->scene()->frame(17)->metrics.count("warp_error_z"));

        // The thumbnail column, after the frame number, shows frame 12's picture.
        QTableView* v = w->framesView();
        QVERIFY(!v->isColumnHidden(views::FramesModel::Thumbnail));
        QCOMPARE(v->horizontalHeader()->visualIndex(views::FramesModel::Thumbnail), 1);
        const int row = w->framesModel()->rowOf(12);
        const QVariant deco = w->framesModel()->data(
            w->framesModel()->index(row, views::FramesModel::Thumbnail), Qt::DecorationRole);
        const QImage thumb = deco.value<QPixmap>().toImage();
        QVERIFY(!thumb.isNull());
        QCOMPARE(frameOfColour(thumb.pixelColor(thumb.width() / 2, thumb.height() / 2)), 12);

        // Selecting frame 12 shows 11, 12, 13 in the inspector; a click on 11 selects it.
        v->setCurrentIndex(v->model()->index(row, 0));
        QTRY_COMPARE(w->frameStrip()->frame(), int64_t{12});
        auto panels = w->frameStrip()->panels();
        QCOMPARE(panels.size(), size_t{3});
        QCOMPARE(panels[0].frame, int64_t{11});
        QCOMPARE(panels[2].frame, int64_t{13});
        const QImage shown = w->frameStrip()->grab().toImage();
        for (const auto& pn : panels) {
            const QPoint c = pn.picture.center().toPoint() * shown.devicePixelRatio();
            QCOMPARE(frameOfColour(shown.pixelColor(c)), static_cast<int>(pn.frame));
        }
        QTest::mouseClick(w->frameStrip(), Qt::LeftButton, {},
                          panels[0].picture.center().toPoint());
        QTRY_COMPARE(w->selection()->current().frame, int64_t{11});
        QTRY_COMPARE(w->frameStrip()->frame(), int64_t{11});
        QCOMPARE(
            w->framesView()->currentIndex().data(views::FramesModel::FrameIndexRole).toLongLong(),
            11LL);

        // The flow overlay changes what the pictures show (the frames move 2 px per frame).
        const QImage before = w->frameStrip()->grab().toImage();
        w->frameStrip()->setFlowOverlay(true);
        const QImage after = w->frameStrip()->grab().toImage();
        QVERIFY(before != after);
    }

    // Cancel stops the worker and leaves the session as it was; the frame-map question.
    void cancelAndMap()
    {
        const QString s = fresh("cancel.fragscope");
        auto w = window(s);
        w->video()->setQuestion([](const QString&, const QString&) { return true; });
        clips::smooth(path("long.mp4"), 48); // two video frames per session frame
        auto videoRows = [&] {
            Session sess = Session::open(s.toStdString());
            return store::debugQuery(sess).scalar("SELECT COUNT(*) FROM videos") +
                   store::debugQuery(sess).scalar(
                       "SELECT COUNT(*) FROM frame_metrics WHERE source LIKE "
                       "'video: %'");
        };
        const int64_t metricsBefore = w->scene()->frame(3)->metrics.size();
        QSignalSpy cancelled(w->video(), &gui::VideoController::cancelled);
        QSignalSpy progress(w->video(), &gui::VideoController::progress);
        // The declared count already says 48 frames for 24: asked, then the map 2 runs; cancel
        // it at its first frame.
        connect(
            w->video(), &gui::VideoController::progress, w->video(),
            [&](int done) {
                if (done >= 1) w->video()->cancel();
            },
            Qt::QueuedConnection);
        w->video()->start(path("long.mp4"));
        QTRY_COMPARE_WITH_TIMEOUT(cancelled.count(), 1, 60000);
        QVERIFY(!w->video()->running());
        QVERIFY(progress.count() >= 1);
        QCOMPARE(videoRows(), int64_t{0}); // nothing written
        QVERIFY(w->video()->addVideoAction()->isEnabled());
        // The same again without cancelling: two video frames per session frame.
        disconnect(w->video(), &gui::VideoController::progress, w->video(), nullptr);
        add(*w, path("long.mp4"));
        QCOMPARE(w->scene()->video->video().perSessionFrame, int64_t{2});
        QCOMPARE(w->scene()->video->videoFramesOf(5), (std::vector<int64_t>{10, 11}));
        QVERIFY(static_cast<int64_t>(w->scene()->frame(3)->metrics.size()) > metricsBefore);
    }

    // `fragscope export frames`: the strip shows frames N-K … N+K, in order.
    void exportedStripShowsTheRightFrames()
    {
        const QString s = fresh("strip.fragscope");
        QCOMPARE(fstest::runCli({"metrics", "compute", s, path("numbered"), "--replace"}).exitCode,
                 0);
        const QString png = path("strip.png");
        const auto r =
            fstest::runCli({"export", "frames", s, "--frame", "9", "--around", "2", "-o", png});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QVERIFY2(r.out.contains("frames 7-11"), r.out.constData());
        const QImage img(png);
        QVERIFY(!img.isNull());
        // The same layout the exporter used, from the same scene.
        const auto scene = render::loadScene(s.toStdString());
        render::FrameStripOptions o;
        o.frame = 9;
        o.around = 2;
        const QRectF rect(0, 0, img.width(), img.height());
        std::vector<int> seen;
        for (const auto& pn : render::layoutFrameStrip(rect, *scene, o))
            seen.push_back(frameOfColour(img.pixelColor(pn.picture.center().toPoint())));
        QCOMPARE(seen, (std::vector<int>{7, 8, 9, 10, 11}));
        // SVG: the same frames named.
        const auto svg = fstest::runCli(
            {"export", "frames", s, "--frame", "9", "--around", "1", "-o", path("strip.svg")});
        QCOMPARE(svg.exitCode, 0);
        QFile f(path("strip.svg"));
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QByteArray text = f.readAll();
        for (const char* want : {"frame 8", "frame 9", "frame 10"})
            QVERIFY2(text.contains(want), want);
        QVERIFY(!text.contains(">frame 7<") && !text.contains(">frame 11<"));
        // Bad requests.
        QCOMPARE(fstest::runCli({"export", "frames", s, "--frame", "99", "-o", png}).exitCode, 64);
        QCOMPARE(fstest::runCli({"export", "frames", sim_, "--frame", "3", "-o", png}).exitCode, 2);
        QCOMPARE(
            fstest::runCli({"export", "frames", s, "--frame", "3", "-o", path("x.bmp")}).exitCode,
            64);
    }
};

QTEST_MAIN(TstVideoGui)
#include "tst_video_gui.moc"
