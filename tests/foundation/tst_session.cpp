// Session file format v1: magic, version, validation of bad files, documentation coverage.
#include "core/store/allocations.h"
#include "core/store/debug_query.h"
#include "core/store/session.h"
#include "sessionbuilder.h"
#include "testutil.h"

#include <QFile>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>
#include <sqlite3.h>

#include <chrono>
#include <thread>

using namespace fs;

class TstSession : public QObject
{
    Q_OBJECT
private:
    QTemporaryDir dir_;
    std::string path(const char* name) const { return (dir_.path() + "/" + name).toStdString(); }
    static void sql(const std::string& file, const char* statement)
    {
        Db db(file, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
        db.exec(statement);
    }
    // Opening must fail with a SessionError naming the file and containing `needle`.
    static void expectOpenError(const std::string& file, const QString& needle)
    {
        try {
            Session::open(file);
            QFAIL(qPrintable("opened a bad file: " + QString::fromStdString(file)));
        } catch (const SessionError& e) {
            const QString msg = QString::fromUtf8(e.what());
            QVERIFY2(msg.startsWith(QString::fromStdString(file) + ": "), qPrintable(msg));
            QVERIFY2(msg.contains(needle, Qt::CaseInsensitive), qPrintable(msg));
            QVERIFY2(!msg.contains('\n'), "error must be one line");
        }
    }

    // The bytes of a 20,000-allocation session written as `name` (empty if it cannot be read).
    QByteArray smallSessionBytes(const char* name) const
    {
        const auto f = path(name);
        fstest::writeSmallSession(f, 20000);
        QFile q(QString::fromStdString(f));
        return q.open(QIODevice::ReadOnly) ? q.readAll() : QByteArray();
    }

private slots:
    void initTestCase() { QVERIFY(dir_.isValid()); }

    void validSessionOpens()
    {
        const auto f = path("ok.fragscope");
        fstest::writeSmallSession(f, 100);
        Session s = Session::open(f);
        QCOMPARE(fs::store::debugQuery(s).scalar("PRAGMA application_id"), int64_t{kApplicationId});
        QCOMPARE(fs::store::debugQuery(s).scalar("PRAGMA user_version"), int64_t{kFormatVersion});
        QCOMPARE(s.meta("magic"), std::string("fragscope"));
        QCOMPARE(s.meta("format_version"), std::string("1"));
        QCOMPARE(s.meta("state"), std::string("complete"));
        // Clean end: the file is self-contained (no WAL left behind).
        QCOMPARE(fs::store::debugQuery(s).scalarText("PRAGMA journal_mode"), std::string("delete"));
        const SessionSummary sum = s.summary();
        QCOMPARE(sum.regions, int64_t{1});
        QCOMPARE(sum.allocations, int64_t{100});
        // 1 region create + 100 allocs + 100 frees = 201 events.
        QCOMPARE(sum.events, int64_t{201});
        QCOMPARE(sum.devices.size(), size_t{1});
        QCOMPARE(sum.devices[0].capacityBytes, 80ull << 30);
        QVERIFY(!sum.health.endedAbruptly);
        QCOMPARE(sum.health.anomalyTotal(), int64_t{0});
        QCOMPARE(sum.timeBegin, int64_t{0});
        QCOMPARE(sum.timeEnd, int64_t{10 + 2 * 99 + 1});
    }

    void newerVersionRefused()
    {
        const auto f = path("newer.fragscope");
        fstest::writeSmallSession(f, 5);
        sql(f, "PRAGMA user_version=2");
        expectOpenError(f, "newer");
    }

    void foreignSqliteRefused()
    {
        const auto f = path("foreign.db");
        sql(f, "CREATE TABLE t(x); INSERT INTO t VALUES(1)");
        expectOpenError(f, "not a fragscope session");
    }

    void wrongMagicRefused()
    {
        const auto f = path("nomagic.fragscope");
        fstest::writeSmallSession(f, 5);
        sql(f, "UPDATE meta SET value='other' WHERE key='magic'");
        expectOpenError(f, "not a fragscope session");
    }

    void nonDatabaseRefused_data()
    {
        QTest::addColumn<QByteArray>("content");
        QTest::addColumn<QString>("needle");
        QTest::newRow("empty") << QByteArray() << "empty";
        QTest::newRow("text") << QByteArray("frame,metric,value\n1,coherence_score,0.5\n")
                              << "not an SQLite";
        QTest::newRow("binary") << QByteArray(4096, '\x7f') << "not an SQLite";
    }
    void nonDatabaseRefused()
    {
        QFETCH(QByteArray, content);
        QFETCH(QString, needle);
        const auto f = path("junk.fragscope");
        QFile q(QString::fromStdString(f));
        QVERIFY(q.open(QIODevice::WriteOnly | QIODevice::Truncate));
        q.write(content);
        q.close();
        expectOpenError(f, needle);
    }

    void missingAndDirectoryRefused()
    {
        expectOpenError(path("does-not-exist.fragscope"), "no such file");
        expectOpenError(dir_.path().toStdString(), "directory");
    }

    void truncatedRefused()
    {
        const QByteArray all = smallSessionBytes("big.fragscope");
        QVERIFY(all.size() > 100000);
        const auto t = path("truncated.fragscope");
        QFile w(QString::fromStdString(t));
        QVERIFY(w.open(QIODevice::WriteOnly | QIODevice::Truncate));
        w.write(all.left(all.size() / 2));
        w.close();
        expectOpenError(t, "truncated");
    }

    // A writer (the GUI storing its index, a checkpoint) writes page 1 with the new page count
    // before it extends the file: while its journal exists, a short file is a write in progress,
    // not a truncated one. Here the first half is on disk beside a journal, and the rest lands
    // 300 ms later: the open waits for it and succeeds. With the journal gone the same half file
    // is refused at once (truncatedRefused).
    void fileBeingExtendedIsNotTruncated()
    {
        const QByteArray all = smallSessionBytes("growing-src.fragscope");
        QVERIFY(!all.isEmpty());
        const auto g = path("growing.fragscope");
        QFile w(QString::fromStdString(g));
        QVERIFY(w.open(QIODevice::WriteOnly | QIODevice::Truncate));
        w.write(all.left(all.size() / 2));
        w.flush();
        QFile journal(QString::fromStdString(g + "-journal"));
        QVERIFY(journal.open(QIODevice::WriteOnly));
        journal.close();
        std::thread writer([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            w.write(all.mid(all.size() / 2));
            w.close();
            journal.remove();
        });
        try {
            Session s = Session::open(g);
            QCOMPARE(s.summary().allocations, int64_t{20000});
        } catch (const std::exception& e) {
            writer.join();
            QFAIL(e.what());
        }
        writer.join();
    }

    void corruptedRefused()
    {
        const auto f = path("corrupt.fragscope");
        fstest::writeSmallSession(f, 20000);
        QFile q(QString::fromStdString(f));
        QVERIFY(q.open(QIODevice::ReadWrite));
        QByteArray all = q.readAll();
        // Overwrite the middle pages (not the header) with garbage.
        for (qsizetype i = 8192 * 3; i < 8192 * 6 && i < all.size(); ++i)
            all[i] = static_cast<char>((i * 131) & 0xff);
        q.seek(0);
        q.write(all);
        q.close();
        expectOpenError(f, "corrupt");
    }

    // The allocation reader visits rows inside one step (Stmt::visitRows, an aggregate): the
    // same records, in the same order, as a step per row, NULLs included; a visitor can stop
    // it; an exception it throws reaches the caller and leaves the connection usable.
    void longReadsVisitEveryRowAsSteppingDoes()
    {
        const auto f = path("visit.fragscope");
        fstest::writeSmallSession(f, 300); // ids 1..300, each with a free, region and no tag
        // Row 7: no region, never freed, tagged 42 (every nullable column flipped).
        sql(f, "UPDATE allocations SET region_id = NULL, free_ns = NULL, tag = 42 WHERE id = 7");
        Session s = Session::open(f);
        std::vector<store::AllocationRecord> visited, stepped;
        auto into = [](std::vector<store::AllocationRecord>& v) {
            return [&v](const store::AllocationRecord& r) {
                v.push_back(r);
                return true;
            };
        };
        QCOMPARE(store::AllocationRecords::idRange(s, 5, 250, into(visited)), int64_t{246});
        QCOMPARE(store::AllocationRecords::idRangeStepped(s, 5, 250, into(stepped)), int64_t{246});
        QCOMPARE(visited.size(), size_t{246}); // ids 5..250
        for (size_t i = 0; i < visited.size(); ++i) {
            const store::AllocationRecord &a = visited[i], &b = stepped[i];
            QCOMPARE(a.id, static_cast<int64_t>(5 + i));
            QVERIFY(a.id == b.id && a.device == b.device && a.level == b.level &&
                    a.regionId == b.regionId && a.address == b.address && a.size == b.size &&
                    a.allocNs == b.allocNs && a.freeNs == b.freeNs && a.tag == b.tag);
        }
        const store::AllocationRecord& seven = visited[2];
        QVERIFY(!seven.regionId && !seven.freeNs && seven.tag == int64_t{42});
        QVERIFY(visited[3].regionId && visited[3].freeNs && !visited[3].tag);
        // After id 298: 299 and 300.
        std::vector<store::AllocationRecord> tail;
        QCOMPARE(store::AllocationRecords::after(s, 298, into(tail)), int64_t{2});
        QVERIFY(tail.size() == 2 && tail[0].id == 299 && tail[1].id == 300);
        // Stopped by the visitor at its third row.
        int seen = 0;
        store::AllocationRecords::idRange(
            s, 1, 300, [&](const store::AllocationRecord&) { return ++seen < 3; });
        QCOMPARE(seen, 3);
        // An exception goes through SQLite to the caller; the connection reads on.
        bool thrown = false;
        try {
            store::AllocationRecords::idRange(s, 1, 300, [](const store::AllocationRecord& r) {
                if (r.id == 10) throw SessionError("x", "visitor failed");
                return true;
            });
        } catch (const SessionError& e) {
            thrown = QString::fromUtf8(e.what()).contains("visitor failed");
        }
        QVERIFY(thrown);
        QCOMPARE(store::AllocationRecords::idRange(
                     s, 1, 300, [](const store::AllocationRecord&) { return true; }),
                 int64_t{300});
        // fs_rows without the pointer only visitRows binds: an error, not a crash.
        try {
            fs::store::debugQuery(s).scalar("SELECT fs_rows(NULL, id) FROM allocations");
            QFAIL("fs_rows ran without its pointer");
        } catch (const SessionError& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains("internal"), e.what());
        }
    }

    // A long kernels table is counted on a connection of its own (from 1 M rows by the largest
    // id), outside a read transaction; inside one, on the session's own. Both give the count.
    void summaryCountsALongKernelsTableApart()
    {
        const auto f = path("kernels.fragscope");
        fstest::writeSmallSession(f, 10);
        // 1,000,001 kernels: ids 1..1,000,001, so the largest id reaches the threshold.
        sql(f, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000001)"
               " INSERT INTO kernels(id, device, start_ns, end_ns, name) SELECT i, 0, i, i + 1, 0"
               " FROM n");
        Session s = Session::open(f, false);
        const SessionSummary apart = s.summary();
        QCOMPARE(apart.kernels, int64_t{1000001});
        QCOMPARE(apart.allocations, int64_t{10});
        s.beginRead();
        QCOMPARE(s.summary().kernels, int64_t{1000001});
        s.commitRead();
    }

    // Every table and column of a fresh session is documented in docs/session-format.md.
    void formatIsDocumented()
    {
        const auto f = path("doc.fragscope");
        fstest::writeSmallSession(f, 1);
        QFile doc(QStringLiteral(FRAGSCOPE_SOURCE_DIR "/docs/session-format.md"));
        QVERIFY(doc.open(QIODevice::ReadOnly));
        const QString text = QString::fromUtf8(doc.readAll());
        Session s = Session::open(f);
        int tables = 0;
        Stmt st = fs::store::debugQuery(s).prepare(
            "SELECT name FROM sqlite_schema WHERE type='table' ORDER BY name");
        while (st.step()) {
            const QString table = QString::fromStdString(st.text(0));
            ++tables;
            const QRegularExpression head("^### `" + table + "`$",
                                          QRegularExpression::MultilineOption);
            const auto m = head.match(text);
            QVERIFY2(m.hasMatch(), qPrintable("table not documented: " + table));
            const int next = text.indexOf("\n### ", m.capturedEnd());
            const QString section =
                text.mid(m.capturedEnd(), next < 0 ? -1 : next - m.capturedEnd());
            Stmt cols = fs::store::debugQuery(s).prepare("SELECT name FROM pragma_table_info(?1)");
            cols.bind(1, table.toStdString());
            while (cols.step()) {
                const QString col = QString::fromStdString(cols.text(0));
                QVERIFY2(section.contains("| `" + col + "` |"),
                         qPrintable("column not documented: " + table + "." + col));
            }
        }
        QCOMPARE(tables, static_cast<int>(schemaTables().size()));
    }
};

QTEST_GUILESS_MAIN(TstSession)
#include "tst_session.moc"
