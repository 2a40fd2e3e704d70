// Building blocks shared by the two scene loaders: loadScene (a whole file, once) and LiveScene
// (a file a recording is still writing, re-read in increments). Internal to fragscope_render.
#pragma once

#include "core/sqlite.h"
#include "render/scene.h"

#include <array>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace fs::render::detail {

void checkCancel(const LoadProgress& lp);
void report(const LoadProgress& lp, int pct, const std::string& stage);

// One state change of a level, in replay order.
struct ReplayEv
{
    enum Kind { RegionCreate = 0, RegionDestroy = 1, Alloc = 2, Free = 3 };
    int64_t t;
    int order; // at one time: frees, then region destroys, region creates, allocs
    int kind;
    size_t idx; // into LevelData::regions or ::allocs
};
ReplayEv replayEv(int64_t t, ReplayEv::Kind kind, size_t idx);
void sortReplayEvents(std::vector<ReplayEv>& evs);

// Replays one level's regions and allocations in time order, keeping each region's free
// fragments, so F, the largest fragment and the fragment entropy are exact at every sample. It
// can be advanced in steps (LiveScene) as long as each step's events come after the last's.
class Replay
{
public:
    // Applies evs (sorted by sortReplayEvents); before each event, appends to out a sample for
    // every time in times[next...] earlier than that event. Times not reached stay pending.
    void advance(const LevelData& ld, const std::vector<ReplayEv>& evs,
                 const std::vector<int64_t>& times, size_t& next, std::vector<StateSample>& out,
                 const LoadProgress* lp = nullptr);
    // The same over a whole level from an empty state, in the order sortReplayEvents gives,
    // without building the event list: ld.allocs must be sorted by (allocNs, id) (loadScene's
    // order), so only the frees and region events need sorting. Samples every time in times.
    void replayLevel(const LevelData& ld, const std::vector<int64_t>& times,
                     std::vector<StateSample>& out, const LoadProgress* lp = nullptr);
    StateSample sample(int64_t t) const;

private:
    using FragMap = std::map<uint64_t, uint64_t>; // address -> size, one region's free fragments
    void apply(const LevelData& ld, int kind, size_t idx, int64_t t);
    void addSize(uint64_t s);
    void dropSize(uint64_t s);
    void compactSizes();
    void regionCreate(const RegionRec& r);
    void regionDestroy(const RegionRec& r);
    void event(uint64_t size, int64_t t);
    void expire(uint64_t size);
    void alloc(const AllocRec& a, int64_t t);
    void release(const AllocRec& a, int64_t t);

    std::unordered_map<int64_t, FragMap> frags_;
    // Sizes of all live fragments as a max-heap with lazy deletion: gone_ holds removed sizes
    // still in heap_; heap_'s top is never in gone_, so it is the largest live fragment. A
    // multiset did the same at a tree node per fragment, most of the replay's time.
    std::vector<uint64_t> heap_, gone_;
    size_t fragCount_ = 0;
    std::array<int64_t, 11> classes_{};
    std::array<int64_t, 11> evClasses_{};
    static constexpr int64_t kEventWindow = 300'000'000'000; // 300 s, DESIGN.md default
    std::deque<std::pair<int64_t, int>> window_; // (time, size class) of the events in it
    bool ownWindow_ = true;
    double reserved_ = 0, allocated_ = 0, free_ = 0;
};

// Asks the kernel to back [p, p + bytes) with huge pages where it can (Linux, THP in madvise
// mode): a vector of millions of records then takes hundreds of page faults instead of tens of
// thousands, which cost more than the copying on a virtual machine. A no-op elsewhere.
void preferHugePages(const void* p, size_t bytes);

// The compacted address axis of a level (LevelData::spans, compactSize), rebuilt from scratch.
void buildSpans(LevelData& ld);

// Rows of the allocations and regions tables, read the same way by both loaders.
extern const char* const kAllocColumns;  // SELECT list for readAlloc
extern const char* const kRegionColumns; // SELECT list for readRegion
// freeNs of a live allocation is tEnd; device and level tell which LevelData it belongs to.
AllocRec readAlloc(const Stmt& st, int64_t tEnd, uint32_t& device, int& level);
RegionRec readRegion(const Stmt& st, uint32_t& device, int& level);

// Strings and stacks with ids above after (0: all) into the scene; return the largest id seen.
int64_t readStrings(const Db& db, int64_t after, Scene& scene);
int64_t readStacks(const Db& db, int64_t after, Scene& scene);

extern const char* const kKernelColumns; // SELECT list for readKernel
KernelRec readKernel(const Stmt& st);

// Frames (open ones end at tEnd) and their metrics, read whole: there are few.
void readFrames(const Db& db, int64_t tEnd, std::vector<FrameRow>& frames,
                std::vector<std::string>& metricNames);
// FrameRow::kernelNames of frames[from...] from kernels (both sorted by time).
void frameKernelNames(std::vector<FrameRow>& frames, size_t from,
                      const std::vector<KernelRec>& kernels);

} // namespace fs::render::detail
