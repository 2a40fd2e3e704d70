// Reads a generated video frame by frame: a file FFmpeg reads (mp4/H.264, webm, mkv, avi, …,
// through OpenCV's videoio) or a folder of numbered PNG/JPEG frames. Every problem is a
// SessionError naming the file (or the folder's frame) and what was wrong. Internal to
// fragscope_video (it exposes OpenCV types).
#pragma once

#include <opencv2/core.hpp>
#include <opencv2/videoio.hpp>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace fs::video {

class VideoReader
{
public:
    explicit VideoReader(const std::string& path);
    // The next frame as 8-bit BGR; false at the end (after checking the stream was complete).
    bool next(cv::Mat& bgr);
    const std::string& path() const { return path_; }
    bool isFolder() const { return folder_; }
    // Frames the container declares (an estimate for some containers; the count of a folder's
    // files); 0 when unknown.
    int64_t declaredFrames() const { return declared_; }
    double fps() const { return fps_; }
    int64_t framesRead() const { return read_; }
    // The folder's frame files in frame order (empty for a video file).
    const std::vector<std::string>& files() const { return files_; }
    // SHA-256 of the content: the file's bytes, or for a folder the SHA-256 of the lines
    // "HASH  NAME\n" of its frame files in frame order (what `sha256sum` prints for each).
    // cancel: checked between reads; the hash is then incomplete (the caller throws it away).
    static std::string contentHash(const VideoReader& r, const std::atomic<bool>* cancel);
    static uint64_t contentBytes(const VideoReader& r);

private:
    std::string path_;
    bool folder_ = false;
    cv::VideoCapture cap_;
    std::vector<std::string> files_;
    int64_t declared_ = 0;
    double fps_ = 0;
    int64_t read_ = 0;
    cv::Size size_;
};

} // namespace fs::video
