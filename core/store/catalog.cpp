#include "catalog.h"

#include "session_access.h"

namespace fs::store {

std::vector<DeviceRow> devices(const Session& s)
{
    Stmt st =
        SessionAccess::db(s).prepare("SELECT id, name, capacity_bytes FROM devices ORDER BY id");
    std::vector<DeviceRow> out;
    while (st.step())
        out.push_back({st.i64(0), st.text(1), optU64(st, 2)});
    return out;
}

std::vector<ProcessRow> processes(const Session& s)
{
    Stmt st = SessionAccess::db(s).prepare("SELECT pid, command_line, start_ns FROM processes");
    std::vector<ProcessRow> out;
    while (st.step())
        out.push_back(
            {st.i64(0), st.isNull(1) ? std::nullopt : std::optional(st.text(1)), optI64(st, 2)});
    return out;
}

std::vector<std::string> strings(const Session& s, size_t maxId)
{
    Stmt st = SessionAccess::db(s).prepare("SELECT id, text FROM strings ORDER BY id");
    std::vector<std::string> out;
    while (st.step()) {
        const auto id = static_cast<size_t>(st.i64(0));
        if (id > maxId) break;
        if (out.size() <= id) out.resize(id + 1);
        out[id] = st.text(1);
    }
    return out;
}

std::string stringText(const Session& s, int64_t id)
{
    Stmt st = SessionAccess::db(s).prepare("SELECT text FROM strings WHERE id = ?1");
    st.bind(1, id);
    return st.step() ? st.text(0) : std::string();
}

std::vector<StackFrameRow> stackFrames(const Session& s)
{
    Stmt st = SessionAccess::db(s).prepare("SELECT id, frame FROM stacks ORDER BY id, depth");
    std::vector<StackFrameRow> out;
    while (st.step())
        out.push_back({st.i64(0), st.i64(1)});
    return out;
}

std::vector<std::pair<int64_t, std::vector<std::string>>> allStackTexts(const Session& s)
{
    Stmt st = SessionAccess::db(s).prepare("SELECT k.id, s.text FROM stacks k JOIN strings s ON"
                                           " s.id = k.frame ORDER BY k.id, k.depth");
    std::vector<std::pair<int64_t, std::vector<std::string>>> out;
    while (st.step()) {
        const int64_t id = st.i64(0);
        if (out.empty() || out.back().first != id) out.emplace_back(id, std::vector<std::string>{});
        out.back().second.push_back(st.text(1));
    }
    return out;
}

std::vector<std::string> stackTexts(const Session& s, int64_t stack)
{
    Stmt st = SessionAccess::db(s).prepare("SELECT s.text FROM stacks k JOIN strings s ON"
                                           " s.id = k.frame WHERE k.id=?1 ORDER BY k.depth");
    st.bind(1, stack);
    std::vector<std::string> out;
    while (st.step())
        out.push_back(st.text(0));
    return out;
}

std::optional<SimTruthRow> simTruthFrame(const Session& s, int64_t frame)
{
    Stmt st = SessionAccess::db(s).prepare("SELECT attention_calls, workspace_failures, ooms"
                                           " FROM sim_truth_frames WHERE frame=?1");
    st.bind(1, frame);
    if (!st.step()) return std::nullopt;
    return SimTruthRow{st.i64(0), st.i64(1), st.i64(2)};
}

std::vector<std::string> simCausalKernels(const Session& s, int64_t frame)
{
    Stmt st = SessionAccess::db(s).prepare("SELECT kernel FROM sim_truth_kernels WHERE frame=?1"
                                           " AND calls > 0 AND lowers_coherence");
    st.bind(1, frame);
    std::vector<std::string> out;
    while (st.step())
        out.push_back(st.text(0));
    return out;
}

std::vector<SimTruthCauseRow> simTruthCauses(const Session& s, int64_t frame)
{
    const Db& db = SessionAccess::db(s);
    std::vector<SimTruthCauseRow> out;
    if (!db.hasTable("sim_truth_causes")) return out;
    Stmt st = db.prepare("SELECT mechanism, cause_frame, quality_factor FROM sim_truth_causes"
                         " WHERE frame=?1 ORDER BY quality_factor, mechanism");
    st.bind(1, frame);
    while (st.step())
        out.push_back({st.text(0), st.i64(1), st.f64(2)});
    return out;
}

} // namespace fs::store
