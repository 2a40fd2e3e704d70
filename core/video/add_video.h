// Adds a generated video to a session: checks the session and the frame map, measures the video
// (analyzeVideo), maps its frames onto the session's and writes frame metrics of source
// "video: NAME", thumbnails and the video's path and hash (store::writeVideo). The one
// implementation of `fragscope metrics compute` and of the GUI's File › Add video….
#pragma once

#include "video_metrics.h"

#include "core/analysis/video_frames.h"

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs::video {

// Something the user can fix with an option: the frame map does not fit (suggestion: the map
// that fits, when one does), or the session holds metrics of the same names from another
// source (--replace). Nothing was written.
class Refused : public std::runtime_error
{
public:
    enum class Kind { MapMismatch, Conflict };
    Refused(Kind kind, const std::string& what,
            std::optional<analysis::FrameMap> suggestion = std::nullopt)
        : std::runtime_error(what), kind_(kind), suggestion_(suggestion)
    {
    }
    Kind kind() const { return kind_; }
    const std::optional<analysis::FrameMap>& suggestion() const { return suggestion_; }

private:
    Kind kind_;
    std::optional<analysis::FrameMap> suggestion_;
};

struct AddVideoOptions
{
    std::string session;
    std::string video;
    analysis::FrameMap map; // default: video frame i is session frame i
    bool replaceOthers = false;
    AnalyzeOptions analyze;
};

struct AddVideoResult
{
    VideoAnalysis analysis;
    analysis::FrameMap map;
    std::string source; // "video: NAME"
    std::map<int64_t, std::map<std::string, double>> sessionMetrics;
    // Session frames whose warp_error_z passes kVideoBreakZ (the default rule), in order.
    std::vector<int64_t> breaks;
    bool replacedVideo = false; // the session held a video before
};

// Throws SessionError (a bad session or video: nothing written), Refused, Cancelled.
AddVideoResult addVideo(const AddVideoOptions& o);

} // namespace fs::video
