// The agent loaded into a process that has no CUDA driver (this machine): CUDA_INJECTION64_PATH
// would never load it without libcuda, so the test dlopens it and calls InitializeInjection()
// itself, as the CUDA driver (or `fragscope attach`'s gdb) would.
#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>
#include <dlfcn.h>
#include <fcntl.h>
#include <fstream>
#include <string>
#include <unistd.h>

namespace {

int threadCount()
{
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
    return -1;
}

// Runs fn with fd 2 redirected into a file; returns what was written.
template <class F> QByteArray captureStderr(const QString& file, F fn)
{
    const int saved = ::dup(2);
    const int fd = ::open(file.toLocal8Bit().constData(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    ::dup2(fd, 2);
    fn();
    ::dup2(saved, 2);
    ::close(fd);
    ::close(saved);
    QFile f(file);
    f.open(QIODevice::ReadOnly);
    return f.readAll();
}

} // namespace

class TestCaptureAgent : public QObject
{
    Q_OBJECT
private slots:
    void exportsOnlyTheInjectionEntryPoint()
    {
        void* h = ::dlopen(FRAGSCOPE_AGENT_PATH, RTLD_NOW | RTLD_LOCAL);
        QVERIFY2(h, ::dlerror());
        QVERIFY(::dlsym(h, "InitializeInjection") != nullptr);
        // NVTX's injection entry points: the core (marks, ranges) and the extensions (memory).
        QVERIFY(::dlsym(h, "InitializeInjectionNvtx2") != nullptr);
        QVERIFY(::dlsym(h, "InitializeInjectionNvtxExtension") != nullptr);
        // Internal symbols (protocol, decode) stay hidden from the host process.
        QVERIFY(::dlsym(h, "_ZN2fs5proto7Encoder5eventERKNS0_9WireEventE") == nullptr);
    }

    void noDriverLogsOnceAndLeavesTheProcessUnharmed()
    {
        QTemporaryDir dir;
        const QByteArray sockDir = (dir.path() + "/sockets").toLocal8Bit();
        ::setenv("FRAGSCOPE_SOCKET_DIR", sockDir.constData(), 1);
        void* h = ::dlopen(FRAGSCOPE_AGENT_PATH, RTLD_NOW | RTLD_LOCAL);
        QVERIFY2(h, ::dlerror());
        auto init = reinterpret_cast<int (*)()>(::dlsym(h, "InitializeInjection"));
        QVERIFY(init);
        const int before = threadCount();
        int r1 = 0, r2 = 0;
        const QByteArray err = captureStderr(dir.path() + "/stderr", [&] {
            r1 = init();
            r2 = init(); // the driver may call it again; it must stay quiet
        });
        // The injection contract: return 1 (success) so the driver carries on regardless.
        QCOMPARE(r1, 1);
        QCOMPARE(r2, 1);
        const QList<QByteArray> lines = err.trimmed().split('\n');
        QCOMPARE(lines.size(), 1);
        QVERIFY2(lines[0].contains("agent disabled, the process continues"), err);
        QVERIFY2(lines[0].contains("CUPTI error 999"), err); // CUPTI_ERROR_UNKNOWN without a driver
        // No control socket, no threads left behind.
        QVERIFY(!QDir(QString::fromLocal8Bit(sockDir)).exists() ||
                QDir(QString::fromLocal8Bit(sockDir)).isEmpty());
        QCOMPARE(threadCount(), before);
        // And the process still works.
        std::vector<int> v(1000, 1);
        long sum = 0;
        for (int x : v)
            sum += x;
        QCOMPARE(sum, 1000L);
    }
};

QTEST_GUILESS_MAIN(TestCaptureAgent)
#include "tst_capture_agent.moc"
