// `fragscope export timeline FILE -o OUT.csv|OUT.json`: every row equals Engine::stateAt (and
// `fragscope state --at`) for its track and time, entropies included, on a hand-built session,
// the simulator's output and every shared real snapshot.
#include "../analysis/builder.h"
#include "core/analysis/engine.h"
#include "core/analysis/timeline_export.h"
#include "testutil.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>
#include <cstdlib>

using namespace fs;
using namespace fs::analysis;
using fstest::runCli;

namespace {

struct Row
{
    int64_t time = 0;
    uint32_t device = 0;
    Level level = Level::Framework;
    uint64_t reserved = 0, allocated = 0, freeBytes = 0, largest = 0;
    int64_t fragments = 0;
    double ratio = 0, fragEntropy = 0, eventEntropy = 0;
};

// Parses the CSV the command wrote; fails (returns false) on any malformed line.
bool readCsv(const QString& path, std::vector<Row>& rows, QString& why)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) {
        why = "cannot open " + path;
        return false;
    }
    const QList<QByteArray> lines = f.readAll().split('\n');
    QStringList header;
    for (const auto& c : timelineColumns())
        header << QString::fromStdString(c);
    if (lines.isEmpty() || QString::fromUtf8(lines[0]) != header.join(',')) {
        why = "bad header " + QString::fromUtf8(lines.value(0));
        return false;
    }
    for (qsizetype i = 1; i < lines.size(); ++i) {
        if (lines[i].isEmpty()) continue;
        const QList<QByteArray> c = lines[i].split(',');
        if (c.size() != 11) {
            why = QString("line %1: %2 columns").arg(i + 1).arg(c.size());
            return false;
        }
        Row r;
        r.time = c[0].toLongLong();
        r.device = c[1].toUInt();
        if (!parseLevel(c[2].toStdString(), r.level)) {
            why = "bad level " + QString::fromUtf8(c[2]);
            return false;
        }
        r.reserved = c[3].toULongLong();
        r.allocated = c[4].toULongLong();
        r.freeBytes = c[5].toULongLong();
        r.fragments = c[6].toLongLong();
        r.largest = c[7].toULongLong();
        // strtod is correctly rounded: the shortest round-trip text gives back the same double.
        r.ratio = std::strtod(c[8].constData(), nullptr);
        r.fragEntropy = std::strtod(c[9].constData(), nullptr);
        r.eventEntropy = std::strtod(c[10].constData(), nullptr);
        rows.push_back(r);
    }
    return true;
}

// Every row against the engine's state at that instant; exact equality.
void compareWithState(const Engine& e, const std::vector<Row>& rows)
{
    for (const Row& r : rows) {
        const State s = e.stateAt(r.device, r.level, r.time);
        const QByteArray where = QByteArray("t=") + QByteArray::number(qint64(r.time)) +
                                 " device " + QByteArray::number(r.device) + " " +
                                 QByteArray(levelName(r.level).data(),
                                            static_cast<qsizetype>(levelName(r.level).size()));
        QVERIFY2(r.reserved == s.reservedBytes, where);
        QVERIFY2(r.allocated == s.allocatedBytes, where);
        QVERIFY2(r.freeBytes == s.freeBytes, where);
        QVERIFY2(r.fragments == s.fragmentCount, where);
        QVERIFY2(r.largest == s.largestFreeFragmentBytes, where);
        QVERIFY2(r.ratio == s.fragmentationRatio, where);
        QVERIFY2(r.fragEntropy == s.fragmentEntropyBits, where);
        QVERIFY2(r.eventEntropy == s.eventSizeEntropyBits, where);
    }
}

} // namespace

class TstExportTimeline : public QObject
{
    Q_OBJECT
private:
    QTemporaryDir dir_;
    QString hand_;

    // Exports CSV from `session` and checks every row against stateAt; returns the rows.
    std::vector<Row> exportAndCompare(const QString& session, const QStringList& extra = {})
    {
        const QString csv = dir_.path() + "/" + QFileInfo(session).baseName() + ".csv";
        const auto r = runCli(QStringList{"export", "timeline", session, "-o", csv} + extra);
        if (r.exitCode != 0) {
            qWarning() << r.err;
            return {};
        }
        std::vector<Row> rows;
        QString why;
        if (!readCsv(csv, rows, why)) {
            qWarning() << why;
            return {};
        }
        const auto e = Engine::open(session.toStdString());
        compareWithState(*e, rows);
        if (QTest::currentTestFailed()) return {};
        // The session end is a sample of every track.
        for (const Track& tr : e->tracks()) {
            bool end = false;
            for (const Row& row : rows)
                end = end || (row.device == tr.device && row.level == tr.level &&
                              row.time == e->timeEnd());
            if (!end) {
                qWarning() << "no row at the session end for device" << tr.device;
                return {};
            }
        }
        return rows;
    }

private slots:
    void initTestCase()
    {
        QVERIFY(dir_.isValid());
        // 1 MiB segment; allocs of 256 KiB (t=1100), 256 KiB (2100), 384 KiB (3100); the
        // second freed at 3200.
        hand_ = dir_.path() + "/hand.fragscope";
        using namespace antest;
        Ingest in(options(hand_.toStdString()));
        in.begin();
        in.add(ev(EventType::RegionCreate, 0, kBase, MiB));
        in.add(ev(EventType::Alloc, 1100, kBase, 256 * KiB));
        in.add(ev(EventType::Alloc, 2100, kBase + 256 * KiB, 256 * KiB));
        in.add(ev(EventType::Alloc, 3100, kBase + 512 * KiB, 384 * KiB));
        in.add(ev(EventType::Free, 3200, kBase + 256 * KiB));
        mark(in, 4000, "end");
        in.end();
    }

    void handBuiltKnownAnswers()
    {
        // --step 1000 over [0, 4000]: samples at 0, 1000, 2000, 3000, 4000 (the end).
        const auto rows = exportAndCompare(hand_, {"--step", "1000"});
        QCOMPARE(rows.size(), size_t(5));
        QCOMPARE(rows.back().time, int64_t(4000));
        // At the end: fragments [256K, 512K) and [896K, 1M): 256 KiB and 128 KiB -> F = 1/3,
        // fragment entropy 1 bit (classes (128K, 256K] and (64K, 128K]). Events in the 300 s
        // window: 256K, 256K, 384K allocs and the 256K free: three in class (128K, 256K], one in
        // (256K, 512K]: H = -(3/4 log2 3/4 + 1/4 log2 1/4) = 0.8112781244591328 bits.
        const Row& end = rows.back();
        QCOMPARE(end.reserved, uint64_t(antest::MiB));
        QCOMPARE(end.allocated, uint64_t(640 * antest::KiB));
        QCOMPARE(end.fragments, int64_t(2));
        QCOMPARE(end.largest, uint64_t(256 * antest::KiB));
        QVERIFY(std::fabs(end.ratio - 1.0 / 3.0) < 1e-15);
        QCOMPARE(end.fragEntropy, 1.0);
        QVERIFY(std::fabs(end.eventEntropy - 0.8112781244591328) < 1e-15);
        // At t=2000: one 256 KiB alloc in the window -> event entropy 0; one 768 KiB fragment.
        QCOMPARE(rows[2].time, int64_t(2000));
        QCOMPARE(rows[2].eventEntropy, 0.0);
        QCOMPARE(rows[2].largest, uint64_t(768 * antest::KiB));

        // The same rows through `fragscope state --at` (the user's view of stateAt).
        for (const Row& r : rows) {
            const auto st = runCli({"state", hand_, "--at", QString::number(r.time), "--json"});
            QCOMPARE(st.exitCode, 0);
            const QJsonObject s =
                QJsonDocument::fromJson(st.out).object()["states"].toArray()[0].toObject();
            QCOMPARE(s["free_bytes"].toDouble(), double(r.freeBytes));
            QCOMPARE(s["fragmentation_ratio"].toDouble(), r.ratio);
            QCOMPARE(s["fragment_entropy_bits"].toDouble(), r.fragEntropy);
            QCOMPARE(s["event_size_entropy_bits"].toDouble(), r.eventEntropy);
        }
    }

    void jsonEqualsCsv()
    {
        const QString js = dir_.path() + "/hand.json";
        const auto r =
            runCli({"export", "timeline", hand_, "-o", js, "--from", "1000", "--to", "3500"});
        QCOMPARE(r.exitCode, 0);
        QFile f(js);
        QVERIFY(f.open(QIODevice::ReadOnly));
        QJsonParseError err{};
        const QJsonObject o = QJsonDocument::fromJson(f.readAll(), &err).object();
        QCOMPARE(err.error, QJsonParseError::NoError);
        QCOMPARE(o["entropy_window_ns"].toDouble(), 300e9);
        const QJsonArray samples = o["samples"].toArray();
        // Default step: (3500 - 1000) / 1000 = 2 ns -> samples 1000, 1002, ..., 3498, then 3500.
        QCOMPARE(samples.size(), 1251);
        QCOMPARE(samples.last().toObject()["time_ns"].toInteger(), qint64(3500));
        const auto e = Engine::open(hand_.toStdString());
        for (const auto& v : samples) {
            const QJsonObject s = v.toObject();
            const State st = e->stateAt(0, Level::Framework, s["time_ns"].toInteger());
            QCOMPARE(s["level"].toString(), QString("framework"));
            QCOMPARE(s["largest_free_bytes"].toDouble(), double(st.largestFreeFragmentBytes));
            QCOMPARE(s["fragmentation_ratio"].toDouble(), st.fragmentationRatio);
            QCOMPARE(s["event_size_entropy_bits"].toDouble(), st.eventSizeEntropyBits);
        }
    }

    void errors()
    {
        const QString out = dir_.path() + "/e.csv";
        QCOMPARE(runCli({"export", "timeline", hand_, "-o", out, "--step", "end"}).exitCode, 64);
        QCOMPARE(runCli({"export", "timeline", hand_, "-o", out, "--device", "7"}).exitCode, 64);
        QCOMPARE(runCli({"export", "timeline", hand_, "-o", out, "--from", "3000", "--to", "100"})
                     .exitCode,
                 64);
        QCOMPARE(runCli({"export", "timeline", hand_, "-o", out, "--size", "800x600"}).exitCode,
                 64);
        QVERIFY(!QFile::exists(out));
        const QString junk = dir_.path() + "/junk.fragscope";
        QFile j(junk);
        QVERIFY(j.open(QIODevice::WriteOnly));
        j.write(QByteArray(300, 'x'));
        j.close();
        const auto r = runCli({"export", "timeline", junk, "-o", out});
        QCOMPARE(r.exitCode, 2);
        QVERIFY(r.err.contains("junk.fragscope"));
        QVERIFY(!QFile::exists(out));
    }

    void simulated()
    {
        const QString sim = dir_.path() + "/sim.fragscope";
        const auto r =
            runCli({"simulate", "-o", sim, "--frames", "8", "--steps", "4", "--seed", "5"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const auto rows = exportAndCompare(sim, {"--step", "50ms"});
        QVERIFY(rows.size() > 10);
        // Non-trivial figures: some sample has fragments and a non-zero event entropy.
        bool frag = false, ent = false;
        for (const Row& row : rows) {
            frag = frag || row.fragments > 1;
            ent = ent || row.eventEntropy > 0;
        }
        QVERIFY(frag && ent);
    }

    void realSnapshots()
    {
        FSTEST_REQUIRE_DATA("pytorch-snapshots");
        const QString dir = fstest::dataDir() + "/pytorch-snapshots";
        const QStringList files = QDir(dir).entryList({"*.pickle"}, QDir::Files, QDir::Name);
        QVERIFY2(!files.isEmpty(), qPrintable("no snapshots in " + dir));
        for (const QString& name : files) {
            const QString session = dir_.path() + "/" + QFileInfo(name).baseName() + ".fragscope";
            const auto imp = runCli({"import", dir + "/" + name, "-o", session});
            QVERIFY2(imp.exitCode == 0, qPrintable(name + ": " + imp.err));
            const auto rows = exportAndCompare(session);
            QVERIFY2(!rows.empty(), qPrintable(name));
        }
    }
};

QTEST_GUILESS_MAIN(TstExportTimeline)
#include "tst_export_timeline.moc"
