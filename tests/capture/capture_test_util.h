// Helpers for the capture tests: a private socket directory, a client that collects the stream.
#pragma once

#include "capture/protocol/control_client.h"
#include "capture/protocol/protocol.h"

#include <QTemporaryDir>
#include <QTest>
#include <map>
#include <string>
#include <vector>

namespace fstest {

// Every frame the client received, decoded enough to assert on.
struct Collected
{
    std::vector<fs::proto::WireEvent> events;
    std::map<uint32_t, std::string> strings;
    std::vector<std::pair<uint16_t, std::string>> others; // (type, payload)
    bool ended = false;
    std::string error;

    std::string name(uint32_t id) const
    {
        auto it = strings.find(id);
        return it == strings.end() ? std::string("<undefined>") : it->second;
    }
    void take(const fs::proto::FrameHeader& h, std::string_view p)
    {
        using fs::proto::MsgType;
        switch (static_cast<MsgType>(h.type)) {
        case MsgType::Events:
            for (size_t i = 0; i + sizeof(fs::proto::WireEvent) <= p.size();
                 i += sizeof(fs::proto::WireEvent)) {
                fs::proto::WireEvent e;
                std::memcpy(&e, p.data() + i, sizeof e);
                events.push_back(e);
            }
            break;
        case MsgType::String: {
            uint32_t id;
            std::memcpy(&id, p.data(), 4);
            strings[id] = std::string(p.substr(4));
            break;
        }
        case MsgType::StreamEnd:
            ended = true;
            break;
        default:
            others.emplace_back(h.type, std::string(p));
        }
    }
    // Reads from c until StreamEnd or timeout.
    void drain(fs::proto::ControlClient& c, int timeoutMs, bool untilEnd = true)
    {
        for (auto& pf : c.pending())
            take(pf.h, pf.payload);
        c.pending().clear();
        QElapsedTimer t;
        t.start();
        while (t.elapsed() < timeoutMs && !(untilEnd && ended)) {
            const int r = c.pump(50);
            fs::proto::FrameHeader h{};
            std::string_view p;
            while (c.reader().next(h, p))
                take(h, p);
            if (!c.reader().error().empty()) {
                error = c.reader().error();
                return;
            }
            if (r < 0) return;
            if (!untilEnd && r == 0) return;
        }
    }
};

} // namespace fstest
