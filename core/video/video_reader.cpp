#include "video_reader.h"

#include "core/sha256.h"
#include "core/store/sqlite.h" // SessionError

#include <opencv2/imgcodecs.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>

namespace fs::video {

namespace {

namespace stdfs = std::filesystem;

bool isFrameFile(const stdfs::path& p)
{
    std::string ext = p.extension().string();
    for (char& c : ext)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

// The frame number of "frame_0017.png", "17.jpg", "out-3-0017.png": the last run of digits.
bool frameNumber(const std::string& stem, int64_t& n)
{
    size_t end = stem.size();
    while (end > 0 && !std::isdigit(static_cast<unsigned char>(stem[end - 1])))
        --end;
    size_t begin = end;
    while (begin > 0 && std::isdigit(static_cast<unsigned char>(stem[begin - 1])))
        --begin;
    if (begin == end || end - begin > 15) return false;
    n = std::stoll(stem.substr(begin, end - begin));
    return true;
}

std::vector<std::string> listFrames(const std::string& dir)
{
    std::error_code ec;
    stdfs::directory_iterator it(dir, ec);
    if (ec) throw SessionError(dir, "cannot read the folder: " + ec.message());
    std::map<int64_t, std::string> byNumber;
    for (; it != stdfs::directory_iterator(); it.increment(ec)) {
        if (ec) throw SessionError(dir, "cannot read the folder: " + ec.message());
        const stdfs::path p = it->path();
        if (!isFrameFile(p)) continue;
        int64_t n = 0;
        if (!frameNumber(p.stem().string(), n))
            throw SessionError(p.string(), "a frame file without a frame number in its name "
                                           "(expected numbered frames such as frame_0017.png)");
        auto [at, added] = byNumber.try_emplace(n, p.string());
        if (!added)
            throw SessionError(dir, fmt::format("two files have frame number {}: {} and {}", n,
                                                stdfs::path(at->second).filename().string(),
                                                p.filename().string()));
    }
    if (byNumber.empty())
        throw SessionError(dir, "no PNG or JPEG frames in the folder (expected numbered frames "
                                "such as frame_0000.png, frame_0001.png, …)");
    std::vector<std::string> files;
    int64_t expect = byNumber.begin()->first;
    for (const auto& [n, f] : byNumber) {
        if (n != expect)
            throw SessionError(dir, fmt::format("frame numbers jump from {} to {} ({}): a frame "
                                                "is missing",
                                                expect - 1, n, stdfs::path(f).filename().string()));
        files.push_back(f);
        ++expect;
    }
    return files;
}

} // namespace

VideoReader::VideoReader(const std::string& path) : path_(path)
{
    std::error_code ec;
    const auto st = stdfs::status(path, ec);
    if (ec || !stdfs::exists(st))
        throw SessionError(path, "cannot open: " + (ec ? ec.message() : "no such file or folder"));
    if (stdfs::is_directory(st)) {
        folder_ = true;
        files_ = listFrames(path);
        declared_ = static_cast<int64_t>(files_.size());
        return;
    }
    {
        std::ifstream probe(path, std::ios::binary);
        char c = 0;
        if (!probe) throw SessionError(path, std::string("cannot open: ") + std::strerror(errno));
        if (!probe.get(c)) throw SessionError(path, "empty file, not a video");
    }
    // FFmpeg only: OpenCV's other backends would read an image sequence pattern or a camera.
    cap_.open(path, cv::CAP_FFMPEG);
    if (!cap_.isOpened())
        throw SessionError(path, "not a video FFmpeg can read (not a video, or a truncated or "
                                 "corrupt file)");
    const double n = cap_.get(cv::CAP_PROP_FRAME_COUNT);
    declared_ = n > 0 && n < 1e12 ? static_cast<int64_t>(std::llround(n)) : 0;
    fps_ = cap_.get(cv::CAP_PROP_FPS);
}

bool VideoReader::next(cv::Mat& bgr)
{
    if (folder_) {
        if (read_ >= static_cast<int64_t>(files_.size())) return false;
        const std::string& f = files_[static_cast<size_t>(read_)];
        try {
            bgr = cv::imread(f, cv::IMREAD_COLOR);
        } catch (const cv::Exception& e) {
            throw SessionError(f, "cannot decode the image: " + std::string(e.what()));
        }
        if (bgr.empty())
            throw SessionError(f, "cannot read the image (unreadable, or not a PNG/JPEG)");
    } else {
        bool ok = false;
        try {
            ok = cap_.read(bgr);
        } catch (const cv::Exception& e) {
            throw SessionError(path_,
                               fmt::format("decoding failed at frame {}: {}", read_, e.what()));
        }
        if (!ok || bgr.empty()) {
            // A container that said how many frames it holds and ended early is cut off (one
            // frame less can be the rounding of a count estimated from duration and rate).
            if (declared_ > 0 && read_ + 1 < declared_)
                throw SessionError(path_, fmt::format("the stream ends after {} of the {} frames "
                                                      "the container declares (truncated or "
                                                      "corrupt)",
                                                      read_, declared_));
            return false;
        }
    }
    if (bgr.type() != CV_8UC3)
        throw SessionError(folder_ ? files_[static_cast<size_t>(read_)] : path_,
                           fmt::format("frame {}: unsupported pixel format", read_));
    if (read_ == 0) {
        size_ = bgr.size();
    } else if (bgr.size() != size_) {
        const std::string where = folder_ ? files_[static_cast<size_t>(read_)] : path_;
        throw SessionError(where,
                           fmt::format("frame {} is {}x{}, frame 0 was {}x{}: all frames "
                                       "must have one size",
                                       read_, bgr.cols, bgr.rows, size_.width, size_.height));
    }
    ++read_;
    return true;
}

std::string VideoReader::contentHash(const VideoReader& r, const std::atomic<bool>* cancel)
{
    if (!r.folder_) return sha256File(r.path_);
    Sha256 list;
    for (const std::string& f : r.files_) {
        if (cancel && cancel->load(std::memory_order_relaxed)) break;
        list.update(sha256File(f) + "  " + stdfs::path(f).filename().string() + "\n");
    }
    return list.hex();
}

uint64_t VideoReader::contentBytes(const VideoReader& r)
{
    std::error_code ec;
    if (!r.folder_) return stdfs::file_size(r.path_, ec);
    uint64_t n = 0;
    for (const std::string& f : r.files_)
        n += stdfs::file_size(f, ec);
    return n;
}

} // namespace fs::video
