// store::visitTableRows reading a table's b-tree pages itself (docs/store.md "Long reads"): the
// same rows and values as SQLite's own reading (RowReading::Sqlite, the reference) for every
// page size, value width, NULL, omitted column and range; the rows it leaves to SQLite (reals,
// texts, overflow) read there; the whole range left to SQLite where the pages are not the whole
// truth (a log with frames, a defaulted column); a damaged file never crashes it, and where the
// damage leaves the b-tree sound it reads what SQLite reads.
#include "core/store/sqlite.h"
#include "core/store/table_scan.h"

#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace fs;
using store::RowReadCounts;
using store::RowReading;

namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr const char* kColumns = "id, a, b, c, d";

struct Row
{
    std::vector<int64_t> v;
    uint64_t nulls = 0;
    bool operator==(const Row&) const = default;
};

std::vector<Row> readAll(const Db& db, int64_t lo, int64_t hi, RowReading how,
                         RowReadCounts* counts = nullptr, std::string_view cols = kColumns)
{
    const int n = 1 + static_cast<int>(std::count(cols.begin(), cols.end(), ','));
    std::vector<Row> out;
    store::visitTableRows(
        db, "t", cols, lo, hi,
        [&](const RowValues& v) {
            Row r;
            for (int c = 0; c < n; ++c) {
                r.v.push_back(v.i64(c));
                if (v.isNull(c)) r.nulls |= uint64_t{1} << c;
            }
            out.push_back(std::move(r));
            return true;
        },
        how, counts);
    return out;
}

// Values of every integer width SQLite stores (serial types 1-6, 8, 9), both signs.
int64_t valueFor(int64_t i, int col)
{
    static const int64_t widths[] = {
        0, 1, -1, 127, -128, 300, -70000, 8388607, -2147483648, 140737488355327, kMin, kMax};
    return widths[((i * 7 + col * 3) % 12 + 12) % 12] ^ (i * (col + 1)); // i may be < 0
}

void fill(Db& db, int64_t first, int64_t count)
{
    db.exec("BEGIN");
    Stmt ins = db.prepare("INSERT INTO t(id, a, b, c) VALUES(?1, ?2, ?3, ?4)");
    for (int64_t i = first; i < first + count; ++i) {
        ins.bind(1, i).bind(2, valueFor(i, 0)).bind(3, valueFor(i, 1));
        if (i % 5 == 0)
            ins.bindNull(4);
        else
            ins.bind(4, valueFor(i, 2));
        ins.run();
    }
    db.exec("COMMIT");
}

} // namespace

class TableScanTest : public QObject
{
    Q_OBJECT
    QTemporaryDir dir;
    std::string path(const char* name) { return (dir.path() + "/" + name).toStdString(); }

    // A table of 20,000 rows: ids -500..19,499 (negative rowids are nine-byte varints), a
    // column d added after the first half (those rows' records omit it: NULL), every fifth c
    // NULL.
    std::string makeTable(const char* name, int pageSize, int reserve)
    {
        const std::string f = path(name);
        QFile::remove(QString::fromStdString(f));
        Db db(f, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
        db.exec("PRAGMA page_size=" + std::to_string(pageSize));
        if (reserve > 0) // bytes SQLite leaves unused at each page's end (usable < page size)
            sqlite3_file_control(db.raw(), "main", SQLITE_FCNTL_RESERVE_BYTES, &reserve);
        db.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, a INTEGER NOT NULL, b INTEGER, c INTEGER)");
        fill(db, -500, 10000);
        db.exec("ALTER TABLE t ADD COLUMN d INTEGER");
        fill(db, 9500, 10000);
        db.exec("UPDATE t SET d = id * 3 WHERE id >= 15000");
        if (reserve > 0) db.exec("VACUUM");
        return f;
    }

private slots:
    void pagesReadWhatSqliteReads_data()
    {
        QTest::addColumn<int>("pageSize");
        QTest::addColumn<int>("reserve");
        QTest::newRow("512") << 512 << 0;
        QTest::newRow("4096 with 32 reserved") << 4096 << 32;
        QTest::newRow("8192") << 8192 << 0;
        QTest::newRow("65536") << 65536 << 0;
    }
    void pagesReadWhatSqliteReads()
    {
        QFETCH(int, pageSize);
        QFETCH(int, reserve);
        const std::string f = makeTable("t.db", pageSize, reserve);
        Db db(f, SQLITE_OPEN_READONLY);
        QCOMPARE(db.scalar("PRAGMA page_size"), int64_t{pageSize});
        // Ranges: all, none, inside, one row, across the sign, the edges of the ids.
        const std::pair<int64_t, int64_t> ranges[] = {{kMin, kMax}, {20000, kMax}, {kMin, -501},
                                                      {100, 7000},  {7, 7},        {-3, 3},
                                                      {-500, -500}, {19499, kMax}, {5, 4}};
        for (const auto& [lo, hi] : ranges) {
            RowReadCounts pages, sql;
            const auto a = readAll(db, lo, hi, RowReading::Pages, &pages);
            const auto b = readAll(db, lo, hi, RowReading::Sqlite, &sql);
            const int64_t expected =
                lo > hi ? 0
                        : std::max<int64_t>(0, std::min<int64_t>(hi, 19499) -
                                                   std::max<int64_t>(lo, -500) + 1);
            QCOMPARE(int64_t(b.size()), expected);
            QVERIFY2(a == b, qPrintable(QStringLiteral("range %1..%2").arg(lo).arg(hi)));
            // Every row from the pages: nothing here needs SQLite.
            QCOMPARE(pages.fromPages, expected);
            QCOMPARE(pages.bySqlite, int64_t{0});
            QCOMPARE(sql.fromPages, int64_t{0});
        }
        // Spot checks against the values written: row 5 (c NULL, d omitted), row 15001 (d set).
        const auto five = readAll(db, 5, 5, RowReading::Pages);
        QCOMPARE(five.size(), size_t{1});
        QCOMPARE(five[0].v[0], int64_t{5});
        QCOMPARE(five[0].v[1], valueFor(5, 0));
        QCOMPARE(five[0].nulls, uint64_t{0b11000}); // c and d
        QCOMPARE(five[0].v[3], int64_t{0});         // a NULL reads 0, as sqlite3_value_int64
        const auto late = readAll(db, 15001, 15001, RowReading::Pages);
        QCOMPARE(late[0].v[4], int64_t{45003});
        QCOMPARE(late[0].nulls, uint64_t{0});
        // Columns in another order, the rowid by name, a subset.
        RowReadCounts c;
        QVERIFY(readAll(db, 0, 900, RowReading::Pages, &c, "c, rowid, a") ==
                readAll(db, 0, 900, RowReading::Sqlite, nullptr, "c, rowid, a"));
        QCOMPARE(c.fromPages, int64_t{901});
    }

    // Values that are not integers, and a record too long for its page, are SQLite's to read
    // (it converts a real or a text as sqlite3_value_int64 does); the rest stays on the pages.
    void rowsPagesDoNotDecodeAreSqlites()
    {
        const std::string f = makeTable("odd.db", 4096, 0);
        {
            Db w(f, SQLITE_OPEN_READWRITE);
            w.exec("UPDATE t SET a = 2.5 WHERE id = 100");            // a real
            w.exec("UPDATE t SET b = '77x' WHERE id = 200");          // a text: 77
            w.exec("UPDATE t SET c = zeroblob(9000) WHERE id = 300"); // spills onto overflow pages
            w.exec("UPDATE t SET c = 1e300 WHERE id = 400");
        }
        Db db(f, SQLITE_OPEN_READONLY);
        RowReadCounts pages;
        const auto a = readAll(db, kMin, kMax, RowReading::Pages, &pages);
        const auto b = readAll(db, kMin, kMax, RowReading::Sqlite);
        QVERIFY(a == b);
        QCOMPARE(a[600].v[1], int64_t{2});  // id 100: 2.5 as an integer
        QCOMPARE(a[700].v[2], int64_t{77}); // id 200
        QCOMPARE(pages.bySqlite, int64_t{4});
        QCOMPARE(pages.fromPages, int64_t{20000 - 4});
        // Stopping on a row SQLite reads stops there.
        int seen = 0;
        const int64_t n =
            store::visitTableRows(db, "t", kColumns, 250, kMax, [&](const RowValues& v) {
                ++seen;
                return v.i64(0) != 300;
            });
        QCOMPARE(seen, 51);
        QCOMPARE(n, int64_t{51});
    }

    // The visitor stops the read (its row counted) or throws through it; the connection reads on.
    void visitorStopsAndThrows()
    {
        const std::string f = makeTable("stop.db", 1024, 0);
        Db db(f, SQLITE_OPEN_READONLY);
        int seen = 0;
        QCOMPARE(store::visitTableRows(db, "t", kColumns, kMin, kMax,
                                       [&](const RowValues&) { return ++seen < 3000; }),
                 int64_t{3000});
        QCOMPARE(seen, 3000);
        bool thrown = false;
        try {
            store::visitTableRows(db, "t", kColumns, kMin, kMax, [](const RowValues& v) {
                if (v.i64(0) == 4000) throw SessionError("x", "visitor failed");
                return true;
            });
        } catch (const SessionError& e) {
            thrown = QString::fromUtf8(e.what()).contains("visitor failed");
        }
        QVERIFY(thrown);
        RowReadCounts c;
        QCOMPARE(readAll(db, kMin, kMax, RowReading::Pages, &c).size(), size_t{20000});
        QCOMPARE(c.fromPages, int64_t{20000});
    }

    // Where the file's pages are not the table (frames in a write-ahead log; a column whose
    // rows may omit a default), every row is SQLite's, and the values are the current ones.
    void pagesNotTheWholeTruthLeaveItToSqlite()
    {
        const std::string f = makeTable("wal.db", 4096, 0);
        Db w(f, SQLITE_OPEN_READWRITE);
        w.exec("PRAGMA journal_mode=WAL");
        w.exec("PRAGMA wal_autocheckpoint=0");
        w.exec("UPDATE t SET a = -42 WHERE id = 10"); // only in the log
        {
            Db db(f, SQLITE_OPEN_READONLY);
            RowReadCounts c;
            const auto rows = readAll(db, 0, 20, RowReading::Pages, &c);
            QCOMPARE(rows.size(), size_t{21});
            QCOMPARE(rows[10].v[1], int64_t{-42});
            QCOMPARE(c.fromPages, int64_t{0});
            QCOMPARE(c.bySqlite, int64_t{21});
        }
        w.exec("PRAGMA wal_checkpoint(TRUNCATE)"); // the log emptied into the file: pages again
        {
            Db db(f, SQLITE_OPEN_READONLY);
            RowReadCounts c;
            const auto rows = readAll(db, 0, 20, RowReading::Pages, &c);
            QCOMPARE(rows[10].v[1], int64_t{-42});
            QCOMPARE(c.fromPages, int64_t{21});
        }
        w.exec("PRAGMA journal_mode=DELETE");
        w.exec("ALTER TABLE t ADD COLUMN e INTEGER DEFAULT 9");
        Db db(f, SQLITE_OPEN_READONLY);
        RowReadCounts c;
        const auto rows = readAll(db, 0, 20, RowReading::Pages, &c, "id, e");
        QCOMPARE(rows[3].v[1], int64_t{9}); // the default, in no record
        QCOMPARE(c.fromPages, int64_t{0});
        // A generated column: where the record keeps each value is SQLite's to say.
        const std::string g = path("generated.db");
        {
            Db gw(g, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
            gw.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, x INTEGER GENERATED ALWAYS AS"
                    " (a * 2) STORED, a INTEGER, b INTEGER, c INTEGER, d INTEGER)");
            gw.exec("INSERT INTO t(id, a, b, c, d) VALUES(1, 10, 20, 30, 40), (2, 11, 21, 31, 41)");
        }
        Db gr(g, SQLITE_OPEN_READONLY);
        RowReadCounts gc;
        const auto generated = readAll(gr, kMin, kMax, RowReading::Pages, &gc, "id, x, a, d");
        QCOMPARE(generated.size(), size_t{2});
        QCOMPARE(generated[1].v, (std::vector<int64_t>{2, 22, 11, 41}));
        QCOMPARE(gc.fromPages, int64_t{0});
    }

    // Damage anywhere in the table's pages never crashes or hangs the read, which then ends in
    // rows or a SessionError. Where the damage leaves a sound b-tree (integrity_check passes: a
    // value's bytes, unused space), the rows are SQLite's. Where it does not (keys out of order,
    // cells overlapping), SQLite may itself read rows that are not the table's, and which ones
    // depends on how a reader walks the tree: no comparison holds there.
    void damagedPagesNeverCrashTheRead()
    {
        const std::string f = makeTable("damage.db", 1024, 0);
        QFile in(QString::fromStdString(f));
        QVERIFY(in.open(QIODevice::ReadOnly));
        const QByteArray clean = in.readAll();
        in.close();
        const std::string g = path("damaged.db");
        std::mt19937 rng(7);
        int sound = 0, broken = 0;
        for (int round = 0; round < 300; ++round) {
            QByteArray bytes = clean;
            // 1-4 bytes past the schema's page, often in page headers and cell pointers.
            const int flips = 1 + static_cast<int>(rng() % 4);
            for (int k = 0; k < flips; ++k) {
                const auto page = 2 + rng() % (bytes.size() / 1024 - 2);
                const auto at = rng() % 3 == 0 ? rng() % 24 : rng() % 1024;
                bytes[static_cast<qsizetype>(page * 1024 + at)] = static_cast<char>(rng());
            }
            QFile out(QString::fromStdString(g));
            QVERIFY(out.open(QIODevice::WriteOnly | QIODevice::Truncate));
            out.write(bytes);
            out.close();
            bool intact = false;
            try {
                Db db(g, SQLITE_OPEN_READONLY);
                intact = db.scalarText("PRAGMA integrity_check") == "ok";
            } catch (const SessionError&) {
            }
            std::vector<Row> byPages, bySqlite;
            try {
                Db db(g, SQLITE_OPEN_READONLY);
                byPages = readAll(db, kMin, kMax, RowReading::Pages);
            } catch (const SessionError&) {
                QVERIFY2(!intact, qPrintable(QStringLiteral("round %1: sound file").arg(round)));
            }
            if (!intact) {
                ++broken;
                continue;
            }
            Db db(g, SQLITE_OPEN_READONLY);
            bySqlite = readAll(db, kMin, kMax, RowReading::Sqlite);
            QVERIFY2(byPages == bySqlite, qPrintable(QStringLiteral("round %1").arg(round)));
            ++sound;
        }
        // Both kinds of damage happened (a test that never compared would prove nothing).
        QVERIFY2(sound > 20 && broken > 20,
                 qPrintable(QStringLiteral("%1 sound, %2 broken").arg(sound).arg(broken)));
    }
};

QTEST_GUILESS_MAIN(TableScanTest)
#include "tst_table_scan.moc"
