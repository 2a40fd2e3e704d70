// Typed reader and writer of a session's video tables (videos, video_frames,
// video_frame_metrics) and of the frame metrics computed from the video (docs/session-format.md).
// The only SQL on those tables (docs/store.md).
#pragma once

#include "session.h"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace fs::store {

struct VideoRow
{
    int64_t id = 0;
    std::string path;   // as given when it was added, made absolute
    std::string source; // the frame metrics' source: "video: NAME"
    std::string sha256;
    uint64_t bytes = 0;
    bool folder = false;
    int width = 0, height = 0;
    double fps = 0; // 0: unknown
    int64_t frames = 0;
    int64_t perSessionFrame = 1; // the frame map (analysis::FrameMap)
    int64_t sessionFrameOffset = 0;
    int workWidth = 0, workHeight = 0, ssimWidth = 0, ssimHeight = 0;
    int thumbWidth = 0, thumbHeight = 0;
    std::string computedAt, computedBy;
};

struct VideoFrameRow
{
    int64_t index = 0;
    int64_t sessionFrame = 0;
    int64_t reference = -1;         // the frame it was measured against; -1 for frame 0
    std::vector<uint8_t> thumbnail; // JPEG
    std::vector<uint8_t> flow;      // 8-bit PNG, a quarter video pixel per level; empty: none
    std::map<std::string, double> metrics;
};

struct VideoWrite
{
    VideoRow video;
    std::vector<VideoFrameRow> frames;
    // Session frame -> metric -> value (written to frame_metrics with video.source).
    std::map<int64_t, std::map<std::string, double>> sessionMetrics;
};

// What adding a video needs to know about a session first.
struct VideoTarget
{
    std::vector<int64_t> frames; // the frames table's indices
    // Metric names the video writes that the session already holds from another source:
    // name -> that source (the first one).
    std::map<std::string, std::string> conflicts;
    std::optional<VideoRow> current; // the video added before, if any
};
// Opens the session (validating it) and reads that. Throws SessionError.
VideoTarget videoTarget(const std::string& sessionPath, const std::vector<std::string>& names);

// Replaces the session's video in one transaction: the previous video's rows and every frame
// metric of a "video: …" source go, then w is written. A metric name in w held by another source
// is refused (SessionError, nothing written) unless replaceOthers, which removes every value of
// those names first. A session still being recorded is refused.
void writeVideo(const std::string& sessionPath, const VideoWrite& w, bool replaceOthers);

// The session's video (none: no video added, or a session written before the tables existed).
std::optional<VideoRow> video(const Session& s);
// Per video frame, without images: index, session frame, reference, metrics.
std::vector<VideoFrameRow> videoFrames(const Session& s);

// Thumbnails read on demand (the GUI shows a few at a time; a long clip holds thousands), from a
// connection of its own. Safe to use from several threads.
class VideoImages
{
public:
    // Null when the session holds no video.
    static std::shared_ptr<const VideoImages> open(const std::string& sessionPath);
    const VideoRow& video() const { return video_; }
    // Video frames of a session frame, in order (empty: none).
    std::vector<int64_t> videoFramesOf(int64_t sessionFrame) const;
    // The video frame that shows a session frame: of its chunk, the one with the largest
    // warp_error_z (the clearest break), else the first (-1: none).
    int64_t shownFrame(int64_t sessionFrame) const;
    int64_t sessionFrameOf(int64_t videoFrame) const; // -1 when out of range
    std::vector<uint8_t> thumbnail(int64_t videoFrame) const;
    std::vector<uint8_t> flow(int64_t videoFrame) const;

private:
    explicit VideoImages(Session s) : session_(std::move(s)) {}
    std::vector<uint8_t> blob(const char* column, int64_t videoFrame) const;
    mutable std::mutex mutex_;
    mutable Session session_;
    VideoRow video_;
    std::map<int64_t, std::vector<int64_t>> bySessionFrame_;
    std::map<int64_t, int64_t> shown_;
};

} // namespace fs::store
