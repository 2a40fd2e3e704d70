// Private pools in the GUI (PyTorch's segment_pool_id, e.g. CUDA-graph pools): the track selector
// lists each pool of a track that has private pools under that track, and choosing one plots the
// engine's per-pool timeline (Engine::poolTimeline). Runs offscreen on the generated snapshot
// tests/import/gen_snapshot_fixtures.py writes (python3 only). With FRAGSCOPE_SHOTS=DIR set, the
// window showing the pool is saved as DIR/gui-pool-track.png.
#include "main_window.h"
#include "testutil.h"
#include "widgets/plot_widgets.h"

#include "views/render/scene.h"

#include <QApplication>
#include <QComboBox>
#include <QDockWidget>
#include <QSettings>
#include <QTemporaryDir>
#include <QtTest>

#include <qcustomplot.h>

using namespace fs;

namespace {
constexpr double MiB = 1024.0 * 1024.0;

// The plotted value of graph g (its axis in MiB here) at the last sample.
double lastValue(views::TimelineWidget* t, int g)
{
    const auto data = t->plot()->graph(g)->data();
    return data->isEmpty() ? -1 : (data->constEnd() - 1)->value;
}
} // namespace

class TstGuiPools : public QObject
{
    Q_OBJECT
    QTemporaryDir dir_;

private slots:
    void initTestCase()
    {
        QCoreApplication::setOrganizationName(QStringLiteral("fragscope-tests"));
        QCoreApplication::setApplicationName(QStringLiteral("tst_gui_pools"));
        QSettings().clear();
        const QString generated = fstest::writeSnapshotFixtures(dir_.path());
        QVERIFY2(generated.isEmpty(), qPrintable(generated));
    }

    // multi-device.pickle, device 0 (the figures of tests/import/tst_import_fixtures.cpp's
    // comment): the private pool (1, 5) is segment P alone, 2 MiB with p1 0.5 MiB allocated
    // (p1 exists only in the final segments: placed at the trace's start) and one 1.5 MiB free
    // fragment, F = 0, for the whole run. The device's track reserves 8 (A) + 2 (P) + 6 + 2 (E's
    // mapped ranges) = 18 MiB at the end, the default pool the other 16 MiB. Devices 1 and 2
    // have the default pool only: no pool entries.
    void choosingAPoolPlotsItsFigures()
    {
        gui::MainWindow w;
        w.resize(1500, 950);
        w.show();
        w.openFile(dir_.filePath("multi-device.pickle")); // imported, then opened
        QTRY_VERIFY_WITH_TIMEOUT(!w.busy(), 60000);
        QApplication::processEvents();
        QVERIFY(w.scene());
        QComboBox* box = nullptr;
        for (auto* c : w.findChildren<QComboBox*>())
            if (c->toolTip().startsWith("Device and allocation level")) box = c;
        QVERIFY(box);
        QStringList items;
        for (int i = 0; i < box->count(); ++i)
            items << box->itemText(i).trimmed();
        // Under device 0's track, its two pools (default first); nothing for devices 1 and 2.
        const int track0 = items.indexOf("device 0 · framework");
        QVERIFY2(track0 >= 0, qPrintable(items.join(" | ")));
        QCOMPARE(items.value(track0 + 1), QString("device 0 · framework · pool default"));
        QCOMPARE(items.value(track0 + 2), QString("device 0 · framework · pool (1, 5)"));
        QCOMPARE(items.filter("pool").size(), 2);

        // The whole track first (the default track): reserved 18 MiB at the end.
        box->setCurrentIndex(track0);
        emit box->activated(track0);
        QApplication::processEvents();
        views::TimelineWidget* tl = w.timeline();
        QCOMPARE(lastValue(tl, 0), 18.0);

        const int poolItem = track0 + 2;
        box->setCurrentIndex(poolItem);
        emit box->activated(poolItem);
        QApplication::processEvents();
        QVERIFY(
            w.findChild<QDockWidget*>("timelineDock")->windowTitle().contains("pool (1, 5) only"));
        // reserved 2, allocated 0.5, cached but unused 1.5 (MiB), largest free block 1.5 (the
        // pool's single fragment), F 1 - 1.5/1.5 = 0.
        QCOMPARE(lastValue(tl, 0), 2.0);
        QCOMPARE(lastValue(tl, 1), 0.5);
        QCOMPARE(lastValue(tl, 2), 1.5);
        QCOMPARE(lastValue(tl, 3), 1.5);
        QCOMPARE(lastValue(tl, 4), 0.0);
        for (const auto& p : *tl->plot()->graph(0)->data())
            QCOMPARE(p.value, 2.0); // P is reserved for the whole run

        // The inspector's and the histogram's queries answer for the pool too: the engine's
        // per-pool state (largest free 1.5 MiB) and the pool's single fragment.
        const auto scene = w.scene();
        const int ti = box->itemData(poolItem).toInt();
        const analysis::State st = scene->stateAt(ti, scene->timeEnd());
        QCOMPARE(st.reservedBytes, uint64_t(2 * MiB));
        QCOMPARE(st.largestFreeFragmentBytes, uint64_t(1.5 * MiB));
        QCOMPARE(scene->fragmentsAt(ti, scene->timeEnd()).size(), size_t{1});

        // One truth with PyTorch's device accounting: at every sample the pools add up to the
        // track (default 16 + (1, 5) 2 = 18 MiB at the end).
        const auto& whole = *scene->tracks[size_t(box->itemData(track0).toInt())].timeline;
        const auto& def = *scene->tracks[size_t(box->itemData(track0 + 1).toInt())].timeline;
        const auto& priv = *scene->tracks[size_t(ti)].timeline;
        QCOMPARE(whole.time.size(), priv.time.size());
        QCOMPARE(def.reserved.back(), 16 * MiB);
        for (size_t i = 0; i < whole.time.size(); ++i) {
            QCOMPARE(def.reserved[i] + priv.reserved[i], whole.reserved[i]);
            QCOMPARE(def.allocated[i] + priv.allocated[i], whole.allocated[i]);
        }

        const QByteArray shots = qgetenv("FRAGSCOPE_SHOTS");
        if (!shots.isEmpty()) {
            QApplication::processEvents();
            QVERIFY(w.grab().save(QString::fromLocal8Bit(shots) + "/gui-pool-track.png"));
        }
    }
};

QTEST_MAIN(TstGuiPools)
#include "tst_gui_pools.moc"
