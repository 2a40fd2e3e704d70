// The explorer's reads of the session file (explore_impl.h): allocation attributes and call
// stacks, through the store's typed readers (core/store/, the only code with SQL).
#include "explore_impl.h"

#include "core/store/allocations.h"
#include "core/store/catalog.h"

namespace fs::analysis {

int64_t readAttributeRows(Session& s, uint32_t device, Level level, int64_t afterId, int64_t limit,
                          const std::function<void(const AttributeRow&)>& row)
{
    const std::vector<store::AllocationAttributes> rows =
        store::allocationAttributes(s, device, static_cast<int64_t>(level), afterId, limit);
    AttributeRow r;
    for (const store::AllocationAttributes& a : rows) {
        r.id = a.id;
        r.requestedKnown = a.requestedSize.has_value();
        r.requested = a.requestedSize.value_or(0);
        r.stream = static_cast<uint32_t>(a.stream);
        r.tag = static_cast<uint32_t>(a.tag.value_or(0));
        r.stack = static_cast<uint32_t>(a.stack.value_or(0));
        r.meta = static_cast<uint32_t>(a.userMetadata.value_or(0));
        row(r);
    }
    return static_cast<int64_t>(rows.size());
}

std::vector<std::pair<uint32_t, std::vector<std::string>>> readStacks(Session& s)
{
    std::vector<std::pair<uint32_t, std::vector<std::string>>> out;
    for (auto& [id, frames] : store::allStackTexts(s))
        out.emplace_back(static_cast<uint32_t>(id), std::move(frames));
    return out;
}

} // namespace fs::analysis
