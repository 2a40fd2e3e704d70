#include "control_server.h"

#include "socket_dir.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace fs::proto {

struct ControlServer::Conn
{
    int fd = -1;
    uint32_t uid = 0;
    pid_t pid = 0;
    bool helloSeen = false;
    FrameReader reader{Role::Client};
    std::mutex wmu; // every write to fd holds it, so frames never interleave
    ~Conn()
    {
        if (fd >= 0) ::close(fd);
    }
};

bool writeAll(int fd, const void* buf, size_t n, int timeoutMs)
{
    const auto* p = static_cast<const char*>(buf);
    while (n > 0) {
        const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            p += w;
            n -= static_cast<size_t>(w);
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            pollfd pf{fd, POLLOUT, 0};
            const int r = ::poll(&pf, 1, timeoutMs);
            if (r == 0) return false; // the reader stalled for timeoutMs: give up on it
            if (r < 0 && errno != EINTR) return false;
            continue;
        }
        return false;
    }
    return true;
}

ControlServer::ControlServer(Options opts) : opts_(std::move(opts))
{
    if (opts_.allowedUid == ~0u) opts_.allowedUid = ::getuid();
    if (opts_.dir.empty()) opts_.dir = socketDir();
}

ControlServer::~ControlServer()
{
    close();
}

void ControlServer::log(const std::string& msg)
{
    if (opts_.log) opts_.log(msg.c_str());
}

bool ControlServer::open(std::string& err)
{
    if (!ensureSocketDir(opts_.dir, err)) return false;
    path_ = socketPath(opts_.dir, ::getpid());
    // Bind under a temporary name and rename once listening, so that a client never finds a
    // socket that refuses connections (ps would call it unreachable).
    const std::string tmp = opts_.dir + "/." + std::to_string(::getpid()) + ".sock.tmp";
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (tmp.size() >= sizeof addr.sun_path) {
        err = path_ + ": socket path too long";
        return false;
    }
    std::memcpy(addr.sun_path, tmp.c_str(), tmp.size() + 1);
    listenFd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (listenFd_ < 0) {
        err = std::string("socket: ") + std::strerror(errno);
        return false;
    }
    ::unlink(tmp.c_str());
    // No umask games (umask is process-wide and the host has other threads): the directory is
    // 0700, and the socket is chmod'ed to 0600 before it gets its public name.
    const int b = ::bind(listenFd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    const int bindErr = errno;
    if (b != 0 || ::chmod(tmp.c_str(), 0600) != 0 || ::listen(listenFd_, 8) != 0 ||
        ::rename(tmp.c_str(), path_.c_str()) != 0) { // replaces a stale socket of a dead pid
        err = path_ + ": " + std::strerror(b != 0 ? bindErr : errno);
        ::close(listenFd_);
        listenFd_ = -1;
        ::unlink(tmp.c_str());
        return false;
    }
    if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
        err = std::string("pipe: ") + std::strerror(errno);
        ::close(listenFd_);
        listenFd_ = -1;
        ::unlink(path_.c_str());
        return false;
    }
    stopping_ = false;
    thread_ = std::thread([this] { loop(); });
    return true;
}

void ControlServer::close()
{
    if (listenFd_ < 0) return;
    stopping_ = true;
    const char c = 'q';
    [[maybe_unused]] ssize_t w = ::write(wake_[1], &c, 1);
    if (thread_.joinable()) thread_.join();
    {
        std::lock_guard lk(streamMu_);
        stream_.reset();
        streaming_ = false;
    }
    conns_.clear();
    ::close(listenFd_);
    listenFd_ = -1;
    ::close(wake_[0]);
    ::close(wake_[1]);
    wake_[0] = wake_[1] = -1;
    ::unlink(path_.c_str());
    startCv_.notify_all();
}

void ControlServer::loop()
{
    std::vector<pollfd> pfs;
    while (!stopping_) {
        pfs.clear();
        pfs.push_back({wake_[0], POLLIN, 0});
        pfs.push_back({listenFd_, POLLIN, 0});
        for (const auto& c : conns_)
            pfs.push_back({c->fd, POLLIN, 0});
        const int r = ::poll(pfs.data(), pfs.size(), 500);
        if (r < 0 && errno != EINTR) break;
        if (r <= 0) continue;
        if (pfs[0].revents) break;
        if (pfs[1].revents & POLLIN) accept();
        // Connections accepted just now are not in pfs; iterate over the ones polled.
        std::vector<std::shared_ptr<Conn>> polled(
            conns_.begin(), conns_.begin() + static_cast<std::ptrdiff_t>(pfs.size() - 2));
        for (size_t i = 0; i < polled.size(); ++i) {
            if (!pfs[i + 2].revents) continue;
            if (!handle(polled[i])) drop(polled[i], nullptr);
        }
    }
}

void ControlServer::accept()
{
    while (true) {
        const int fd = ::accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) return;
        auto c = std::make_shared<Conn>();
        c->fd = fd;
        ucred cred{};
        socklen_t len = sizeof cred;
        if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
            cred.uid != opts_.allowedUid) {
            ++refused_;
            Encoder enc;
            enc.header(Role::Target);
            enc.frame(MsgType::Error,
                      "permission denied: only the owner of the target process may connect");
            writeAll(fd, enc.bytes().data(), enc.size(), 100);
            log("refused a control connection from uid " + std::to_string(cred.uid));
            continue; // ~Conn closes fd
        }
        c->uid = cred.uid;
        c->pid = cred.pid;
        if (conns_.size() >= 32) {
            ++refused_;
            continue;
        }
        Encoder enc;
        enc.header(Role::Target);
        if (!writeAll(fd, enc.bytes().data(), enc.size(), 1000)) continue;
        conns_.push_back(std::move(c));
    }
}

void ControlServer::reply(Conn& c, Encoder& enc)
{
    std::lock_guard lk(c.wmu);
    writeAll(c.fd, enc.bytes().data(), enc.size(), 2000);
}

bool ControlServer::handle(const std::shared_ptr<Conn>& c)
{
    char buf[16384];
    const ssize_t n = ::recv(c->fd, buf, sizeof buf, 0);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    c->reader.feed(buf, static_cast<size_t>(n));
    FrameHeader h{};
    std::string_view payload;
    while (c->reader.next(h, payload)) {
        const auto type = static_cast<MsgType>(h.type);
        if (!c->helloSeen) {
            PayloadReader r(payload);
            const auto version = r.pod<uint32_t>();
            r.pod<uint32_t>();
            if (type != MsgType::Hello || !r.ok() || !r.atEnd()) {
                log("control connection: malformed handshake; dropped");
                return false;
            }
            Encoder enc;
            if (version != kVersion) {
                enc.frame(MsgType::Error, "protocol version mismatch: target speaks version " +
                                              std::to_string(kVersion));
                reply(*c, enc);
                return false;
            }
            c->helloSeen = true;
            TargetInfo info;
            info.pid = static_cast<uint32_t>(::getpid());
            info.state = state_.load();
            info.launchedBy = opts_.launchedBy;
            info.kind = opts_.kind;
            info.commandLine = opts_.commandLine;
            encodeTargetInfo(enc, info);
            reply(*c, enc);
            continue;
        }
        Encoder enc;
        switch (type) {
        case MsgType::Start: {
            if (!payload.empty()) return false;
            std::lock_guard lk(streamMu_);
            if (stream_ || state() == TargetState::Disabled) {
                enc.frame(MsgType::Error,
                          stream_ ? "already recording: another recorder is attached"
                                  : "the agent disabled itself (see the target's stderr)");
                reply(*c, enc);
                break;
            }
            // Streaming is on before the Ack leaves, so whoever reads the Ack can rely on it;
            // the producer cannot write before the Ack because it needs streamMu_.
            stream_ = c;
            epoch_.fetch_add(1, std::memory_order_acq_rel);
            streaming_ = true;
            state_ = static_cast<uint32_t>(TargetState::Recording);
            const auto t = static_cast<uint16_t>(MsgType::Start);
            enc.frame(MsgType::Ack, &t, sizeof t);
            reply(*c, enc);
            startCv_.notify_all();
            break;
        }
        case MsgType::Stop: {
            if (!payload.empty()) return false;
            if (opts_.beforeStop && streaming_) opts_.beforeStop();
            std::lock_guard lk(streamMu_);
            const auto t = static_cast<uint16_t>(MsgType::Stop);
            enc.frame(MsgType::Ack, &t, sizeof t);
            if (stream_ == c) {
                const auto reason = static_cast<uint32_t>(EndReason::Stopped);
                enc.frame(MsgType::StreamEnd, &reason, sizeof reason);
                stream_.reset();
                streaming_ = false;
                state_ = static_cast<uint32_t>(TargetState::Idle);
            }
            reply(*c, enc);
            break;
        }
        case MsgType::Status: {
            if (!payload.empty()) return false;
            TargetStatus s;
            s.state = state_.load();
            s.eventsSent = eventsSent_.load();
            s.dropped = dropped_.load();
            s.bytesSent = bytesSent_.load();
            encodeStatus(enc, s);
            reply(*c, enc);
            break;
        }
        case MsgType::Mark: {
            if (payload.size() > 4096) return false;
            if (opts_.onMark) opts_.onMark(std::string(payload));
            const auto t = static_cast<uint16_t>(MsgType::Mark);
            enc.frame(MsgType::Ack, &t, sizeof t);
            reply(*c, enc);
            break;
        }
        default:
            log("control connection: unexpected frame type " + std::to_string(h.type) +
                "; dropped");
            return false;
        }
    }
    if (!c->reader.error().empty()) {
        log("control connection: " + c->reader.error() + "; dropped");
        return false;
    }
    return true;
}

void ControlServer::drop(const std::shared_ptr<Conn>& c, const char* why)
{
    if (why) log(why);
    ++droppedConns_;
    {
        std::lock_guard lk(streamMu_);
        if (stream_ == c) {
            stream_.reset();
            streaming_ = false;
            if (state() == TargetState::Recording)
                state_ = static_cast<uint32_t>(TargetState::Idle);
        }
    }
    ::shutdown(c->fd, SHUT_RDWR);
    std::erase(conns_, c);
}

bool ControlServer::sendStream(const void* p, size_t n, uint64_t epoch)
{
    std::lock_guard lk(streamMu_);
    if (!stream_ || epoch != epoch_.load()) return false;
    bool ok;
    {
        std::lock_guard wl(stream_->wmu);
        ok = writeAll(stream_->fd, p, n, 10000);
    }
    if (!ok) {
        // The recorder is gone or stalled: forget it; the server thread reaps the socket.
        ::shutdown(stream_->fd, SHUT_RDWR);
        stream_.reset();
        streaming_ = false;
        state_ = static_cast<uint32_t>(TargetState::Idle);
        return false;
    }
    bytesSent_ += n;
    return true;
}

void ControlServer::endStream(EndReason reason)
{
    std::lock_guard lk(streamMu_);
    if (!stream_) return;
    Encoder enc;
    const auto r = static_cast<uint32_t>(reason);
    enc.frame(MsgType::StreamEnd, &r, sizeof r);
    {
        std::lock_guard wl(stream_->wmu);
        writeAll(stream_->fd, enc.bytes().data(), enc.size(), 2000);
    }
    stream_.reset();
    streaming_ = false;
}

bool ControlServer::waitForStart(int timeoutMs)
{
    std::unique_lock lk(streamMu_);
    return startCv_.wait_for(lk, std::chrono::milliseconds(timeoutMs), [this] {
        return stream_ != nullptr || stopping_.load();
    }) && stream_ != nullptr;
}

void ControlServer::countEvents(uint64_t sent, uint64_t dropped)
{
    eventsSent_ += sent;
    dropped_ += dropped;
}

} // namespace fs::proto
