// The client end of a target's control socket (recorder, `fragscope ps`, tests).
#pragma once

#include "protocol.h"

#include <string>

namespace fs::proto {

class ControlClient
{
public:
    ControlClient() = default;
    ~ControlClient();
    ControlClient(const ControlClient&) = delete;
    ControlClient& operator=(const ControlClient&) = delete;

    // Connects, exchanges headers and Hello/HelloAck. err names the socket and the problem.
    bool connect(const std::string& path, int timeoutMs, std::string& err);
    const TargetInfo& info() const { return info_; }
    int fd() const { return fd_; }
    void close();

    bool send(MsgType t, std::string_view payload, std::string& err);
    // Sends a command and waits for its Ack (or StatusReply); stream frames that arrive in
    // between stay queued in reader(). Error frames become err.
    bool command(MsgType t, std::string_view payload, int timeoutMs, std::string& err,
                 std::string* replyPayload = nullptr);
    // Reads what is available within timeoutMs into reader(): 1 data, 0 timeout, -1 EOF/error.
    int pump(int timeoutMs);
    FrameReader& reader() { return reader_; }
    // Frames read by command() while waiting for its reply, to be processed first.
    struct Pending
    {
        FrameHeader h;
        std::string payload;
    };
    std::vector<Pending>& pending() { return pending_; }

private:
    bool waitFrame(FrameHeader& h, std::string_view& payload, int timeoutMs, std::string& err);
    int fd_ = -1;
    std::string path_;
    FrameReader reader_{Role::Target};
    TargetInfo info_;
    std::vector<Pending> pending_;
};

} // namespace fs::proto
