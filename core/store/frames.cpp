#include "frames.h"

#include "session_access.h"

namespace fs::store {

namespace {

std::vector<FrameRow> frameRows(const Session& s, const char* sql)
{
    Stmt st = SessionAccess::db(s).prepare(sql);
    std::vector<FrameRow> out;
    while (st.step())
        out.push_back({st.i64(0), st.i64(1), optI64(st, 2)});
    return out;
}

} // namespace

std::vector<FrameRow> framesByStart(const Session& s)
{
    return frameRows(s, "SELECT idx, start_ns, end_ns FROM frames ORDER BY start_ns, idx");
}

std::vector<FrameRow> framesByIndex(const Session& s)
{
    return frameRows(s, "SELECT idx, start_ns, end_ns FROM frames ORDER BY idx");
}

std::vector<FrameMetricRow> frameMetrics(const Session& s)
{
    Stmt st = SessionAccess::db(s).prepare("SELECT frame, name, value, source FROM frame_metrics");
    std::vector<FrameMetricRow> out;
    while (st.step())
        out.push_back({st.i64(0), st.text(1), st.f64(2), st.text(3)});
    return out;
}

void writeFrameMetrics(const std::string& path, const std::vector<FrameMetricRow>& rows)
{
    Db db(path, SQLITE_OPEN_READWRITE);
    db.exec("PRAGMA busy_timeout=5000");
    db.exec("BEGIN IMMEDIATE");
    try {
        Stmt st = db.prepare(
            "INSERT OR REPLACE INTO frame_metrics(frame, name, value, source) VALUES(?1,?2,?3,?4)");
        for (const FrameMetricRow& r : rows)
            st.bind(1, r.frame).bind(2, r.name).bind(3, r.value).bind(4, r.source).run();
        db.exec("COMMIT");
    } catch (...) {
        db.exec("ROLLBACK");
        throw;
    }
}

std::vector<MarkerRow> markers(const Session& s)
{
    Stmt st = SessionAccess::db(s).prepare("SELECT m.time_ns, m.end_ns, s.text FROM markers m"
                                           " JOIN strings s ON s.id = m.message ORDER BY m.id");
    std::vector<MarkerRow> out;
    while (st.step())
        out.push_back({st.i64(0), optI64(st, 1), st.text(2)});
    return out;
}

} // namespace fs::store
