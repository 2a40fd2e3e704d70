#include "socket_dir.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fs::proto {

std::string socketDir()
{
    if (const char* d = std::getenv("FRAGSCOPE_SOCKET_DIR"); d && *d) return d;
    if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x && *x) {
        struct stat st
        {
        };
        if (::stat(x, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::getuid())
            return std::string(x) + "/fragscope";
    }
    return "/tmp/fragscope-" + std::to_string(::getuid());
}

bool ensureSocketDir(const std::string& dir, std::string& err)
{
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
        err = dir + ": cannot create the control-socket directory: " + std::strerror(errno);
        return false;
    }
    struct stat st
    {
    };
    if (::lstat(dir.c_str(), &st) != 0) {
        err = dir + ": " + std::strerror(errno);
        return false;
    }
    if (!S_ISDIR(st.st_mode)) {
        err = dir + ": not a directory (refusing to use it for control sockets)";
        return false;
    }
    if (st.st_uid != ::getuid()) {
        err = dir + ": owned by uid " + std::to_string(st.st_uid) + ", not by this user (refusing)";
        return false;
    }
    if ((st.st_mode & 077) != 0) {
        // Ours but too open (umask, or created by hand): tighten rather than refuse.
        if (::chmod(dir.c_str(), 0700) != 0) {
            err = dir + ": mode is not 0700 and chmod failed: " + std::strerror(errno);
            return false;
        }
    }
    return true;
}

std::string socketPath(const std::string& dir, pid_t pid)
{
    return dir + "/" + std::to_string(pid) + ".sock";
}

std::vector<pid_t> listSocketPids(const std::string& dir)
{
    std::vector<pid_t> out;
    DIR* d = ::opendir(dir.c_str());
    if (!d) return out;
    while (dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name.size() < 6 || !name.ends_with(".sock")) continue;
        const std::string num = name.substr(0, name.size() - 5);
        if (num.empty() ||
            !std::all_of(num.begin(), num.end(), [](char c) { return c >= '0' && c <= '9'; }))
            continue;
        out.push_back(static_cast<pid_t>(std::strtol(num.c_str(), nullptr, 10)));
    }
    ::closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

bool processAlive(pid_t pid)
{
    if (pid <= 0) return false;
    if (::kill(pid, 0) == 0 || errno == EPERM) {
        // A zombie still answers kill(); treat it as gone.
        const std::string stat = "/proc/" + std::to_string(pid) + "/stat";
        const int fd = ::open(stat.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return true;
        char buf[512];
        const ssize_t n = ::read(fd, buf, sizeof buf - 1);
        ::close(fd);
        if (n <= 0) return true;
        buf[n] = 0;
        const char* rp = std::strrchr(buf, ')');
        return !(rp && rp[1] == ' ' && rp[2] == 'Z');
    }
    return false;
}

std::string processCommandLine(pid_t pid)
{
    const std::string path = "/proc/" + std::to_string(pid) + "/cmdline";
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return {};
    std::string s;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0 && s.size() < 65536)
        s.append(buf, static_cast<size_t>(n));
    ::close(fd);
    while (!s.empty() && s.back() == '\0')
        s.pop_back();
    std::replace(s.begin(), s.end(), '\0', ' ');
    return s;
}

} // namespace fs::proto
