// The GUI's job tracker (views/widgets/jobs.h): which results reach the GUI thread, in each
// mode, and that cancellation and failures arrive as documented.
#include "widgets/jobs.h"

#include <QApplication>
#include <QProcess>
#include <QSemaphore>
#include <QSignalSpy>
#include <QtTest>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>

using namespace fs::views;

namespace {

// A job that waits until released, then returns its number; records that it ran and whether
// its flag was up when it ended.
struct Gate
{
    QSemaphore open;
    std::atomic<int> runs{0}, ended{0};
    std::atomic<bool> sawCancel{false};
    void pass()
    {
        ++runs;
        open.acquire();
    }
    void leave() { ++ended; }
    // Every job that passed has left (the gate and what the jobs touch outlive them).
    bool settled() const { return ended.load() == runs.load(); }
};

auto gated(Gate& g, int value)
{
    return [&g, value](const Job& job) {
        g.pass();
        if (job.cancelled()) g.sawCancel = true;
        g.leave();
        return value;
    };
}

// The child of quitWaitsForEveryJob: an application that goes away while a job runs on each
// pool, their trackers never destroyed (a window closed but not deleted when the event loop
// ended). Each job waits for its flag (20 s at most), then works on for 200 ms. Prints, per
// job, whether it saw its flag, ended, and found the application still there when it ended.
int quitWithJobsRunning(int argc, char** argv)
{
    struct Seen
    {
        std::atomic<bool> cancelled{false}, ended{false}, appThere{false};
    } seen[2];
    std::unique_ptr<JobTracker> trackers[2]; // outlive the application, as a leaked window's
    {
        QApplication app(argc, argv);
        QSemaphore started;
        QThreadPool* pools[2] = {&workerPool(), &longJobPool()};
        for (int i = 0; i < 2; ++i) {
            trackers[i] = std::make_unique<JobTracker>(nullptr, JobTracker::Mode::Serial, pools[i]);
            Seen& s = seen[i];
            trackers[i]->start([&s, &started](const Job& job) {
                started.release();
                const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
                while (!job.cancelled() && std::chrono::steady_clock::now() < give_up)
                    std::this_thread::sleep_for(std::chrono::milliseconds(1));
                s.cancelled = job.cancelled();
                std::this_thread::sleep_for(std::chrono::milliseconds(200));
                s.appThere = QCoreApplication::instance() != nullptr;
                s.ended = true;
            });
        }
        started.acquire(2);
    }
    for (const Seen& s : seen)
        std::printf("cancelled=%d ended=%d app=%d\n", int(s.cancelled.load()), int(s.ended.load()),
                    int(s.appThere.load()));
    std::fflush(stdout);
    return 0;
}

} // namespace

class TstJobs : public QObject
{
    Q_OBJECT

private slots:
    // A job still running when the application object goes away is cancelled and waited for
    // while the application is still there: left running, it drew text or freed a scene while
    // Qt tore its globals down (a crash at exit, then a hang in ASan's handler, in CI).
    void quitWaitsForEveryJob()
    {
        QProcess child;
        child.start(QCoreApplication::applicationFilePath(), {"--quit-with-jobs-running"});
        QVERIFY(child.waitForFinished(60000));
        QCOMPARE(child.exitStatus(), QProcess::NormalExit);
        QCOMPARE(child.exitCode(), 0);
        // Both jobs (workerPool, longJobPool): flag raised, ended, the application still there.
        const QByteArray want = "cancelled=1 ended=1 app=1\n";
        QCOMPARE(child.readAllStandardOutput(), want + want);
    }

    void replaceDeliversOnlyTheNewest()
    {
        // A runs; B starts at once and raises A's flag. Both run, only B (2) is delivered.
        JobTracker t(nullptr, JobTracker::Mode::Replace);
        Gate g;
        QList<int> got;
        t.start(gated(g, 1), [&](int v) { got << v; });
        t.start(gated(g, 2), [&](int v) { got << v; });
        QTRY_COMPARE(g.runs.load(), 2);
        g.open.release(2);
        QTRY_VERIFY(g.settled() && !t.busy());
        QTest::qWait(20); // A's hand-over, queued after B's, has had its turn too
        QCOMPARE(got, QList<int>{2});
        QVERIFY(g.sawCancel);
    }

    void serialRunsTheNewestWaitingJobOnly()
    {
        // A runs; B then C wait, C replacing B: B never runs. A's result is dropped (a newer
        // one waited), C's (3) delivered.
        JobTracker t(nullptr, JobTracker::Mode::Serial);
        Gate g;
        QList<int> got;
        t.start(gated(g, 1), [&](int v) { got << v; });
        QTRY_COMPARE(g.runs.load(), 1);
        t.start(gated(g, 2), [&](int v) { got << v; });
        t.start(gated(g, 3), [&](int v) { got << v; });
        QVERIFY(t.busy());
        g.open.release(1); // A ends; C starts
        QTRY_COMPARE(g.runs.load(), 2);
        g.open.release(1);
        QTRY_VERIFY(g.settled() && !t.busy());
        QCOMPARE(got, QList<int>{3});
        QCOMPARE(g.runs.load(), 2);
    }

    void followDeliversEveryJobThatRan()
    {
        // As Serial, but A's result (1) is shown on the way to C's (3); B never runs.
        JobTracker t(nullptr, JobTracker::Mode::Follow);
        Gate g;
        QList<int> got;
        QList<bool> supersededAtDelivery;
        auto done = [&](int v) {
            got << v;
            supersededAtDelivery << t.superseded();
        };
        t.start(gated(g, 1), done);
        QTRY_COMPARE(g.runs.load(), 1);
        t.start(gated(g, 2), done);
        t.start(gated(g, 3), done);
        g.open.release(1);
        QTRY_COMPARE(g.runs.load(), 2);
        g.open.release(1);
        QTRY_VERIFY(g.settled() && !t.busy());
        QCOMPARE(got, (QList<int>{1, 3}));
        // A was delivered while newer work was asked for; C was the newest.
        QCOMPARE(supersededAtDelivery, (QList<bool>{true, false}));
        QVERIFY(g.sawCancel); // A's flag went up when C queued: it may cut its work short
    }

    void cancelDropsEverything()
    {
        // Follow delivers superseded jobs, but not cancelled ones; nor their posts.
        JobTracker t(nullptr, JobTracker::Mode::Follow);
        Gate g;
        QList<int> got;
        int posts = 0;
        std::atomic<bool> secondRan{false};
        t.start(
            [&g, &posts](const Job& job) {
                g.pass();
                job.post([&posts] { ++posts; });
                g.leave();
                return 7;
            },
            [&](int v) { got << v; });
        t.start([&secondRan](const Job&) { secondRan = true; }); // waits
        t.cancel();
        QTRY_COMPARE(g.runs.load(), 1);
        g.open.release(1);
        QTRY_VERIFY(g.settled() && !t.busy());
        QTest::qWait(20);
        QVERIFY(got.isEmpty());
        QCOMPARE(posts, 0);
        QVERIFY(!secondRan); // the waiting job was dropped unrun
        // The tracker works on after a cancel.
        t.start([](const Job&) { return 8; }, [&](int v) { got << v; });
        QTRY_COMPARE(got, QList<int>{8});
    }

    void failuresReachTheCallerUnlessCancelled()
    {
        JobTracker t(nullptr);
        QString why;
        bool delivered = false;
        t.start([](const Job&) -> int { throw std::runtime_error("boom"); },
                [&](int) { delivered = true; }, [&](const QString& m) { why = m; });
        QTRY_COMPARE(why, QStringLiteral("boom"));
        QVERIFY(!delivered);
        // Without a callback: the failed signal.
        QSignalSpy failed(&t, &JobTracker::failed);
        t.start([](const Job&) -> int { throw std::runtime_error("bang"); }, [](int) {});
        QTRY_COMPARE(failed.count(), 1);
        QCOMPARE(failed.front().front().toString(), QStringLiteral("bang"));
        // A cancelled job's exception (core's Cancelled) is not news.
        Gate g;
        t.start(
            [&g](const Job& job) -> int {
                g.pass();
                g.leave();
                if (job.cancelled()) throw std::runtime_error("cancelled");
                return 1;
            },
            [](int) {});
        t.cancel();
        QTRY_COMPARE(g.runs.load(), 1);
        g.open.release(1);
        QTRY_VERIFY(g.settled() && !t.busy());
        QTest::qWait(20);
        QCOMPARE(failed.count(), 1);
    }

    void progressAndPostsComeFromTheNewestJobOnly()
    {
        // A reports 10 % after B started: dropped. B's 50 % and its staged post arrive, the
        // post before the result.
        JobTracker t(nullptr, JobTracker::Mode::Replace);
        QSignalSpy progress(&t, &JobTracker::progress);
        Gate g;
        QStringList order;
        t.start([&g](const Job& job) {
            g.pass();
            job.progress(10, QStringLiteral("old"));
            g.leave();
        });
        t.start(
            [](const Job& job) {
                job.progress(50, QStringLiteral("new"));
                return 2;
            },
            [&](int) { order << QStringLiteral("result"); });
        t.start(
            [&order](const Job& job) { job.post([&order] { order << QStringLiteral("post"); }); });
        QTRY_COMPARE(order, QStringList{QStringLiteral("post")}); // only the newest delivers
        QTRY_COMPARE(g.runs.load(), 1);
        g.open.release(1);
        QTRY_VERIFY(g.settled() && !t.busy());
        QTest::qWait(20);
        QCOMPARE(progress.count(), 0); // A and B were superseded when they reported
        // One job: its progress, then its post, then its result, in that order.
        order.clear();
        connect(&t, &JobTracker::progress, this, [&] { order << QStringLiteral("progress"); });
        t.start(
            [&order](const Job& job) {
                job.progress(50, QStringLiteral("reading"));
                job.post([&order] { order << QStringLiteral("post"); });
                return 1;
            },
            [&](int) { order << QStringLiteral("result"); });
        QTRY_COMPARE(order, (QStringList{QStringLiteral("progress"), QStringLiteral("post"),
                                         QStringLiteral("result")}));
        QCOMPARE(progress.count(), 1);
        QCOMPARE(progress.front().at(0).toInt(), 50);
        QCOMPARE(progress.front().at(1).toString(), QStringLiteral("reading"));
    }
};

int main(int argc, char** argv)
{
    if (argc > 1 && std::strcmp(argv[1], "--quit-with-jobs-running") == 0)
        return quitWithJobsRunning(1, argv);
    QApplication app(argc, argv);
    TstJobs tc;
    return QTest::qExec(&tc, argc, argv);
}
#include "tst_jobs.moc"
