// The GUI's OOM list: it shows the engine's diagnosis of each OOM and, activated, drives the
// views like a collapse (the OOM's frame selected, its instant marked). Runs offscreen.
#include "main_window.h"
#include "widgets/oom_list.h"

#include "core/store/ingest.h"
#include "views/render/scene.h"
#include "widgets/selection.h"

#include <QApplication>
#include <QLabel>
#include <QSettings>
#include <QTemporaryDir>
#include <QTreeWidget>
#include <QtTest>

using namespace fs;

class TstOomList : public QObject
{
    Q_OBJECT
    QTemporaryDir dir_;
    QString file_;

private slots:
    void initTestCase()
    {
        QCoreApplication::setOrganizationName(QStringLiteral("fragscope-tests"));
        QCoreApplication::setApplicationName(QStringLiteral("tst_oom_list"));
        QSettings().clear();
        // One 4 MiB segment with a 1 MiB block in its middle (1.5 MiB free on each side), frames
        // 0 [0, 100) and 1 [100, 200), an OOM of 2 MiB at 150 with 0 B free on the device:
        // cached free 3 MiB >= 2 MiB, largest 1.5 MiB: fragmentation, in frame 1.
        file_ = dir_.filePath("oom.fragscope");
        IngestOptions o;
        o.path = file_.toStdString();
        o.sourceKind = "test";
        o.aliveAtEndIsAnomaly = false;
        Ingest in(o);
        in.begin();
        constexpr uint64_t base = 0x7f0000000000, MiB = 1 << 20;
        auto ev = [](EventType t, int64_t time, uint64_t a = 0, uint64_t s = 0) {
            Event e;
            e.type = t;
            e.time = time;
            e.address = a;
            e.size = s;
            e.level = Level::Framework;
            return e;
        };
        in.add(ev(EventType::RegionCreate, 0, base, 4 * MiB));
        Event f0 = ev(EventType::Mark, 0);
        f0.name = in.intern("frame 0");
        in.add(f0);
        in.add(ev(EventType::Alloc, 10, base + 3 * MiB / 2, MiB));
        Event f1 = ev(EventType::Mark, 100);
        f1.name = in.intern("frame 1");
        in.add(f1);
        in.add(ev(EventType::Oom, 150, 0, 2 * MiB));
        in.add(ev(EventType::Free, 200, base + 3 * MiB / 2, MiB));
        in.end();
    }

    void listsAndDrivesTheViews()
    {
        gui::MainWindow w;
        w.resize(1600, 1000);
        w.show();
        w.openFile(file_);
        QTRY_VERIFY_WITH_TIMEOUT(!w.busy(), 60000);
        QApplication::processEvents();
        QVERIFY(w.scene());
        auto* list = w.findChild<views::OomList*>();
        QVERIFY(list);
        QTRY_COMPARE_WITH_TIMEOUT(list->count(), 1, 10000);
        QTreeWidgetItem* item = list->tree()->topLevelItem(0);
        QCOMPARE(item->text(4), QString("fragmentation"));
        QVERIFY(list->findChild<QLabel*>()->text().contains("suggestion"));
        emit list->tree()->itemActivated(item, 0);
        QApplication::processEvents();
        QCOMPARE(w.selection()->current().frame, int64_t{1});
        QCOMPARE(w.selection()->current().marker, int64_t{150});
    }
};

QTEST_MAIN(TstOomList)
#include "tst_oom_list.moc"
