// Helpers shared by the Qt Test suites: run the CLI, find the real-data folder.
#pragma once

#include <QByteArray>
#include <QProcess>
#include <QProcessEnvironment>
#include <QString>
#include <QStringList>
#include <QTest>

namespace fstest {

struct CliResult
{
    int exitCode = -1;
    QByteArray out;
    QByteArray err;
};

// Runs the built `fragscope` binary with args; fails the test if it does not finish in time.
inline CliResult runCli(const QStringList& args, int timeoutMs = 120000)
{
    QProcess p;
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("FRAGSCOPE_NO_PROGRESS", "1");
    p.setProcessEnvironment(env);
    p.start(QStringLiteral(FRAGSCOPE_CLI), args);
    CliResult r;
    if (!p.waitForFinished(timeoutMs)) {
        p.kill();
        p.waitForFinished();
        r.err = "timed out";
        return r;
    }
    r.exitCode = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = p.readAllStandardOutput();
    r.err = p.readAllStandardError();
    return r;
}

// The folder of real public traces ($FRAGSCOPE_DATA, else ../shared/data beside the source tree).
inline QString dataDir()
{
    const QByteArray env = qgetenv("FRAGSCOPE_DATA");
    return env.isEmpty() ? QStringLiteral(FRAGSCOPE_DEFAULT_DATA) : QString::fromLocal8Bit(env);
}

} // namespace fstest
