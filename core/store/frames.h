// Typed readers of the frames, frame_metrics and markers tables, and the writer of frame_metrics
// for values computed after the session was written (docs/session-format.md, docs/store.md).
#pragma once

#include "session.h"

#include <optional>
#include <string>
#include <vector>

namespace fs::store {

struct FrameRow
{
    int64_t index = 0;
    int64_t startNs = 0;
    std::optional<int64_t> endNs; // none: open (ends where the next one starts)
};
// Every frame in (start_ns, idx) order.
std::vector<FrameRow> framesByStart(const Session& s);
// Every frame in idx order.
std::vector<FrameRow> framesByIndex(const Session& s);

struct FrameMetricRow
{
    int64_t frame = 0;
    std::string name;
    double value = 0;
    std::string source;
};
// Every per-frame metric, in (frame, name) order.
std::vector<FrameMetricRow> frameMetrics(const Session& s);

// Adds or replaces per-frame metric values (frame, name -> value) in a finished session, in one
// transaction, waiting up to 5 s for another writer; throws SessionError (nothing written).
void writeFrameMetrics(const std::string& path, const std::vector<FrameMetricRow>& rows);

struct MarkerRow
{
    int64_t timeNs = 0;
    std::optional<int64_t> endNs;
    std::string message;
};
// Every marker whose message is in strings, in id order.
std::vector<MarkerRow> markers(const Session& s);

} // namespace fs::store
