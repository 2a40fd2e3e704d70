// The fragscope CLI front end: help, version, exit codes, info on good and bad files.
#include "sessionbuilder.h"
#include "testutil.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include <sqlite3.h>

using fstest::runCli;

class TstCli : public QObject
{
    Q_OBJECT
private:
    QTemporaryDir dir_;

private slots:
    void helpListsCommands()
    {
        const auto r = runCli({"--help"});
        QCOMPARE(r.exitCode, 0);
        QVERIFY(r.out.contains("Commands:"));
        QVERIFY(r.out.contains("  info "));
        const auto none = runCli({});
        QCOMPARE(none.exitCode, 64);
    }

    void everyCommandHasHelp()
    {
        const auto r = runCli({"--help"});
        int commands = 0;
        bool inList = false;
        for (const QByteArray& line : r.out.split('\n')) {
            if (line.startsWith("Commands:")) {
                inList = true;
                continue;
            }
            if (!inList || !line.startsWith("  ")) continue;
            const QString name = QString::fromUtf8(line.mid(2, 18)).trimmed();
            const auto h = runCli(
                {name.split(' ')[0], name.contains(' ') ? name.split(' ')[1] : "--help", "--help"});
            QVERIFY2(h.exitCode == 0, qPrintable(name));
            QVERIFY2(h.out.startsWith("Usage: fragscope "), qPrintable(name + ": " + h.out));
            ++commands;
        }
        QVERIFY(commands >= 1);
    }

    void versionNamesLibraries()
    {
        const auto r = runCli({"--version"});
        QCOMPARE(r.exitCode, 0);
        for (const char* lib :
             {"fragscope ", "session format 1", "Qt ", "SQLite ", "fmt ", "CUPTI "})
            QVERIFY2(r.out.contains(lib), lib);
    }

    // The CLI never restarts itself (it did once, for huge pages: README.md "Huge pages"): a
    // command it runs sees the environment it was given, and --version says nothing of huge
    // pages, which it does not know.
    void keepsTheEnvironmentAndItsName()
    {
        const auto v = runCli({"--version"});
        QVERIFY2(!v.out.contains("huge pages"), v.out.constData());
        bool canRecord = false;
        for (const QByteArray& line : runCli({"--help"}).out.split('\n'))
            canRecord |= line.startsWith("  record ") && !line.contains("not in this build");
        if (!canRecord)
            QSKIP("this build has no capture (record): the child's environment is not checked");
        QFile big(dir_.path() + "/big.fragscope"); // sparse: 64 MiB made the old CLI restart
        QVERIFY(big.open(QIODevice::WriteOnly) && big.resize(64 << 20));
        big.close();
        QProcessEnvironment given;
        given.insert("GLIBC_TUNABLES", "glibc.malloc.check=0");
        const auto child = fstest::runCliIn(
            {},
            {"record", "-o", dir_.path() + "/env.fragscope", "--", "sh", "-c",
             "echo \"child [$GLIBC_TUNABLES] [$FRAGSCOPE_SAVED_GLIBC_TUNABLES]\"", big.fileName()},
            given);
        QVERIFY2(child.out.contains("child [glibc.malloc.check=0] []"),
                 (child.out + child.err).constData());
    }

    void usageErrors()
    {
        QCOMPARE(runCli({"no-such-command"}).exitCode, 64);
        QCOMPARE(runCli({"info"}).exitCode, 64);
        QCOMPARE(runCli({"info", "--bogus", "x"}).exitCode, 64);
    }

    void infoJson()
    {
        QVERIFY(dir_.isValid());
        const std::string f = (dir_.path() + "/s.fragscope").toStdString();
        fstest::writeSmallSession(f, 10);
        const auto r = runCli({"info", "--json", QString::fromStdString(f)});
        QCOMPARE(r.exitCode, 0);
        QJsonParseError err{};
        const QJsonObject o = QJsonDocument::fromJson(r.out, &err).object();
        QCOMPARE(err.error, QJsonParseError::NoError);
        QCOMPARE(o["format_version"].toInt(), 1);
        QCOMPARE(o["synthetic"].toBool(), false);
        QCOMPARE(o["sources"].toArray().first().toString(), QString("test"));
        QCOMPARE(o["devices"].toArray().first().toObject()["name"].toString(), QString("Test GPU"));
        QCOMPARE(o["regions"].toInteger(), 1);
        QCOMPARE(o["allocations"].toInteger(), 10);
        QCOMPARE(o["events"].toInteger(), 21);
        QCOMPARE(o["time_span_ns"].toInteger(), 10 + 2 * 9 + 1);
        for (const char* k : {"kernels", "graph_launches", "frames"})
            QCOMPARE(o[k].toInteger(), 0);
        const QJsonObject h = o["health"].toObject();
        QCOMPARE(h["dropped_records"].toInteger(), 0);
        QCOMPARE(h["ended_abruptly"].toBool(), false);
        QVERIFY(h["anomalies"].toObject().isEmpty());
        const auto text = runCli({"info", QString::fromStdString(f)});
        QCOMPARE(text.exitCode, 0);
        QVERIFY(text.out.contains("allocations   10"));
    }

    // The engine's whole open over rows read from the tables' pages (store::visitTableRows) and
    // over rows read by SQLite alone (FRAGSCOPE_SQLITE_ROWS=1): the same state and collapse, on
    // two copies of an un-indexed simulated session (each open stores its own index).
    void pageReaderAndSqliteAgreeEndToEnd()
    {
        QVERIFY(dir_.isValid());
        const QString f = dir_.path() + "/rows.fragscope";
        QCOMPARE(runCli({"simulate", "--events", "60000", "--seed", "4", "--no-index", "-o", f})
                     .exitCode,
                 0);
        const QString a = dir_.path() + "/rows-a.fragscope", b = dir_.path() + "/rows-b.fragscope";
        QVERIFY(QFile::copy(f, a) && QFile::copy(f, b));
        QProcessEnvironment sqlite;
        sqlite.insert("FRAGSCOPE_SQLITE_ROWS", "1");
        for (const QStringList& args : {QStringList{"state", "--at", "end", "--json"},
                                        QStringList{"collapse", "--frame", "20", "--any"}}) {
            const auto pages = runCli(QStringList{args[0], a} + args.mid(1));
            const auto bySqlite =
                fstest::runCliIn({}, QStringList{args[0], b} + args.mid(1), sqlite);
            QCOMPARE(pages.exitCode, 0);
            QCOMPARE(bySqlite.exitCode, 0);
            QVERIFY(pages.out.size() > 100);
            QCOMPARE(QByteArray(pages.out).replace(a.toUtf8(), "S"),
                     QByteArray(bySqlite.out).replace(b.toUtf8(), "S"));
        }
    }

    void smallThingsANewUserTripsOn()
    {
        QVERIFY(dir_.isValid());
        const QString f = dir_.path() + "/t.fragscope";
        fstest::writeSmallSession(f.toStdString(), 10); // spans 29 ns (infoJson)
        // A time after the session's end is a usage error that names the span.
        auto r = runCli({"state", f, "--at", "99999s"});
        QCOMPARE(r.exitCode, 64);
        QVERIFY2(r.err.contains("outside the session"), r.err.constData());
        QCOMPARE(runCli({"state", f, "--at", "end"}).exitCode, 0);
        // An image format export does not know is a usage error (64), not a failure.
        r = runCli({"export", "heatmap", f, "-o", dir_.path() + "/x.bmp"});
        QCOMPARE(r.exitCode, 64);
        QVERIFY2(r.err.contains(".png, .svg or .pdf"), r.err.constData());
        // Exporting without XDG_RUNTIME_DIR prints no Qt warning about it.
        QProcess p;
        auto env = QProcessEnvironment::systemEnvironment();
        env.remove("XDG_RUNTIME_DIR");
        env.insert("FRAGSCOPE_NO_PROGRESS", "1");
        p.setProcessEnvironment(env);
        p.start(QStringLiteral(FRAGSCOPE_CLI),
                {"export", "heatmap", f, "-o", dir_.path() + "/x.png"});
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 0);
        const QByteArray err = p.readAllStandardError();
        QVERIFY2(!err.contains("XDG_RUNTIME_DIR"), err.constData());
        QVERIFY(QFileInfo(dir_.path() + "/x.png").size() > 0);
    }

    // Another tool's trace where a session is expected (issue 50 item 6): every command that
    // opens a session (Session::open, the one place) names what the file is and the import
    // command, with the output name made from the input's, instead of "not an SQLite database".
    void otherToolsTracesSayHowToImport_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QByteArray>("content");
        QTest::addColumn<QString>("kind");
        QTest::addColumn<QString>("output");
        // A pickle starts with PROTO (0x80) and its protocol: this is `pickle.dumps({}, 4)`.
        QTest::newRow("pickle") << "run.pickle" << QByteArray("\x80\x04}\x94.", 5)
                                << "a PyTorch allocator snapshot (pickle), not a fragscope session"
                                << "run.fragscope";
        QTest::newRow("kineto") << "trace.json"
                                << QByteArray("{\"traceEvents\": [{\"ph\": \"X\", \"ts\": 1}]}")
                                << "a Kineto / Chrome trace (JSON), not a fragscope session"
                                << "trace.fragscope";
        QTest::newRow("nsys") << "profile.sqlite" << QByteArray()
                              << "an Nsight Systems SQLite export, not a fragscope session"
                              << "profile.fragscope";
    }
    void otherToolsTracesSayHowToImport()
    {
        QFETCH(QString, name);
        QFETCH(QByteArray, content);
        QFETCH(QString, kind);
        QFETCH(QString, output);
        const QString f = dir_.path() + "/" + name;
        QFile::remove(f);
        if (content.isEmpty()) { // an nsys export: SQLite with nsys's tables, no application id
            sqlite3* db = nullptr;
            QCOMPARE(sqlite3_open(f.toUtf8().constData(), &db), SQLITE_OK);
            QCOMPARE(sqlite3_exec(db, "CREATE TABLE StringIds (id INTEGER, value TEXT)", nullptr,
                                  nullptr, nullptr),
                     SQLITE_OK);
            sqlite3_close(db);
        } else {
            QFile q(f);
            QVERIFY(q.open(QIODevice::WriteOnly));
            q.write(content);
        }
        const QByteArray import = ("run `fragscope import " + f + " -o " + output + "`")
                                      .toUtf8(); // in the current folder
        for (const QStringList& args :
             {QStringList{"info", f}, QStringList{"report", f},
              QStringList{"state", f, "--at", "end"}, QStringList{"whatif", f},
              QStringList{"collapse", f, "--frame", "0"}, QStringList{"compare", f, f}}) {
            const auto r = runCli(args);
            const QByteArray what = args.join(' ').toUtf8() + ": " + r.err;
            QCOMPARE(r.exitCode, 2);
            QVERIFY2(r.err.contains(kind.toUtf8()), what.constData());
            QVERIFY2(r.err.contains(import), what.constData());
            QVERIFY2(r.err.contains("(or open it directly with fragscope-gui)"), what.constData());
            QVERIFY2(!r.err.contains("not an SQLite database"), what.constData());
            QCOMPARE(r.err.count('\n'), 1);
        }
    }

    // A JSON file that is no trace (per-frame metrics, say): both ways in are named.
    void jsonThatIsNoTraceNamesBothImports()
    {
        const QString f = dir_.path() + "/metrics.json";
        QFile q(f);
        QVERIFY(q.open(QIODevice::WriteOnly | QIODevice::Truncate));
        q.write("{\"frames\": [{\"coherence_score\": 0.124}]}");
        q.close();
        const auto r = runCli({"report", f});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains("a JSON file, not a fragscope session"), r.err.constData());
        QVERIFY2(r.err.contains("fragscope metrics import SESSION " + f.toUtf8()),
                 r.err.constData());
        // A file of none of these kinds still says what it is not.
        QVERIFY(q.open(QIODevice::WriteOnly | QIODevice::Truncate));
        q.write("hello\n");
        q.close();
        QVERIFY(runCli({"report", f}).err.contains("not a fragscope session (not an SQLite"));
    }

    void badFilesExitTwo_data()
    {
        QTest::addColumn<QByteArray>("content");
        QTest::newRow("text") << QByteArray("hello\n");
        QTest::newRow("empty") << QByteArray();
    }
    void badFilesExitTwo()
    {
        QFETCH(QByteArray, content);
        const QString f = dir_.path() + "/bad.fragscope";
        QFile q(f);
        QVERIFY(q.open(QIODevice::WriteOnly | QIODevice::Truncate));
        q.write(content);
        q.close();
        const auto r = runCli({"info", f});
        QCOMPARE(r.exitCode, 2);
        QVERIFY(r.err.contains(f.toUtf8()));
        QCOMPARE(r.err.count('\n'), 1);
    }
};

QTEST_GUILESS_MAIN(TstCli)
#include "tst_cli.moc"
