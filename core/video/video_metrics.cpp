#include "video_metrics.h"

#include "frame_measure.h"
#include "stage_clock.h"
#include "video_reader.h"

#include "core/store/sqlite.h" // SessionError

#include <opencv2/core/utility.hpp>

#include <condition_variable>
#include <deque>
#include <exception>
#include <future>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>

namespace fs::video {

namespace {

bool cancelled(const AnalyzeOptions& o)
{
    return o.cancel && o.cancel->load(std::memory_order_relaxed);
}

// OpenCV's own thread pool off while we run: our three threads already fill two cores, and its
// parallel loops inside DIS on small images cost more than they bring.
class SequentialOpenCv
{
public:
    SequentialOpenCv() : threads_(cv::getNumThreads()) { cv::setNumThreads(0); }
    ~SequentialOpenCv() { cv::setNumThreads(threads_); }
    SequentialOpenCv(const SequentialOpenCv&) = delete;
    SequentialOpenCv& operator=(const SequentialOpenCv&) = delete;

private:
    int threads_;
};

// Frames decoded and reduced on a thread of their own, handed over in order through a short
// queue (a few frames: decoding runs ahead of the flows, never far).
class Decoder
{
public:
    Decoder(VideoReader& reader, const AnalyzeOptions& o, bool thumbnails,
            std::set<int64_t> only = {})
        : reader_(reader), o_(o), thumbnails_(thumbnails), only_(std::move(only))
    {
        thread_ = std::thread([this] { run(); });
    }
    ~Decoder()
    {
        {
            std::lock_guard lock(mutex_);
            stop_ = true;
        }
        changed_.notify_all();
        thread_.join();
    }
    Decoder(const Decoder&) = delete;
    Decoder& operator=(const Decoder&) = delete;
    // The next frame; nullopt at the end. Rethrows the decoding thread's error.
    std::optional<Prepared> next()
    {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [this] { return !queue_.empty() || done_; });
        if (!queue_.empty()) {
            Prepared p = std::move(queue_.front());
            queue_.pop_front();
            changed_.notify_all();
            return p;
        }
        if (error_) std::rethrow_exception(error_);
        return std::nullopt;
    }
    const Geometry& geometry()
    {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [this] { return haveGeometry_ || done_; });
        return geometry_;
    }

private:
    void run()
    {
        try {
            cv::Mat bgr;
            for (int64_t i = 0; decode(bgr); ++i) {
                if (cancelled(o_)) break;
                if (i == 0) {
                    std::lock_guard lock(mutex_);
                    geometry_ = Geometry::of(bgr.size(), o_.workLongSide, o_.thumbLongSide);
                    haveGeometry_ = true;
                    changed_.notify_all();
                }
                if (!only_.empty() && !only_.count(i)) {
                    if (i > *only_.rbegin()) break;
                    continue;
                }
                Prepared p = prepare(bgr, i, geometry_, thumbnails_);
                std::unique_lock lock(mutex_);
                changed_.wait(lock, [this] { return queue_.size() < kDepth || stop_; });
                if (stop_) break;
                queue_.push_back(std::move(p));
                changed_.notify_all();
            }
        } catch (...) {
            std::lock_guard lock(mutex_);
            error_ = std::current_exception();
        }
        std::lock_guard lock(mutex_);
        done_ = true;
        changed_.notify_all();
    }

    bool decode(cv::Mat& bgr)
    {
        const StageTimer t(Stage::Decode);
        return reader_.next(bgr);
    }

    static constexpr size_t kDepth = 4;
    VideoReader& reader_;
    const AnalyzeOptions& o_;
    bool thumbnails_;
    std::set<int64_t> only_;
    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<Prepared> queue_;
    Geometry geometry_;
    bool haveGeometry_ = false;
    bool done_ = false;
    bool stop_ = false;
    std::exception_ptr error_;
    std::thread thread_;
};

// Both flows of a pair at once: the backward one on a second thread.
class PairMeasure
{
public:
    explicit PairMeasure(const Geometry& g) : g_(g), fwd_(makeFlow(g)), bwd_(makeFlow(g)) {}
    analysis::VideoPair operator()(const Prepared& ref, const Prepared& cur,
                                   std::vector<uint8_t>* flowPng)
    {
        cv::Mat forward, backward;
        auto back = std::async(std::launch::async, [&] {
            const StageTimer t(Stage::FlowBackward);
            bwd_->calc(cur.gray, ref.gray, backward);
        });
        {
            const StageTimer t(Stage::FlowForward);
            fwd_->calc(ref.gray, cur.gray, forward);
        }
        back.get();
        return measurePair(ref, cur, forward, backward, g_, flowPng);
    }

private:
    const Geometry& g_;
    cv::Ptr<cv::DISOpticalFlow> fwd_, bwd_;
};

} // namespace

VideoAnalysis analyzeVideo(const std::string& path, const AnalyzeOptions& o)
{
    const SequentialOpenCv sequential;
    VideoReader reader(path);
    VideoAnalysis a;
    a.path = path;
    a.folder = reader.isFolder();
    a.fps = reader.fps();
    // The content hash reads the file once more, beside the decoding.
    if (StageClock::enabled()) StageClock::instance().reset();
    auto hash = std::async(std::launch::async, [&] {
        const StageTimer t(Stage::Hash);
        return std::make_pair(VideoReader::contentHash(reader, o.cancel),
                              VideoReader::contentBytes(reader));
    });
    Geometry g;
    {
        Decoder decoder(reader, o, o.thumbnails);
        std::optional<Prepared> prev;
        std::optional<PairMeasure> measure;
        while (std::optional<Prepared> cur = decoder.next()) {
            if (cancelled(o)) break;
            if (!measure) {
                g = decoder.geometry();
                measure.emplace(g);
            }
            VideoImages img;
            img.thumbnailJpeg = std::move(cur->thumbnailJpeg);
            if (prev) a.pairs.push_back((*measure)(*prev, *cur, &img.flowPng));
            a.images.push_back(std::move(img));
            prev = std::move(cur);
            if (o.progress)
                o.progress(static_cast<int64_t>(a.images.size()), reader.declaredFrames());
        }
    }
    const auto [sha, bytes] = hash.get();
    if (cancelled(o)) throw Cancelled();
    a.frames = static_cast<int64_t>(a.images.size());
    if (a.frames < 2)
        throw SessionError(path,
                           fmt::format("{} frame{}: the metrics compare consecutive frames "
                                       "and need at least 2",
                                       a.frames == 0 ? "no" : "only 1", a.frames == 1 ? "" : "s"));
    a.sha256 = sha;
    a.bytes = bytes;
    a.width = g.video.width;
    a.height = g.video.height;
    a.workWidth = g.work.width;
    a.workHeight = g.work.height;
    a.ssimWidth = g.ssim.width;
    a.ssimHeight = g.ssim.height;
    a.thumbWidth = g.thumbnail.width;
    a.thumbHeight = g.thumbnail.height;

    // Isolated broken frames: the frames around each candidate again, from a second decode that
    // stops after the last one needed (only a video with such breaks pays for it).
    const std::vector<int64_t> candidates = analysis::isolatedBreakCandidates(a.pairs);
    std::vector<std::vector<uint8_t>> skipFlows;
    if (!candidates.empty()) {
        std::set<int64_t> need;
        for (int64_t i : candidates) {
            need.insert(i - 1);
            need.insert(i + 1);
        }
        VideoReader again(path);
        Decoder decoder(again, o, false, need);
        std::map<int64_t, Prepared> got;
        while (std::optional<Prepared> p = decoder.next())
            got.emplace(p->index, std::move(*p));
        if (cancelled(o)) throw Cancelled();
        PairMeasure measure(g);
        for (int64_t i : candidates) {
            auto r = got.find(i - 1), c = got.find(i + 1);
            if (r == got.end() || c == got.end())
                throw SessionError(path, fmt::format("frames {} and {} could not be decoded "
                                                     "again (the file changed while it was read?)",
                                                     i - 1, i + 1));
            std::vector<uint8_t> flow;
            a.skips.push_back(measure(r->second, c->second, &flow));
            skipFlows.push_back(std::move(flow));
        }
    }
    a.scores = analysis::scoreVideo(a.pairs, a.skips);
    // A frame scored against an earlier one shows the flow of that comparison.
    for (const auto& sc : a.scores)
        if (sc.reference != sc.frame - 1)
            for (size_t k = 0; k < a.skips.size(); ++k)
                if (a.skips[k].frame == sc.frame)
                    a.images[static_cast<size_t>(sc.frame)].flowPng = std::move(skipFlows[k]);
    if (StageClock::enabled()) StageClock::instance().print(a.frames);
    return a;
}

int64_t declaredFrames(const std::string& path)
{
    return VideoReader(path).declaredFrames();
}

std::string opencvVersion()
{
    return CV_VERSION;
}

} // namespace fs::video
