// Helpers shared by the Qt Test suites: run the CLI, find the real-data folder.
#pragma once

#include <QByteArray>
#include <QDebug>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
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

// Runs the built `fragscope` binary with args (in folder dir when given, with env added to the
// environment); fails the test if it does not finish in time.
inline CliResult runCliIn(const QString& dir, const QStringList& args,
                          const QProcessEnvironment& env = {}, int timeoutMs = 120000)
{
    QProcess p;
    auto all = QProcessEnvironment::systemEnvironment();
    all.insert("FRAGSCOPE_NO_PROGRESS", "1");
    all.insert(env);
    p.setProcessEnvironment(all);
    if (!dir.isEmpty()) p.setWorkingDirectory(dir);
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

inline CliResult runCli(const QStringList& args, int timeoutMs = 120000)
{
    return runCliIn({}, args, {}, timeoutMs);
}

// The CLI's --json output as an object; an output that does not parse is reported (the test's
// comparisons then fail on the empty object).
inline QJsonObject cliJson(const CliResult& r)
{
    QJsonParseError err{};
    const auto doc = QJsonDocument::fromJson(r.out, &err);
    if (err.error != QJsonParseError::NoError)
        qWarning() << "bad JSON:" << err.errorString() << r.out.left(400) << r.err;
    return doc.object();
}

// Writes the generated PyTorch-format snapshots (tests/import/gen_snapshot_fixtures.py: standard
// library only) into dir. Returns what went wrong, empty on success.
inline QString writeSnapshotFixtures(const QString& dir)
{
    QProcess py;
    py.start(
        "python3",
        {QStringLiteral(FRAGSCOPE_SOURCE_DIR) + "/tests/import/gen_snapshot_fixtures.py", dir});
    if (!py.waitForFinished(60000)) return QStringLiteral("python3 did not finish");
    if (py.exitStatus() != QProcess::NormalExit || py.exitCode() != 0)
        return QStringLiteral("gen_snapshot_fixtures.py failed: ") +
               QString::fromLocal8Bit(py.readAllStandardError());
    return {};
}

// The folder of real public traces ($FRAGSCOPE_DATA, else ../shared/data beside the source tree).
inline QString dataDir()
{
    const QByteArray env = qgetenv("FRAGSCOPE_DATA");
    return env.isEmpty() ? QStringLiteral(FRAGSCOPE_DEFAULT_DATA) : QString::fromLocal8Bit(env);
}

// Whether the real-data file or folder `rel` (relative to dataDir()) exists; otherwise the reason,
// naming FRAGSCOPE_DATA, for FSTEST_REQUIRE_DATA.
inline QString missingData(const QString& rel)
{
    const QString p = dataDir() + "/" + rel;
    if (QFileInfo::exists(p)) return {};
    return "real-data " + p +
           " not found: set FRAGSCOPE_DATA to the folder of real public traces "
           "(shared/data beside our checkouts; see README, 'Tests')";
}

} // namespace fstest

// Real public traces live outside the repository. A test (or its _data function) that needs
// them starts with FSTEST_REQUIRE_DATA("pytorch-snapshots"): it skips with the reason when they
// are missing, and fails instead when the CI variable is set, since CI must run every test.
#define FSTEST_REQUIRE_DATA(rel)                                                                   \
    do {                                                                                           \
        const QString why_ = fstest::missingData(rel);                                             \
        if (!why_.isEmpty()) {                                                                     \
            if (!qEnvironmentVariableIsEmpty("CI")) QFAIL(qPrintable(why_));                       \
            QSKIP(qPrintable(why_));                                                               \
        }                                                                                          \
    } while (false)
