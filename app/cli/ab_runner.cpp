#include "ab_runner.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <string_view>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace fs::cli {

namespace {

int shellStatus(int status)
{
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 1;
}

// The environment the command runs with: ours with o.env set on top, built before the fork (the
// child may call only async-signal-safe functions, and setenv allocates).
std::vector<std::string> childEnvironment(const ChildOptions& o)
{
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
        const std::string_view kv(*e);
        const std::string_view key = kv.substr(0, kv.find('='));
        bool replaced = false;
        for (const auto& [k, v] : o.env)
            replaced = replaced || key == k;
        if (!replaced) env.emplace_back(kv);
    }
    for (const auto& [k, v] : o.env)
        env.push_back(k + "=" + v);
    return env;
}

// In the child, between fork and exec: only async-signal-safe calls.
[[noreturn]] void execChild(const std::vector<char*>& argv, const std::vector<char*>& envp, int out,
                            int err)
{
    ::setpgid(0, 0);
    struct sigaction dfl
    {
    };
    dfl.sa_handler = SIG_DFL;
    ::sigaction(SIGINT, &dfl, nullptr);
    ::sigaction(SIGTERM, &dfl, nullptr);
    const int in = ::open("/dev/null", O_RDONLY);
    if (in >= 0) ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::execvpe(argv[0], argv.data(), envp.data());
    const int e = errno;
    const char* what = e == ENOENT ? ": command not found\n" : ": cannot execute: ";
    (void)!::write(2, argv[0], std::strlen(argv[0]));
    (void)!::write(2, what, std::strlen(what));
    if (e != ENOENT) {
        const char* s = ::strerror(e);
        (void)!::write(2, s, std::strlen(s));
        (void)!::write(2, "\n", 1);
    }
    ::_exit(e == ENOENT ? 127 : 126);
}

} // namespace

std::vector<std::string> lastLines(const std::string& path, size_t lines)
{
    std::ifstream in(path, std::ios::binary);
    if (!in) return {};
    in.seekg(0, std::ios::end);
    const auto size = static_cast<int64_t>(in.tellg());
    const int64_t from = std::max<int64_t>(0, size - 8192);
    in.seekg(from);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::string> all;
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        std::string line = text.substr(start, end - start);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (!line.empty()) all.push_back(std::move(line));
        start = end + 1;
    }
    if (from > 0 && !all.empty()) all.erase(all.begin()); // a partial first line
    if (all.size() > lines) all.erase(all.begin(), all.end() - static_cast<std::ptrdiff_t>(lines));
    return all;
}

ChildRun runChild(const ChildOptions& o, const std::atomic<bool>& stop)
{
    ChildRun r;
    std::vector<char*> argv;
    for (const auto& a : o.argv)
        argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::vector<std::string> env = childEnvironment(o);
    std::vector<char*> envp;
    for (std::string& e : env)
        envp.push_back(e.data());
    envp.push_back(nullptr);
    const int out = ::open(o.stdoutLog.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int err = ::open(o.stderrLog.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const auto t0 = std::chrono::steady_clock::now();
    auto elapsed = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    const pid_t pid = (out >= 0 && err >= 0) ? ::fork() : -1;
    if (pid == 0) execChild(argv, envp, out, err);
    if (out >= 0) ::close(out);
    if (err >= 0) ::close(err);
    if (pid < 0) {
        r.exitStatus = 126;
        r.stderrTail = {std::string("cannot start the command: ") + std::strerror(errno)};
        return r;
    }
    ::setpgid(pid, pid); // also here: the child may not have run yet
    int status = 0;
    bool killed = false;
    auto stopAt = std::chrono::steady_clock::time_point::max();
    for (int n = 0;; ++n) {
        const pid_t w = ::waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) break;
        if (stop.load() && !killed) {
            killed = true;
            ::kill(-pid, SIGTERM);
            stopAt = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        }
        if (killed && std::chrono::steady_clock::now() > stopAt) {
            ::kill(-pid, SIGKILL);
            stopAt = std::chrono::steady_clock::time_point::max();
        }
        if (o.tick) o.tick(elapsed());
        // Short sleeps first: a quick command is not kept waiting for the poll.
        std::this_thread::sleep_for(std::chrono::microseconds(n < 100 ? 500 : 10000));
    }
    r.seconds = elapsed();
    r.exitStatus = shellStatus(status);
    r.finished = !killed;
    r.stderrTail = lastLines(o.stderrLog, 5);
    return r;
}

} // namespace fs::cli
