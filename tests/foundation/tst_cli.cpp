// The fragscope CLI front end: help, version, exit codes, info on good and bad files.
#include "sessionbuilder.h"
#include "testutil.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

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
