#include "recorder.h"

#include "capture/protocol/socket_dir.h"
#include "core/store/ingest.h"
#include "stream_ingest.h"

#include <chrono>
#include <fmt/format.h>
#include <unistd.h>

namespace fs::capture {

std::vector<TargetEntry> listTargets(int timeoutMs)
{
    std::vector<TargetEntry> out;
    const std::string dir = proto::socketDir();
    for (pid_t pid : proto::listSocketPids(dir)) {
        TargetEntry t;
        t.pid = pid;
        t.socketPath = proto::socketPath(dir, pid);
        if (!proto::processAlive(pid)) {
            ::unlink(t.socketPath.c_str()); // left behind by a process that died (SIGKILL)
            continue;
        }
        t.commandLine = proto::processCommandLine(pid);
        proto::ControlClient c;
        std::string err;
        if (!c.connect(t.socketPath, timeoutMs, err)) {
            t.state = "unreachable";
            t.error = err;
            out.push_back(t);
            continue;
        }
        t.kind = c.info().kind;
        t.launchedBy = c.info().launchedBy;
        t.state = proto::stateName(static_cast<proto::TargetState>(c.info().state));
        std::string reply;
        proto::TargetStatus st;
        if (c.command(proto::MsgType::Status, {}, timeoutMs, err, &reply) &&
            proto::decodeStatus(reply, st)) {
            t.state = proto::stateName(static_cast<proto::TargetState>(st.state));
            t.eventsSent = st.eventsSent;
            t.dropped = st.dropped;
        }
        out.push_back(t);
    }
    return out;
}

RecordResult recordFrom(proto::ControlClient& client, const RecordOptions& opts,
                        const std::atomic<bool>& stop)
{
    RecordResult res;
    const bool simulated = client.info().kind == "simulator";
    IngestOptions io;
    io.path = opts.output;
    io.sourceKind = simulated ? "simulator-live" : "agent";
    io.sourcePath = opts.sourcePath.empty() ? client.info().commandLine : opts.sourcePath;
    io.synthetic = simulated;
    // CUPTI delivers records per buffer and kind, out of order by up to a flush period or so;
    // the simulator's stream is already ordered.
    io.reorderWindowNs = simulated ? 0 : 3'000'000'000;
    // The GUI re-reads the file every 400 ms while it records: commit often enough that each
    // refresh sees new events (a WAL commit without fsync costs well under a millisecond).
    io.commitIntervalMs = 250;
    Ingest ingest(io);
    std::unique_ptr<FlightRecorder> flight;
    try {
        if (opts.flight)
            flight = std::make_unique<FlightRecorder>(ingest, flightOptionsFor(*opts.flight, io));
        ingest.begin();
    } catch (const std::exception& e) {
        res.error = e.what();
        return res;
    }
    ingest.setMeta("capture.target_pid", std::to_string(client.info().pid));
    ingest.setMeta("capture.target_kind", client.info().kind);
    if (opts.flight) {
        ingest.setMeta("capture.flight",
                       fmt::format("keep_ns={} before_ns={} after_ns={} max_bytes={}",
                                   opts.flight->keepNs, opts.flight->beforeNs, opts.flight->afterNs,
                                   opts.flight->maxBytes));
    }
    StreamIngest si(ingest, flight.get());
    std::string err;
    if (opts.sendStart && !client.command(proto::MsgType::Start, {}, 10000, err)) {
        ingest.abort();
        res.error = err;
        return res;
    }
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    auto lastProgress = t0;
    bool stopSent = false;
    clock::time_point stopAt{};
    bool eof = false;
    auto handle = [&](const proto::FrameHeader& h, std::string_view p, uint64_t off) {
        if (!si.frame(h, p, off)) return false;
        return true;
    };
    bool bad = false;
    for (auto& pf : client.pending())
        if (!handle(pf.h, pf.payload, client.reader().offset())) {
            bad = true;
            break;
        }
    client.pending().clear();
    while (!bad && !si.ended()) {
        const bool timeUp =
            opts.durationMs > 0 && clock::now() - t0 >= std::chrono::milliseconds(opts.durationMs);
        if ((stop.load() || timeUp) && !stopSent) {
            stopSent = true;
            stopAt = clock::now();
            if (!client.send(proto::MsgType::Stop, {}, err)) break;
        }
        if (stopSent && clock::now() - stopAt > std::chrono::seconds(10)) {
            ingest.warn("the target did not confirm the end of the recording within 10 s");
            break;
        }
        // A target that ends quickly may send the rest of its stream and close at once: what is
        // already buffered is read before the end of the connection counts.
        const int r = client.pump(200);
        proto::FrameHeader h{};
        std::string_view payload;
        while (!si.ended()) {
            const uint64_t off = client.reader().offset();
            if (!client.reader().next(h, payload)) break;
            if (!handle(h, payload, off)) {
                bad = true;
                break;
            }
        }
        if (!client.reader().error().empty()) {
            bad = true;
            res.error = client.reader().error();
        }
        if (r < 0 && !bad && !si.ended()) {
            eof = true;
            break;
        }
        ingest.tick(); // commits at least once a second even when the target is quiet
        if (opts.progress && clock::now() - lastProgress >= std::chrono::milliseconds(500)) {
            lastProgress = clock::now();
            opts.progress(si.events());
        }
    }
    res.events = si.events();
    try {
        if (bad) {
            res.badStream = true;
            if (res.error.empty()) res.error = si.error();
            ingest.warn("capture stream rejected: " + res.error);
            ingest.markEndedAbruptly("malformed capture stream: " + res.error);
            res.endedAbruptly = true;
        } else if (!si.ended()) {
            const std::string why =
                eof ? fmt::format("the target (pid {}) closed its stream without ending it "
                                  "(killed or crashed)",
                                  client.info().pid)
                    : "the recording was cut short";
            ingest.markEndedAbruptly(why);
            res.endedAbruptly = true;
            res.error = why;
        } else {
            res.reason = si.endReason();
            if (res.reason == proto::EndReason::AgentDisabled)
                ingest.warn(
                    "the agent disabled itself during the recording (see the target's stderr)");
        }
        if (flight) {
            flight->finish();
            res.windows = flight->windows();
            res.flight = flight->stats();
            if (res.flight.windowsDropped > 0)
                ingest.health("windows_dropped", res.flight.windowsDropped,
                              "triggers that found the session at --max-size");
        }
        ingest.end();
        res.ok = true;
    } catch (const std::exception& e) {
        res.error = e.what();
    }
    client.close();
    return res;
}

std::unique_ptr<Recording> Recording::attach(pid_t pid, const std::string& out, std::string& err,
                                             int64_t durationMs)
{
    std::unique_ptr<Recording> rec(new Recording());
    const std::string path = proto::socketPath(proto::socketDir(), pid);
    if (!rec->client_.connect(path, 5000, err)) return nullptr;
    rec->opts_.output = out;
    rec->opts_.durationMs = durationMs;
    rec->opts_.progress = [r = rec.get()](int64_t n) { r->events_ = n; };
    std::string e2;
    if (!rec->client_.command(proto::MsgType::Start, {}, 10000, e2)) {
        err = e2;
        return nullptr;
    }
    rec->opts_.sendStart = false;
    rec->running_ = true;
    rec->thread_ = std::thread([r = rec.get()] {
        r->result_ = recordFrom(r->client_, r->opts_, r->stop_);
        r->events_ = r->result_.events;
        r->running_ = false;
    });
    return rec;
}

Recording::~Recording()
{
    if (thread_.joinable()) {
        stop_ = true;
        thread_.join();
    }
}

RecordResult Recording::wait()
{
    if (thread_.joinable()) thread_.join();
    return result_;
}

} // namespace fs::capture
