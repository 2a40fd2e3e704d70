// fragscope-gui opens traces where it opens sessions: a PyTorch snapshot, a Kineto trace or an
// nsys export given to the loader (File > Open, the command line, drag and drop) is imported on
// the worker with progress and cancel, into a session beside it (or in the cache directory), and
// that session is reused while the input is unchanged. Small inputs written here.
#include "../import/importtest.h"
#include "core/import/open_input.h"
#include "core/store/debug_query.h"
#include "core/store/session.h"
#include "core/store/sqlite.h"
#include "main_window.h"
#include "session_loader.h"

#include <QApplication>
#include <QDropEvent>
#include <QFileInfo>
#include <QMimeData>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QUrl>

#include <sys/stat.h>
#include <unistd.h>

using namespace fs;
using fstest::PickleWriter;

namespace {

// A snapshot with one 2 MiB segment at 0x100000 holding a 512 KiB active block at its start and a
// trace that allocated that block at t = 5 us: reserved 2 MiB, allocated 512 KiB at the end.
QByteArray snapshot(int64_t blockSize = 512 * 1024)
{
    PickleWriter w;
    w.beginDict().key("segments").beginList();
    w.beginSegment(0x100000, 2 << 20)
        .key("device")
        .integer(0)
        .key("stream")
        .integer(0)
        .key("segment_type")
        .str("large")
        .key("blocks")
        .beginList()
        .block(blockSize, "active_allocated", blockSize)
        .block((2 << 20) - blockSize, "inactive", 0)
        .endList()
        .endDict();
    w.endList().key("device_traces").beginList().beginList();
    w.beginDict()
        .key("action")
        .str("alloc")
        .key("addr")
        .integer(0x100000)
        .key("size")
        .integer(blockSize)
        .key("stream")
        .integer(0)
        .key("time_us")
        .integer(5)
        .endDict();
    w.endList().endList().endDict();
    return w.finish();
}

// A Kineto trace with n [memory] events: blocks of 4 KiB allocated and freed in turn.
QByteArray kineto(int n)
{
    QByteArray b = R"({"traceEvents":[)";
    for (int i = 0; i < n; ++i) {
        const bool alloc = i % 2 == 0;
        b += QByteArray(i ? "," : "") + R"({"ph":"i","name":"[memory]","ts":)" +
             QByteArray::number(i + 1) + R"(,"pid":1,"tid":1,"args":{"Addr":)" +
             QByteArray::number(4096 + (i / 2 % 64) * 4096) + R"(,"Bytes":)" +
             (alloc ? "4096" : "-4096") + R"(,"Total Allocated":0,"Device Id":0,)" +
             R"("Device Type":1}})";
    }
    return b + "]}";
}

// An nsys-shaped export: cudaMalloc 256 B at 0x1000 (t 90), freed at 300.
void nsys(const QString& path)
{
    Db db(path.toStdString(), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    db.exec("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)");
    db.exec("CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER NOT NULL, deviceId INTEGER,"
            " address INTEGER, bytes INTEGER, memoryOperationType INTEGER, streamId INTEGER)");
    db.exec("INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES (90, 0, 4096, 256, 0, 7),"
            " (300, 0, 4096, 256, 1, 7)");
}

struct Spies
{
    explicit Spies(gui::SessionLoader* l)
        : imported(l, &gui::SessionLoader::imported), loaded(l, &gui::SessionLoader::loaded),
          failed(l, &gui::SessionLoader::failed), cancelled(l, &gui::SessionLoader::cancelled),
          progress(l, &gui::SessionLoader::progress)
    {
    }
    QSignalSpy imported, loaded, failed, cancelled, progress;
};

bool waitIdle(gui::SessionLoader& l)
{
    for (int i = 0; i < 6000 && l.busy(); ++i)
        QTest::qWait(10);
    l.wait();
    QApplication::processEvents();
    return !l.busy();
}

} // namespace

class TstGuiOpenTrace : public QObject
{
    Q_OBJECT
    QTemporaryDir dir_;
    QString cache_;

    QString write(const QString& name, const QByteArray& data)
    {
        const QString p = dir_.filePath(name);
        return fstest::writeFile(p, data) ? p : QString();
    }

private slots:
    void initTestCase()
    {
        QVERIFY(dir_.isValid());
        QCoreApplication::setOrganizationName(QStringLiteral("fragscope-tests"));
        QCoreApplication::setApplicationName(QStringLiteral("tst_gui_open_trace"));
        cache_ = dir_.filePath("cache");
        qputenv("XDG_CACHE_HOME", cache_.toLocal8Bit());
        qputenv("FRAGSCOPE_SETTINGS", dir_.filePath("settings.json").toLocal8Bit());
    }

    void pickleImportedThenReused()
    {
        const QString in = write("run.pickle", snapshot());
        gui::SessionLoader loader;
        Spies s(&loader);
        loader.load(in);
        QVERIFY(waitIdle(loader));
        QCOMPARE(s.failed.count(), 0);
        QCOMPARE(s.imported.count(), 1);
        const QString session = in + ".fragscope"; // beside the input
        QCOMPARE(s.imported[0][0].toString(), in);
        QCOMPARE(s.imported[0][1].toString(), session);
        QCOMPARE(s.imported[0][2].toBool(), false);
        QCOMPARE(s.loaded.count(), 1);
        QCOMPARE(s.loaded[0][0].toString(), session); // the views get the session
        {
            const Session ss = Session::open(session.toStdString());
            const SessionSummary sum = ss.summary();
            QCOMPARE(sum.allocations, int64_t(1));
            QCOMPARE(sum.regions, int64_t(1));
        }
        const QDateTime written = QFileInfo(session).lastModified();

        // The same unchanged input: nothing is imported again, the session is reused.
        QTest::qWait(20);
        loader.load(in);
        QVERIFY(waitIdle(loader));
        QCOMPARE(s.imported.count(), 2);
        QCOMPARE(s.imported[1][1].toString(), session);
        QCOMPARE(s.imported[1][2].toBool(), true);
        QCOMPARE(s.loaded.count(), 2);
        QCOMPARE(QFileInfo(session).lastModified(), written);

        // A changed input (another block size; same file size would still differ in mtime and
        // head hash) is imported again over the stale session.
        QVERIFY(fstest::writeFile(in, snapshot(256 * 1024)));
        loader.load(in);
        QVERIFY(waitIdle(loader));
        QCOMPARE(s.imported.count(), 3);
        QCOMPARE(s.imported[2][2].toBool(), false);
        QCOMPARE(s.imported[2][1].toString(), session);
        const Session ss = Session::open(session.toStdString());
        QCOMPARE(fs::store::debugQuery(ss).scalar("SELECT size FROM allocations"),
                 int64_t(256 * 1024));
    }

    void kinetoAndNsysOpenInTheWindow()
    {
        const QString k = write("trace.json", kineto(8));
        const QString n = dir_.filePath("report.sqlite");
        nsys(n);
        for (const QString& in : {k, n}) {
            gui::MainWindow w;
            QString error;
            w.setErrorReporter([&](const QString&, const QString& m) { error = m; });
            w.openFile(in); // what File > Open and the command line call
            QVERIFY(waitIdle(*w.loader()));
            QVERIFY2(error.isEmpty(), qPrintable(error));
            QVERIFY2(w.scene(), qPrintable(in));
            QVERIFY(QFileInfo::exists(in + ".fragscope"));
            QVERIFY(w.windowTitle().contains(QFileInfo(in).fileName() + ".fragscope"));
        }
    }

    void dragAndDrop()
    {
        const QString in = write("dropped.pickle", snapshot());
        gui::MainWindow w;
        Spies s(w.loader());
        QMimeData mime;
        mime.setUrls({QUrl::fromLocalFile(in)});
        // As a drag does it: enter (which makes the window the drop target), then drop.
        QDragEnterEvent enter(QPoint(10, 10), Qt::CopyAction, &mime, Qt::LeftButton,
                              Qt::NoModifier);
        QCoreApplication::sendEvent(&w, &enter);
        QVERIFY(enter.isAccepted());
        QDropEvent drop(QPointF(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QCoreApplication::sendEvent(&w, &drop);
        QVERIFY(waitIdle(*w.loader()));
        QCOMPARE(s.imported.count(), 1);
        QCOMPARE(s.loaded.count(), 1);
        QVERIFY(w.scene());
    }

    void somebodysFileIsNotReplaced()
    {
        // INPUT.fragscope exists and is not ours (a text file, then a session made by hand):
        // the import goes to the cache directory and leaves it alone.
        const QString in = write("mine.pickle", snapshot());
        const QString beside = write("mine.pickle.fragscope", "my notes");
        gui::SessionLoader loader;
        Spies s(&loader);
        loader.load(in);
        QVERIFY(waitIdle(loader));
        QCOMPARE(s.imported.count(), 1);
        const QString session = s.imported[0][1].toString();
        QVERIFY2(session.startsWith(cache_ + "/fragscope/imports/mine.pickle-"),
                 qPrintable(session));
        QFile f(beside);
        QVERIFY(f.open(QIODevice::ReadOnly));
        QCOMPARE(f.readAll(), QByteArray("my notes"));
        // Reused from the cache as well.
        loader.load(in);
        QVERIFY(waitIdle(loader));
        QCOMPARE(s.imported[1][1].toString(), session);
        QCOMPARE(s.imported[1][2].toBool(), true);
    }

    void readOnlyFolderUsesTheCache()
    {
        if (::geteuid() == 0)
            QSKIP("running as root: a read-only folder is still writable (the cache fallback is "
                  "covered by somebodysFileIsNotReplaced)");
        QDir(dir_.path()).mkdir("ro");
        const QString in = dir_.filePath("ro/run.pickle");
        QVERIFY(fstest::writeFile(in, snapshot()));
        QVERIFY(::chmod(qPrintable(dir_.filePath("ro")), 0555) == 0);
        gui::SessionLoader loader;
        Spies s(&loader);
        loader.load(in);
        QVERIFY(waitIdle(loader));
        ::chmod(qPrintable(dir_.filePath("ro")), 0755);
        QCOMPARE(s.imported.count(), 1);
        QVERIFY(s.imported[0][1].toString().startsWith(cache_));
        QVERIFY(!QFileInfo::exists(in + ".fragscope"));
    }

    void progressAndCancel()
    {
        // 400k events, ~50 MB: long enough to cancel in the middle of the import.
        const QString in = write("big.json", kineto(400000));
        gui::SessionLoader loader;
        Spies s(&loader);
        bool cancelledOnce = false;
        connect(&loader, &gui::SessionLoader::progress, this, [&](int, const QString& stage) {
            if (stage == QStringLiteral("importing") && !cancelledOnce) {
                cancelledOnce = true;
                loader.cancel();
            }
        });
        loader.load(in);
        QVERIFY(waitIdle(loader));
        QVERIFY(cancelledOnce); // the import reported progress
        QCOMPARE(s.cancelled.count(), 1);
        QCOMPARE(s.loaded.count(), 0);
        QCOMPARE(s.imported.count(), 0);
        // Nothing left behind, beside the input or in the cache.
        for (const auto& p : import::sessionCandidates(in.toStdString(), import::defaultCacheDir()))
            QVERIFY2(!QFileInfo::exists(QString::fromStdString(p)), p.c_str());

        // Uncancelled, the same input imports with its progress shown as "importing".
        s.progress.clear();
        loader.load(in);
        QVERIFY(waitIdle(loader));
        QCOMPARE(s.loaded.count(), 1);
        bool importing = false;
        for (const auto& args : s.progress)
            importing = importing || args[1].toString() == QStringLiteral("importing");
        QVERIFY(importing);
    }

    void badTraceFailsCleanly()
    {
        QByteArray cut = snapshot();
        cut.chop(cut.size() / 2);
        const QString in = write("cut.pickle", cut);
        gui::SessionLoader loader;
        Spies s(&loader);
        loader.load(in);
        QVERIFY(waitIdle(loader));
        QCOMPARE(s.failed.count(), 1);
        QVERIFY2(s.failed[0][1].toString().contains("cut.pickle"),
                 qPrintable(s.failed[0][1].toString()));
        QCOMPARE(s.loaded.count(), 0);
        QVERIFY(!QFileInfo::exists(in + ".fragscope"));
    }
};

QTEST_MAIN(TstGuiOpenTrace)
#include "tst_gui_open_trace.moc"
