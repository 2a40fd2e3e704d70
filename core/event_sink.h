// What a source writes to: Ingest (into a session file) or a live stream (capture/).
// Sources such as the simulator are written against this interface only.
#pragma once

#include "events.h"

#include <string>
#include <string_view>
#include <vector>

namespace fs {

class EventSink
{
public:
    virtual ~EventSink() = default;
    virtual StringId intern(std::string_view s) = 0;
    virtual uint64_t internStack(const std::vector<StringId>& frames) = 0;
    virtual void addDevice(const DeviceInfo& d) = 0;
    virtual void addProcess(const ProcessInfo& p) = 0;
    virtual void setMeta(const std::string& key, const std::string& value) = 0;
    virtual void add(const Event& e) = 0;
    virtual void addFrameMetric(int64_t frame, const std::string& name, double value,
                                const std::string& source) = 0;
    virtual void warn(const std::string& message) = 0;
};

} // namespace fs
