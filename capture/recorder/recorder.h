// Recorder API: find attachable targets, attach to one and ingest its stream into a session file
// live. Used by `fragscope record|attach|ps` and by the GUI's File > Attach… dialog:
//
//   auto targets = fs::capture::listTargets();             // what `fragscope ps` shows
//   auto rec = fs::capture::Recording::attach(pid, "run.fragscope", err);
//   ... rec->progress() twice a second for a live summary ...
//   rec->stop(); auto result = rec->wait();                // the session is finished and open-able
#pragma once

#include "capture/protocol/control_client.h"
#include "capture/protocol/protocol.h"
#include "capture/recorder/flight_recorder.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <sys/types.h>
#include <thread>
#include <vector>

namespace fs::capture {

struct TargetEntry
{
    pid_t pid = 0;
    std::string socketPath;
    std::string commandLine;
    std::string kind;  // agent, simulator
    std::string state; // idle, waiting, recording, disabled, unreachable, stale
    uint64_t eventsSent = 0;
    uint64_t dropped = 0;
    uint32_t launchedBy = 0;
    std::string error; // why it is unreachable
};

// This user's targets (sockets in proto::socketDir()). Sockets of dead processes are removed.
std::vector<TargetEntry> listTargets(int timeoutMs = 1000);

struct RecordOptions
{
    std::string output;     // session file
    std::string sourcePath; // what was recorded (command line), for the sources table
    int64_t durationMs = 0; // > 0: stop after this long
    bool sendStart = true;  // false: the caller already started the stream
    std::function<void(int64_t events)> progress; // called about twice a second
    // --keep: only windows around triggers are written (flight_recorder.h); reorder slack and
    // file size are filled in here.
    std::optional<FlightOptions> flight;
};

struct RecordResult
{
    bool ok = false;            // a session was written
    bool endedAbruptly = false; // the target vanished without ending its stream
    bool badStream = false;     // the stream was malformed (error says where)
    std::string error;
    int64_t events = 0;
    proto::EndReason reason = proto::EndReason::TargetFinished;
    std::vector<FlightWindow> windows; // --keep: the windows written
    FlightStats flight;
};

// Records from a connected client until the stream ends, `stop` becomes true (a Stop is sent and
// the tail of the stream is still ingested) or the duration passes.
RecordResult recordFrom(proto::ControlClient& client, const RecordOptions& opts,
                        const std::atomic<bool>& stop);

// A recording running on its own thread (GUI).
class Recording
{
public:
    // Connects to pid's control socket and starts recording into out. nullptr with err when the
    // process has no reachable socket (see injectAgent() in launcher.h for the gdb path).
    static std::unique_ptr<Recording> attach(pid_t pid, const std::string& out, std::string& err,
                                             int64_t durationMs = 0);
    ~Recording();
    void stop() { stop_ = true; }
    bool running() const { return running_.load(); }
    int64_t events() const { return events_.load(); }
    // Joins the recording thread; the session file is finished when it returns.
    RecordResult wait();

private:
    Recording() = default;
    proto::ControlClient client_;
    RecordOptions opts_;
    std::atomic<bool> stop_{false};
    std::atomic<bool> running_{false};
    std::atomic<int64_t> events_{0};
    std::thread thread_;
    RecordResult result_;
};

} // namespace fs::capture
