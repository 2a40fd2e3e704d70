// One summary everywhere (docs/analysis.md "Summary"): for the same session, `report`,
// `compare`, `whatif` (its real run, and its replay under the recorded settings, which
// reproduces a simulated run exactly) and the GUI (the report window, the compare window, the
// what-if window) give the same peak reserved and allocated bytes, mean and max F, smallest
// largest free block and most fragments, with the same times, to the last bit. The GUI's report
// window shows exactly the text `fragscope report` prints, computed in-process.
#include "compare_window.h"
#include "main_window.h"
#include "report_window.h"
#include "testutil.h"
#include "whatif_controller.h"

#include "core/analysis/report_format.h"
#include "core/analysis/serialize.h"

#include <QApplication>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>

using namespace fs;

namespace {

const QStringList kFields = {"peak_reserved_bytes",           "peak_reserved_at_ns",
                             "peak_allocated_bytes",          "peak_allocated_at_ns",
                             "mean_fragmentation_ratio",      "max_fragmentation_ratio",
                             "max_fragmentation_ratio_at_ns", "min_largest_free_bytes",
                             "min_largest_free_at_ns",        "max_fragment_count",
                             "max_fragment_count_at_ns",      "final_reserved_bytes"};

// The figures as the JSON every command writes (the one serialiser).
QJsonObject asJson(const analysis::SummaryFigures& f)
{
    JsonWriter j;
    j.beginObject();
    analysis::writeSummaryFields(j, f);
    j.endObject();
    return QJsonDocument::fromJson(QByteArray::fromStdString(j.str())).object();
}

QJsonObject cliJson(const QStringList& args)
{
    const fstest::CliResult r = fstest::runCli(args);
    if (r.exitCode != 0) qWarning() << args << r.err;
    return QJsonDocument::fromJson(r.out).object();
}

// Every summary field of got equals want's, bit for bit (doubles print in their shortest
// round-trip form, so equal text is an equal value).
void sameFigures(const QJsonObject& got, const QJsonObject& want, const char* who)
{
    for (const QString& k : kFields) {
        QVERIFY2(want.contains(k), qPrintable(k));
        const QByteArray g = QJsonDocument(QJsonObject{{k, got[k]}}).toJson(QJsonDocument::Compact);
        const QByteArray w =
            QJsonDocument(QJsonObject{{k, want[k]}}).toJson(QJsonDocument::Compact);
        QVERIFY2(g == w, qPrintable(QString("%1: %2 vs %3").arg(who, g, w)));
    }
}

} // namespace

class TstSummaryEverywhere : public QObject
{
    Q_OBJECT
    QTemporaryDir dir_;
    QString sim_;
    QJsonObject report_; // report --json's default track

private slots:
    void initTestCase()
    {
        QVERIFY(dir_.isValid());
        sim_ = dir_.filePath("sim.fragscope");
        QCOMPARE(fstest::runCli({"simulate", "-o", sim_, "--frames", "6", "--steps", "3", "--seed",
                                 "7", "--capacity", "40G"})
                     .exitCode,
                 0);
        const QJsonObject rep = cliJson({"report", sim_, "--json"});
        const QJsonObject def = rep["default_track"].toObject();
        for (const auto& t : rep["tracks"].toArray())
            if (t.toObject()["device"] == def["device"] && t.toObject()["level"] == def["level"])
                report_ = t.toObject();
        QVERIFY(!report_.isEmpty());
        // A run that fragments (else equal zeros would prove little).
        QVERIFY(report_["mean_fragmentation_ratio"].toDouble() > 0.05);
        QVERIFY(report_["max_fragmentation_ratio"].toDouble() >
                report_["mean_fragmentation_ratio"].toDouble());
    }

    void cli()
    {
        const QJsonObject cmp = cliJson({"compare", sim_, sim_, "--json"});
        sameFigures(cmp["a"].toObject(), report_, "compare a");
        sameFigures(cmp["b"].toObject(), report_, "compare b");
        const QJsonObject wi = cliJson({"whatif", sim_, "--json"});
        sameFigures(wi["real_run"].toObject()["devices"].toObject()["0"].toObject(), report_,
                    "whatif real run");
        // The replay under the recorded settings reproduces a simulated run event by event.
        QVERIFY(wi["fidelity"].toObject()["reproduced"].toBool());
        sameFigures(wi["runs"].toArray()[0].toObject()["devices"].toObject()["0"].toObject(),
                    report_, "whatif recorded replay");
    }

    void gui()
    {
        gui::MainWindow w;
        QStringList errors;
        w.setErrorReporter([&](const QString& t, const QString& m) { errors << t + ": " + m; });
        w.resize(1200, 800);
        w.show();
        w.openFile(sim_);
        QTRY_VERIFY_WITH_TIMEOUT(w.scene() && !w.busy(), 60000);

        // The report window: in-process, on a worker; the GUI thread never waits for it.
        QPointer<gui::ReportWindow> rw = w.showReport();
        QVERIFY(rw);
        QSignalSpy computed(rw.data(), &gui::ReportWindow::computed);
        QVERIFY(rw->report() == nullptr); // not computed on the GUI thread
        QVERIFY(computed.wait(60000));
        QVERIFY(computed.at(0).at(0).toBool());
        const analysis::Report& r = *rw->report();
        QVERIFY(r.defaultTrack);
        for (const analysis::TrackReport& t : r.tracks)
            if (t.track.device == r.defaultTrack->device && t.track.level == r.defaultTrack->level)
                sameFigures(asJson(t.figures), report_, "GUI report window");
        // Its text is the CLI's, byte for byte (the same file name given).
        const fstest::CliResult text = fstest::runCli({"report", QString::fromStdString(r.file)});
        QCOMPARE(rw->text().toStdString(), text.out.toStdString());
        QCOMPARE(QString::fromStdString(analysis::reportJson(r)).toUtf8(),
                 fstest::runCli({"report", QString::fromStdString(r.file), "--json"}).out);
        rw->close();

        // The compare window: its figures and the mean F it shows.
        {
            gui::CompareWindow cw(sim_, sim_);
            QSignalSpy loaded(&cw, &gui::CompareWindow::loaded);
            QVERIFY(cw.comparison() || loaded.wait(60000));
            QVERIFY(cw.comparison());
            sameFigures(asJson(cw.comparison()->a.figures), report_, "GUI compare window");
            QTableWidget* t = cw.summaryTable();
            bool shown = false;
            for (int row = 0; row < t->rowCount(); ++row)
                if (t->item(row, 0)->text() == "mean F") {
                    QCOMPARE(
                        t->item(row, 1)->text(),
                        QString::number(report_["mean_fragmentation_ratio"].toDouble(), 'f', 4));
                    shown = true;
                }
            QVERIFY(shown);
        }

        // The what-if window (File › What-if replay…, recorded settings): A is the real run.
        QSignalSpy opened(w.whatIf(), &gui::WhatIfController::compareOpened);
        alloc::RunSpec spec;
        spec.recordedConfig = true;
        w.whatIf()->start(spec);
        QVERIFY2(opened.wait(120000), qPrintable(errors.join("\n")));
        auto* cw = opened.at(0).at(0).value<gui::CompareWindow*>();
        QSignalSpy loaded(cw, &gui::CompareWindow::loaded);
        QVERIFY(cw->comparison() || loaded.wait(60000));
        QVERIFY(cw->comparison());
        sameFigures(asJson(cw->comparison()->a.figures), report_, "GUI what-if window, real run");
        sameFigures(asJson(cw->comparison()->b.figures), report_,
                    "GUI what-if window, recorded replay");
        sameFigures(asJson(cw->whatIf()->real.at(0).summary), report_, "GUI what-if result");
        cw->close();
        QVERIFY2(errors.isEmpty(), qPrintable(errors.join("\n")));
    }
};

QTEST_MAIN(TstSummaryEverywhere)
#include "tst_summary_everywhere.moc"
