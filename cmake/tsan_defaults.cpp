// Compiled into every fragscope target of a ThreadSanitizer build (FRAGSCOPE_TSAN, the tsan
// preset), never into a release: its defaults for our binaries. TSAN_OPTIONS set by the user
// still overrides these.
//
// die_after_fork=0: the tests start the CLI through QProcess from a process that already has
// threads (Qt's, the pools'); the child only calls exec, which TSan's default refuses to allow.
// halt_on_error=1: a race ends the test there, with its report, instead of a later failure.
extern "C" __attribute__((visibility("default"), used)) const char* __tsan_default_options()
{
    return "die_after_fork=0:halt_on_error=1:second_deadlock_stack=1";
}

// Races TSan reports inside Qt's own, uninstrumented code (Debian's Qt is not built with TSan, so
// the happens-before its futex-based wait conditions give is invisible): each wait-condition line
// names a Qt function, never one of ours, and the test harness (libQt6Test: its watchdog thread)
// is left out as a library, so a race in our code is still reported. QThreadPool hands a task to
// a pool thread under its QMutex (futex-based, as invisible): the task (QRunnable::create) and
// its queue entry (QThreadPoolPrivate::enqueueTask), written by the thread that starts it and
// read or freed by the pool thread, were reported as races in most runs of tst_jobs under load
// (4 at once: 57 of 100 runs), with Qt's own frame on the writing side.
extern "C" __attribute__((visibility("default"), used)) const char* __tsan_default_suppressions()
{
    return "race:QWaitCondition::~QWaitCondition\n"
           "race:QWaitCondition::wakeAll\n"
           "race:QWaitCondition::wakeOne\n"
           "race:QThreadPoolPrivate::enqueueTask\n"
           "race:QRunnable::create\n"
           "called_from_lib:libQt6Test.so.6\n";
}
