// The explorer's reads of the session file (explore_impl.h): allocation attributes and call
// stacks. The only SQL of the explore module, in one place so that it moves to core/store/.
#include "explore_impl.h"

namespace fs::analysis {

int64_t readAttributeRows(Session& s, uint32_t device, Level level, int64_t afterId, int64_t limit,
                          const std::function<void(const AttributeRow&)>& row)
{
    Stmt st =
        s.db().prepare("SELECT id, requested_size, stream, tag, stack FROM allocations"
                       // "+": a rowid range scan, never the time index and a sort
                       " WHERE id > ?3 AND +device = ?1 AND +level = ?2 ORDER BY id LIMIT ?4");
    st.bind(1, device).bind(2, static_cast<int>(level)).bind(3, afterId).bind(4, limit);
    AttributeRow r;
    int64_t n = 0;
    while (st.step()) {
        ++n;
        r.id = st.i64(0);
        r.requestedKnown = !st.isNull(1);
        r.requested = r.requestedKnown ? st.u64(1) : 0;
        r.stream = static_cast<uint32_t>(st.i64(2));
        r.tag = st.isNull(3) ? 0 : static_cast<uint32_t>(st.i64(3));
        r.stack = st.isNull(4) ? 0 : static_cast<uint32_t>(st.i64(4));
        row(r);
    }
    return n;
}

std::vector<std::pair<uint32_t, std::vector<std::string>>> readStacks(Session& s)
{
    std::vector<std::pair<uint32_t, std::vector<std::string>>> out;
    Stmt st = s.db().prepare("SELECT k.id, s.text FROM stacks k JOIN strings s ON s.id = k.frame"
                             " ORDER BY k.id, k.depth");
    while (st.step()) {
        const auto id = static_cast<uint32_t>(st.i64(0));
        if (out.empty() || out.back().first != id) out.emplace_back(id, std::vector<std::string>{});
        out.back().second.push_back(st.text(1));
    }
    return out;
}

} // namespace fs::analysis
