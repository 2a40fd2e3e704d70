// Progress lines of long CLI commands: drawn on stderr when it is a terminal (run here under a
// pseudo-terminal), silenced by --quiet, absent when stderr is a pipe, forced by
// FRAGSCOPE_PROGRESS=1.
#include "../analysis/builder.h"
#include "testutil.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

using fstest::runCli;

namespace {

struct PtyResult
{
    int exitCode = -1;
    QByteArray output; // stdout and stderr together, as a terminal shows them
};

// Runs the CLI with its stdin, stdout and stderr on a fresh pseudo-terminal.
PtyResult runOnPty(const QStringList& args)
{
    std::vector<QByteArray> store{QByteArray(FRAGSCOPE_CLI)};
    for (const QString& a : args)
        store.push_back(a.toLocal8Bit());
    std::vector<char*> argv;
    for (auto& s : store)
        argv.push_back(s.data());
    argv.push_back(nullptr);
    int master = -1;
    const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
    if (pid < 0) return {};
    if (pid == 0) {
        ::unsetenv("FRAGSCOPE_NO_PROGRESS");
        ::unsetenv("FRAGSCOPE_PROGRESS");
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    PtyResult r;
    char buf[4096];
    for (;;) {
        pollfd p{master, POLLIN, 0};
        if (::poll(&p, 1, 60000) <= 0) break; // the command hangs: give up, the test fails
        const ssize_t n = ::read(master, buf, sizeof buf);
        if (n <= 0) break; // EIO once the child has exited and the terminal is closed
        r.output.append(buf, n);
    }
    ::close(master);
    int status = 0;
    if (::waitpid(pid, &status, 0) == pid && WIFEXITED(status)) r.exitCode = WEXITSTATUS(status);
    return r;
}

} // namespace

class TstCliProgress : public QObject
{
    Q_OBJECT
private:
    QTemporaryDir dir_;
    QString session_;

private slots:
    void initTestCase()
    {
        QVERIFY(dir_.isValid());
        using namespace antest;
        session_ = dir_.path() + "/p.fragscope";
        fs::Ingest in(options(session_.toStdString()));
        in.begin();
        in.add(ev(fs::EventType::RegionCreate, 0, kBase, MiB));
        mark(in, 100, "frame 0");
        in.add(ev(fs::EventType::Alloc, 110, kBase, 256 * KiB));
        mark(in, 200, "frame 1");
        in.add(ev(fs::EventType::Free, 210, kBase));
        mark(in, 300, "end");
        in.end();
    }

    void terminalShowsProgress_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("label");
        QTest::newRow("state") << QStringList{"state", "S", "--at", "end"}
                               << "analysing p.fragscope";
        QTest::newRow("report") << QStringList{"report", "S"} << "analysing p.fragscope";
        QTest::newRow("export timeline csv")
            << QStringList{"export", "timeline", "S", "-o", "OUT.csv"} << "analysing p.fragscope";
        QTest::newRow("export image")
            << QStringList{"export", "timeline", "S", "-o", "OUT.png"} << "loading p.fragscope";
        QTest::newRow("collapse") << QStringList{"collapse", "S", "--frame", "1", "--any"}
                                  << "analysing p.fragscope";
    }

    void terminalShowsProgress()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, label);
        args.replaceInStrings(QRegularExpression("^S$"), session_);
        args.replaceInStrings(QRegularExpression("^OUT"), dir_.path() + "/out");
        const PtyResult on = runOnPty(args);
        QCOMPARE(on.exitCode, 0);
        // The line is drawn with a carriage return and erased again when the work is done.
        QVERIFY2(on.output.contains("\r" + label.toUtf8() + ":"), on.output.constData());
        QVERIFY(on.output.contains("\r\033[K"));

        const PtyResult quiet = runOnPty(args + QStringList{"--quiet"});
        QCOMPARE(quiet.exitCode, 0);
        QVERIFY2(!quiet.output.contains(label.toUtf8()), quiet.output.constData());
    }

    void pipeHasNoProgressUnlessForced()
    {
        QProcess p;
        auto env = QProcessEnvironment::systemEnvironment();
        env.remove("FRAGSCOPE_NO_PROGRESS");
        p.setProcessEnvironment(env);
        p.start(FRAGSCOPE_CLI, {"state", session_, "--at", "end"});
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 0);
        QVERIFY(!p.readAllStandardError().contains("analysing"));

        env.insert("FRAGSCOPE_PROGRESS", "1");
        p.setProcessEnvironment(env);
        p.start(FRAGSCOPE_CLI, {"state", session_, "--at", "end"});
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 0);
        QVERIFY(p.readAllStandardError().contains("\ranalysing p.fragscope:"));

        p.start(FRAGSCOPE_CLI, {"state", session_, "--at", "end", "--quiet"});
        QVERIFY(p.waitForFinished(60000));
        QVERIFY(!p.readAllStandardError().contains("analysing"));
    }

    void importShowsProgress()
    {
        // A Kineto trace with one memory event (the importer's own progress lines).
        const QString trace = dir_.path() + "/t.json";
        QFile f(trace);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(R"({"traceEvents":[{"ph":"i","name":"[memory]","ts":1,"pid":1,"tid":1,)"
                R"("args":{"Addr":4096,"Bytes":512,"Total Allocated":512,"Device Id":0,)"
                R"("Device Type":1}}]})");
        f.close();
        const QString out = dir_.path() + "/t.fragscope";
        const PtyResult on = runOnPty({"import", trace, "-o", out});
        QVERIFY2(on.exitCode == 0, on.output.constData());
        QVERIFY2(on.output.contains("\rreading t.json:"), on.output.constData());
        const PtyResult quiet = runOnPty({"import", trace, "-o", out, "--quiet"});
        QCOMPARE(quiet.exitCode, 0);
        QVERIFY(!quiet.output.contains("reading t.json"));
    }
};

QTEST_GUILESS_MAIN(TstCliProgress)
#include "tst_cli_progress.moc"
