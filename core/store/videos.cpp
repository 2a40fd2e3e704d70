#include "videos.h"

#include "session_access.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace fs::store {

namespace {

constexpr const char* kVideoColumns =
    "id, path, source, sha256, bytes, is_folder, width, height, fps, frame_count,"
    " frames_per_session_frame, session_frame_offset, work_width, work_height, ssim_width,"
    " ssim_height, thumb_width, thumb_height, computed_at, computed_by";

VideoRow readVideoRow(const Stmt& st)
{
    VideoRow v;
    v.id = st.i64(0);
    v.path = st.text(1);
    v.source = st.text(2);
    v.sha256 = st.text(3);
    v.bytes = st.u64(4);
    v.folder = st.i64(5) != 0;
    v.width = static_cast<int>(st.i64(6));
    v.height = static_cast<int>(st.i64(7));
    v.fps = st.isNull(8) ? 0 : st.f64(8);
    v.frames = st.i64(9);
    v.perSessionFrame = st.i64(10);
    v.sessionFrameOffset = st.i64(11);
    v.workWidth = static_cast<int>(st.i64(12));
    v.workHeight = static_cast<int>(st.i64(13));
    v.ssimWidth = static_cast<int>(st.i64(14));
    v.ssimHeight = static_cast<int>(st.i64(15));
    v.thumbWidth = static_cast<int>(st.i64(16));
    v.thumbHeight = static_cast<int>(st.i64(17));
    v.computedAt = st.text(18);
    v.computedBy = st.text(19);
    return v;
}

std::optional<VideoRow> videoOf(const Db& db)
{
    if (!db.hasTable("videos")) return std::nullopt;
    Stmt st =
        db.prepare(fmt::format("SELECT {} FROM videos ORDER BY id DESC LIMIT 1", kVideoColumns));
    if (!st.step()) return std::nullopt;
    return readVideoRow(st);
}

// name -> source of the frame metrics with those names whose source is not a video.
std::map<std::string, std::string> otherSources(const Db& db, const std::vector<std::string>& names)
{
    std::map<std::string, std::string> out;
    Stmt st = db.prepare("SELECT source FROM frame_metrics WHERE name = ?1 AND source NOT LIKE "
                         "'video: %' LIMIT 1");
    for (const std::string& n : names) {
        st.bind(1, n);
        if (st.step()) out[n] = st.text(0);
        st.reset();
    }
    return out;
}

} // namespace

VideoTarget videoTarget(const std::string& sessionPath, const std::vector<std::string>& names)
{
    const Session s = Session::open(sessionPath);
    VideoTarget t;
    Stmt st = SessionAccess::db(s).prepare("SELECT idx FROM frames ORDER BY idx");
    while (st.step())
        t.frames.push_back(st.i64(0));
    t.conflicts = otherSources(SessionAccess::db(s), names);
    t.current = videoOf(SessionAccess::db(s));
    return t;
}

void writeVideo(const std::string& sessionPath, const VideoWrite& w, bool replaceOthers)
{
    const SessionSummary sum = Session::open(sessionPath).summary(false);
    if (sum.health.recording)
        throw SessionError(sessionPath, "still being recorded: add the video once the recording "
                                        "has stopped");
    Db db(sessionPath, SQLITE_OPEN_READWRITE);
    db.exec("BEGIN IMMEDIATE");
    try {
        std::set<std::string> names;
        for (const auto& [frame, values] : w.sessionMetrics)
            for (const auto& [name, v] : values)
                names.insert(name);
        const auto others = otherSources(db, {names.begin(), names.end()});
        if (!others.empty() && !replaceOthers)
            throw SessionError(sessionPath,
                               fmt::format("already holds {} from '{}': the video's values would "
                                           "replace them (pass --replace to allow it)",
                                           others.begin()->first, others.begin()->second));
        createMissingTables(db);
        // One video at a time: its metrics share names with the previous one's, and a frame
        // metric has one value per frame and name, so two videos would mix.
        db.exec("DELETE FROM frame_metrics WHERE source LIKE 'video: %'");
        db.exec("DELETE FROM video_frame_metrics");
        db.exec("DELETE FROM video_frames");
        db.exec("DELETE FROM videos");
        db.exec("DELETE FROM sources WHERE kind = 'video'");
        if (replaceOthers) {
            Stmt del = db.prepare("DELETE FROM frame_metrics WHERE name = ?1");
            for (const auto& [name, source] : others)
                del.bind(1, name).run();
        }
        const VideoRow& v = w.video;
        Stmt ins = db.prepare(fmt::format("INSERT INTO videos({}) VALUES(?1, ?2, ?3, ?4, ?5, ?6, "
                                          "?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, "
                                          "?18, ?19, ?20)",
                                          kVideoColumns));
        ins.bind(1, int64_t{1}).bind(2, v.path).bind(3, v.source).bind(4, v.sha256);
        ins.bind(5, v.bytes).bind(6, v.folder ? 1 : 0).bind(7, v.width).bind(8, v.height);
        if (v.fps > 0)
            ins.bind(9, v.fps);
        else
            ins.bindNull(9);
        ins.bind(10, v.frames).bind(11, v.perSessionFrame).bind(12, v.sessionFrameOffset);
        ins.bind(13, v.workWidth).bind(14, v.workHeight).bind(15, v.ssimWidth);
        ins.bind(16, v.ssimHeight).bind(17, v.thumbWidth).bind(18, v.thumbHeight);
        ins.bind(19, v.computedAt).bind(20, v.computedBy).run();
        db.prepare("INSERT INTO sources(kind, path, detail) VALUES('video', ?1, ?2)")
            .bind(1, v.path)
            .bind(2, fmt::format("sha256 {}, {} frames {}x{}, --map {}{}", v.sha256, v.frames,
                                 v.width, v.height, v.perSessionFrame,
                                 v.sessionFrameOffset ? fmt::format(":{}", v.sessionFrameOffset)
                                                      : std::string()))
            .run();
        Stmt frame = db.prepare("INSERT INTO video_frames(video, idx, session_frame, reference, "
                                "thumbnail, flow_thumbnail) VALUES(1, ?1, ?2, ?3, ?4, ?5)");
        Stmt metric = db.prepare(
            "INSERT INTO video_frame_metrics(video, idx, name, value) VALUES(1, ?1, ?2, ?3)");
        for (const VideoFrameRow& f : w.frames) {
            frame.bind(1, f.index).bind(2, f.sessionFrame);
            if (f.reference >= 0)
                frame.bind(3, f.reference);
            else
                frame.bindNull(3);
            frame.bindBlob(4, f.thumbnail.data(), f.thumbnail.size());
            if (f.flow.empty())
                frame.bindNull(5);
            else
                frame.bindBlob(5, f.flow.data(), f.flow.size());
            frame.run();
            for (const auto& [name, value] : f.metrics)
                metric.bind(1, f.index).bind(2, name).bind(3, value).run();
        }
        Stmt fm = db.prepare("INSERT OR REPLACE INTO frame_metrics(frame, name, value, source) "
                             "VALUES(?1, ?2, ?3, ?4)");
        for (const auto& [sessionFrame, values] : w.sessionMetrics)
            for (const auto& [name, value] : values)
                fm.bind(1, sessionFrame).bind(2, name).bind(3, value).bind(4, v.source).run();
        db.exec("COMMIT");
    } catch (...) {
        db.exec("ROLLBACK");
        throw;
    }
}

std::optional<VideoRow> video(const Session& s)
{
    return videoOf(SessionAccess::db(s));
}

std::vector<VideoFrameRow> videoFrames(const Session& s)
{
    std::vector<VideoFrameRow> out;
    if (!SessionAccess::db(s).hasTable("video_frames")) return out;
    {
        Stmt st = SessionAccess::db(s).prepare(
            "SELECT idx, session_frame, reference FROM video_frames ORDER BY video, idx");
        while (st.step()) {
            VideoFrameRow f;
            f.index = st.i64(0);
            f.sessionFrame = st.i64(1);
            f.reference = st.isNull(2) ? -1 : st.i64(2);
            out.push_back(std::move(f));
        }
    }
    Stmt st = SessionAccess::db(s).prepare(
        "SELECT idx, name, value FROM video_frame_metrics ORDER BY idx");
    size_t i = 0;
    while (st.step()) {
        const int64_t idx = st.i64(0);
        while (i < out.size() && out[i].index < idx)
            ++i;
        if (i < out.size() && out[i].index == idx) out[i].metrics[st.text(1)] = st.f64(2);
    }
    return out;
}

std::shared_ptr<const VideoImages> VideoImages::open(const std::string& sessionPath)
{
    Session s = Session::open(sessionPath, false);
    const std::optional<VideoRow> v = store::video(s);
    if (!v) return nullptr;
    std::shared_ptr<VideoImages> out(new VideoImages(std::move(s)));
    out->video_ = *v;
    const std::vector<VideoFrameRow> frames = videoFrames(out->session_);
    for (const VideoFrameRow& f : frames)
        out->bySessionFrame_[f.sessionFrame].push_back(f.index);
    // The frame a chunk shows: its clearest break (the largest warp_error_z), else its first.
    std::map<int64_t, double> z;
    for (const VideoFrameRow& f : frames)
        if (auto it = f.metrics.find("warp_error_z"); it != f.metrics.end())
            z[f.index] = it->second;
    for (auto& [sf, chunk] : out->bySessionFrame_) {
        int64_t best = chunk.front();
        for (int64_t f : chunk)
            if (z.count(f) && (!z.count(best) || z[f] > z[best])) best = f;
        out->shown_[sf] = best;
    }
    return out;
}

std::vector<int64_t> VideoImages::videoFramesOf(int64_t sessionFrame) const
{
    auto it = bySessionFrame_.find(sessionFrame);
    return it == bySessionFrame_.end() ? std::vector<int64_t>() : it->second;
}

int64_t VideoImages::shownFrame(int64_t sessionFrame) const
{
    auto it = shown_.find(sessionFrame);
    return it == shown_.end() ? -1 : it->second;
}

int64_t VideoImages::sessionFrameOf(int64_t videoFrame) const
{
    if (videoFrame < 0 || videoFrame >= video_.frames) return -1;
    return video_.sessionFrameOffset + videoFrame / std::max<int64_t>(1, video_.perSessionFrame);
}

std::vector<uint8_t> VideoImages::blob(const char* column, int64_t videoFrame) const
{
    std::lock_guard lock(mutex_);
    Stmt st = SessionAccess::db(session_).prepare(
        fmt::format("SELECT {} FROM video_frames WHERE video = ?1 AND idx = ?2", column));
    st.bind(1, video_.id).bind(2, videoFrame);
    return st.step() && !st.isNull(0) ? st.blob(0) : std::vector<uint8_t>();
}

std::vector<uint8_t> VideoImages::thumbnail(int64_t videoFrame) const
{
    return blob("thumbnail", videoFrame);
}

std::vector<uint8_t> VideoImages::flow(int64_t videoFrame) const
{
    return blob("flow_thumbnail", videoFrame);
}

} // namespace fs::store
