// The control-socket server a capture target runs (the agent inside a CUDA process, or the
// simulator's live mode): one thread that accepts connections, checks the peer's uid, performs
// the versioned handshake and answers start/stop/status/mark. The producer (CUPTI flush thread,
// simulator) pushes encoded stream bytes with sendStream() to the one client that sent Start.
// A malformed frame or a write failure drops that connection only.
#pragma once

#include "protocol.h"

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace fs::proto {

class ControlServer
{
public:
    struct Options
    {
        std::string dir;            // socket directory (socketDir() when empty)
        std::string kind = "agent"; // reported in the handshake
        std::string commandLine;
        uint32_t launchedBy = 0;   // pid of the recorder that launched us, 0 if none
        uint32_t allowedUid = ~0u; // peer uid allowed to connect (getuid() when ~0u)
        std::function<void(const std::string&)> onMark; // called on the server thread
        std::function<void(const char*)> log;           // one-line diagnostics
        // Called on the server thread when the recording client asks to stop, before its
        // stream ends: the producer sends what it still holds (the PyTorch bridge's last
        // drain, queued host events), so a stop loses nothing that was already produced.
        std::function<void()> beforeStop;
    };

    explicit ControlServer(Options opts);
    ~ControlServer();
    ControlServer(const ControlServer&) = delete;
    ControlServer& operator=(const ControlServer&) = delete;

    // Creates the directory and the socket, starts the server thread.
    bool open(std::string& err);
    // Ends the stream (if any), stops the thread, removes the socket.
    void close();
    const std::string& path() const { return path_; }

    // Producer side ---------------------------------------------------------------------
    // Incremented at every Start; the producer sends a StreamBegin (and replays its tables)
    // whenever it sees a new epoch.
    uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }
    bool streaming() const { return streaming_.load(std::memory_order_acquire); }
    // Writes complete frames to the recording client if it is still the one of `epoch`.
    // Blocks while the client is slow (bounded by a timeout, then the client is dropped).
    bool sendStream(const void* p, size_t n, uint64_t epoch);
    // Sends StreamEnd(reason) to the recording client and forgets it.
    void endStream(EndReason reason);
    bool waitForStart(int timeoutMs);
    void setState(TargetState s) { state_.store(static_cast<uint32_t>(s)); }
    TargetState state() const { return static_cast<TargetState>(state_.load()); }
    void countEvents(uint64_t sent, uint64_t dropped);

    // Counters for tests and `ps`.
    uint64_t refusedPeers() const { return refused_.load(); }
    uint64_t droppedConnections() const { return droppedConns_.load(); }

private:
    struct Conn;
    void loop();
    void accept();
    bool handle(const std::shared_ptr<Conn>& c); // false: drop the connection
    void drop(const std::shared_ptr<Conn>& c, const char* why);
    void reply(Conn& c, Encoder& enc);
    void log(const std::string& msg);

    Options opts_;
    std::string path_;
    int listenFd_ = -1;
    int wake_[2] = {-1, -1};
    std::thread thread_;
    std::vector<std::shared_ptr<Conn>> conns_; // server thread only
    std::mutex streamMu_;
    std::shared_ptr<Conn> stream_; // guarded by streamMu_
    std::condition_variable startCv_;
    std::atomic<uint64_t> epoch_{0};
    std::atomic<bool> streaming_{false};
    std::atomic<uint32_t> state_{0};
    std::atomic<uint64_t> eventsSent_{0}, dropped_{0}, bytesSent_{0};
    std::atomic<uint64_t> refused_{0}, droppedConns_{0};
    std::atomic<bool> stopping_{false};
};

// Writes all of buf to fd (MSG_NOSIGNAL), waiting at most timeoutMs per stall; false on error.
bool writeAll(int fd, const void* buf, size_t n, int timeoutMs);

} // namespace fs::proto
