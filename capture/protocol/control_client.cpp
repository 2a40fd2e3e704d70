#include "control_client.h"

#include "control_server.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace fs::proto {

ControlClient::~ControlClient()
{
    close();
}

void ControlClient::close()
{
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

bool ControlClient::connect(const std::string& path, int timeoutMs, std::string& err)
{
    close();
    path_ = path;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof addr.sun_path) {
        err = path + ": socket path too long";
        return false;
    }
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
        err = std::string("socket: ") + std::strerror(errno);
        return false;
    }
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        const int e = errno;
        err =
            path + ": " + std::strerror(e) +
            (e == EACCES ? " (the socket belongs to another user; only its owner may attach)" : "");
        close();
        return false;
    }
    Encoder enc;
    enc.header(Role::Client);
    enc.begin(MsgType::Hello);
    enc.putPod(kVersion);
    enc.putPod(static_cast<uint32_t>(::getpid()));
    enc.end();
    FrameHeader h{};
    std::string_view payload;
    if (!writeAll(fd_, enc.bytes().data(), enc.size(), timeoutMs)) {
        // A target that refuses a client says why and closes at once, possibly before the
        // hello is written (EPIPE): its reason, still waiting to be read, says more.
        const int e = errno;
        std::string ignored;
        if (waitFrame(h, payload, std::min(timeoutMs, 1000), ignored) &&
            static_cast<MsgType>(h.type) == MsgType::Error)
            err = path + ": " + std::string(payload);
        else
            err = path + ": handshake failed: " + std::strerror(e);
        close();
        return false;
    }
    if (!waitFrame(h, payload, timeoutMs, err)) {
        close();
        return false;
    }
    if (static_cast<MsgType>(h.type) == MsgType::Error) {
        err = path + ": " + std::string(payload);
        close();
        return false;
    }
    if (static_cast<MsgType>(h.type) != MsgType::HelloAck || !decodeTargetInfo(payload, info_)) {
        err = path + ": malformed handshake reply";
        close();
        return false;
    }
    return true;
}

int ControlClient::pump(int timeoutMs)
{
    if (fd_ < 0) return -1;
    pollfd pf{fd_, POLLIN, 0};
    const int r = ::poll(&pf, 1, timeoutMs);
    if (r == 0) return 0;
    if (r < 0) return errno == EINTR ? 0 : -1;
    char buf[1 << 16];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n > 0) {
        reader_.feed(buf, static_cast<size_t>(n));
        return 1;
    }
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return 0;
    return -1;
}

bool ControlClient::waitFrame(FrameHeader& h, std::string_view& payload, int timeoutMs,
                              std::string& err)
{
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
    while (!reader_.next(h, payload)) {
        if (!reader_.error().empty()) {
            err = path_ + ": " + reader_.error();
            return false;
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                              deadline - std::chrono::steady_clock::now())
                              .count();
        if (left <= 0) {
            err = path_ + ": no reply within " + std::to_string(timeoutMs) + " ms";
            return false;
        }
        if (pump(static_cast<int>(left)) < 0) {
            err = path_ + ": the target closed the connection";
            return false;
        }
    }
    return true;
}

bool ControlClient::send(MsgType t, std::string_view payload, std::string& err)
{
    Encoder enc;
    enc.frame(t, payload);
    if (fd_ < 0 || !writeAll(fd_, enc.bytes().data(), enc.size(), 5000)) {
        err = path_ + ": cannot send to the target (connection closed)";
        return false;
    }
    return true;
}

bool ControlClient::command(MsgType t, std::string_view payload, int timeoutMs, std::string& err,
                            std::string* replyPayload)
{
    if (!send(t, payload, err)) return false;
    while (true) {
        FrameHeader h{};
        std::string_view p;
        if (!waitFrame(h, p, timeoutMs, err)) return false;
        const auto type = static_cast<MsgType>(h.type);
        if (type == MsgType::Error) {
            err = path_ + ": " + std::string(p);
            return false;
        }
        if (type == MsgType::Ack || type == MsgType::StatusReply) {
            if (replyPayload) *replyPayload = std::string(p);
            return true;
        }
        pending_.push_back({h, std::string(p)}); // stream data that was already on its way
    }
}

} // namespace fs::proto
