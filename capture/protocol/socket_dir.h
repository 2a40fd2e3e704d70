// Where control sockets live: $FRAGSCOPE_SOCKET_DIR, else $XDG_RUNTIME_DIR/fragscope, else
// /tmp/fragscope-<uid>. The directory is created with mode 0700 and refused when it is not a
// real directory owned by this uid with no group/other permissions (someone may have planted it).
#pragma once

#include <string>
#include <sys/types.h>
#include <vector>

namespace fs::proto {

std::string socketDir();
// Creates dir (and its parent for the XDG case) when missing; false with err when unsafe.
bool ensureSocketDir(const std::string& dir, std::string& err);
std::string socketPath(const std::string& dir, pid_t pid);
// pids that have a socket in dir, sorted.
std::vector<pid_t> listSocketPids(const std::string& dir);
bool processAlive(pid_t pid);
// /proc/PID/cmdline with NULs turned into spaces ("" when unreadable).
std::string processCommandLine(pid_t pid);

} // namespace fs::proto
