// Memory by category (docs/analysis.md "Memory by category"): each allocation is put in one of
// parameters, gradients, optimizer state, activations, KV cache, workspace or other, inferred
// from what the source recorded about it: its call stack, its tag, PyTorch's user_metadata and
// compile_context, and the names of the ranges (NVTX-like) open when it was made. Rules are
// patterns matched against those texts, the user's (settings file, "categories") before the
// defaults here; the first rule that matches decides, and an allocation no rule matches is
// "other". The one place categories are computed: `state --by category`, the report's line at
// the peak and the views all read these.
#pragma once

#include "core/events.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fs::analysis {

class Engine;
class Explorer;

enum class MemoryCategory : uint8_t {
    Parameters,
    Gradients,
    OptimizerState,
    Activations,
    KvCache,
    Workspace,
    Other,
};
constexpr int kMemoryCategoryCount = 7;
// "parameters", "gradients", "optimizer_state", "activations", "kv_cache", "workspace", "other".
const char* memoryCategoryName(MemoryCategory c);
// A name as memoryCategoryName writes it; '-' or ' ' for '_' and any case also read.
bool parseMemoryCategory(std::string_view s, MemoryCategory& out);

// A pattern and the category it names. The pattern is matched, case-insensitively and with a
// backslash read as '/' (Windows paths), against each line of an allocation's texts (one line
// per stack frame, the tag, each line of user_metadata and compile_context, each enclosing
// range's name): it matches when some line contains it, where '*' in the pattern stands for any
// run of characters within the line.
struct CategoryRule
{
    std::string pattern;
    MemoryCategory category = MemoryCategory::Other;
    bool operator==(const CategoryRule&) const = default;
};

// The built-in rules, in the order they are tried (docs/analysis.md lists them): workspace,
// KV cache, optimizer state, parameters, gradients, then "forward" -> activations.
const std::vector<CategoryRule>& defaultCategoryRules();

// Whether a pattern matches some line of text (as CategoryRule says).
bool categoryPatternMatches(std::string_view pattern, std::string_view text);

// The category of an allocation whose texts are `text` (lines joined by '\n'): the first of
// userRules, then the defaults, that matches; Other when none does.
MemoryCategory categorise(std::string_view text, const std::vector<CategoryRule>& userRules);

struct CategoryRow
{
    MemoryCategory category = MemoryCategory::Other;
    uint64_t bytes = 0;
    int64_t blocks = 0;
};

// The live blocks of a track at an instant by category. rows: every category once, by bytes
// descending (ties in MemoryCategory order); their bytes sum to totalBytes, which equals the
// state's allocatedBytes + allocatedOutsideBytes at `time`.
struct CategoryBreakdown
{
    uint32_t device = 0;
    Level level = Level::Framework;
    int64_t time = 0;
    std::vector<CategoryRow> rows;
    uint64_t totalBytes = 0;
    int64_t blocks = 0;
    bool stacksRecorded = false; // some live block has a stack, a tag or a note to go by
    uint64_t bytesOf(MemoryCategory c) const;
};

// The first instant of a track's allocated-bytes peak (SummaryFigures::peakAllocatedAtNs; the
// outside peak's on a track without regions); kNoTime when nothing is ever allocated.
int64_t allocatedPeakTime(const Engine& e, uint32_t device, Level level);

// The breakdown on an engine (a temporary explorer reads the attributes it needs).
CategoryBreakdown categoriesAt(const Engine& e, uint32_t device, Level level, int64_t t,
                               const std::vector<CategoryRule>& userRules);

// One line naming the categories that hold memory, largest first:
// "activations 1.50 GiB (60%), parameters 1.00 GiB (40%)"; "nothing allocated" when empty.
std::string categoryLine(const CategoryBreakdown& b);

} // namespace fs::analysis
