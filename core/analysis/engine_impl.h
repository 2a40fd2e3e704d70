// Internal to fragscope_analysis: the in-memory replay index behind fs::analysis::Engine.
// docs/analysis.md describes the design (sorted streams, checkpoints, incremental fragments).
#pragma once

#include "engine.h"
#include "metrics.h"
#include "summary.h"

#include "core/store/allocations.h"
#include "core/store/kernels.h"
#include "core/store/ooms.h"
#include "core/store/regions.h"
#include "core/store/session.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <deque>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <span>
#include <thread>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>

namespace fs::analysis {

constexpr uint32_t kNoRegion = 0xffffffffu;
// Alloc::tag: an untagged block; a tag whose strings.id does not fit in 32 bits (read by id).
constexpr uint32_t kNoTag = 0;
constexpr uint32_t kTagById = 0xffffffffu;

// One allocation of a track: a packed hot record (10 M of them must fit comfortably).
struct Alloc
{
    uint64_t address;
    uint64_t size;
    int64_t allocNs;
    int64_t freeNs;  // kAlive when never freed
    int64_t id;      // allocations.id
    uint32_t region; // index into TrackData::regions, kNoRegion when outside any region
    uint32_t tag;    // strings.id of the tag, kNoTag when none (kTagById: see Engine::Impl::tagOf)
    uint64_t end() const { return address + size; }
    // Blocks that never hold memory at any instant (zero size, freed when allocated) take no
    // part in the address-space replay; they still count as events for event-size entropy.
    bool occupies() const { return size != 0 && freeNs > allocNs; }
};
static_assert(sizeof(Alloc) == 48, "Alloc is a hot record");

// An allocator whose value-initialisation leaves an element uninitialised: resizing the records
// of millions of blocks that are about to be written over then touches no page
// (readAllocations, readStoredRows). Alloc{} and every other construction are as usual.
template <class T> struct UninitAllocator : std::allocator<T>
{
    template <class U> struct rebind
    {
        using other = UninitAllocator<U>;
    };
    UninitAllocator() = default;
    template <class U>
    UninitAllocator(const UninitAllocator<U>&) noexcept // NOLINT(google-explicit-constructor)
    {
    }
    template <class U> void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>)
    {
        ::new (static_cast<void*>(p)) U; // default-, not value-initialised
    }
    template <class U, class... A> void construct(U* p, A&&... a)
    {
        ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
    }
};
// A track's allocation records.
using AllocRecords = std::vector<Alloc, UninitAllocator<Alloc>>;

struct RegionRec
{
    int64_t id;
    uint64_t address;
    uint64_t size;
    int64_t createNs;
    int64_t destroyNs; // kAlive when never released
    RegionKind kind;
};

// Live allocation set at a checkpoint time: state after every event with time <= time.
struct Checkpoint
{
    int64_t time = 0;
    size_t allocPos = 0;  // first alloc (allocs order) with allocNs > time
    size_t freePos = 0;   // first entry of byFree with freeNs > time
    size_t regionPos = 0; // first region (creation order) with createNs > time
    size_t regionEndPos = 0;
    std::vector<uint32_t> live; // indices into allocs, ascending
};

struct TrackData;
struct RunFigures; // precursors.h

// A track's level-of-detail heatmap: the whole span x the whole compacted address space at
// nt x ny cells, each the average occupancy (and reserved share) over its cell.
struct HeatmapPreview::Grid
{
    int nt = 0, ny = 0;
    int64_t t0 = 0, t1 = 1;
    double ySize = 1;
    std::vector<double> occ, reg; // summed-area tables, (nt + 1) x (ny + 1)
};

// Whether a checkpoint goes after the instant just walked: at least 2^16 allocations and frees
// since the last one, and four times the blocks then alive (a checkpoint's live set is copied
// and sorted, so its cost stays a fraction of the events between). The one rule of both walks
// that place checkpoints (CheckpointBuilder::run and the free-order pass at open), which must
// agree.
inline bool checkpointDue(int64_t sinceLast, size_t live)
{
    return sinceLast >= std::max<int64_t>(1 << 16, 4 * static_cast<int64_t>(live));
}

// Builds a track's checkpoints walking its streams forward; it can stop at the end of the data
// and go on when more comes (LiveEngine), or restart from an earlier checkpoint when new events
// land before where it stopped.
struct CheckpointBuilder
{
    std::vector<uint32_t> live; // allocation indices live now, unordered
    std::vector<uint32_t> pos;  // pos[i]: where allocation i sits in live
    size_t ai = 0, fi = 0, ri = 0, rei = 0;
    int64_t sinceLast = 0;
    int64_t lastInstant = std::numeric_limits<int64_t>::min(); // the last instant consumed
    void start(TrackData& t);                   // from the empty state, no checkpoints
    void resume(TrackData& t, int64_t minTime); // new events at >= minTime were added
    void run(TrackData& t);                     // consumes every event of the streams
};

struct TrackData
{
    uint32_t device = 0;
    Level level = Level::Framework;
    // Sorted by (allocNs, id); every freeNs >= its allocNs (readAllocRow clamps it,
    // readStoredRows checks it: sortByFree relies on it).
    AllocRecords allocs;
    std::vector<uint32_t> byFree;        // indices of freed allocs, sorted by (freeNs, index)
    std::vector<RegionRec> regions;      // sorted by (createNs, id)
    std::vector<uint32_t> regionsByEnd;  // indices of released regions by destroyNs
    std::vector<Checkpoint> checkpoints; // ascending time; the first is the empty state
    AddressLayout layout;
    // Per region (as regions): its compacted address, kNoCompact outside the layout (buildLayout).
    static constexpr uint64_t kNoCompact = std::numeric_limits<uint64_t>::max();
    std::vector<uint64_t> regionCompact;
    // a's compacted address (layout.toCompact): its region's plus its offset in it, without a
    // search of the layout (a raster asks it for millions of blocks).
    bool compactOf(const Alloc& a, uint64_t& out) const
    {
        if (a.region < regionCompact.size() && regionCompact[a.region] != kNoCompact &&
            a.address >= regions[a.region].address &&
            a.address - regions[a.region].address < regions[a.region].size) {
            out = regionCompact[a.region] + (a.address - regions[a.region].address);
            return true;
        }
        return layout.toCompact(a.address, out);
    }
    // Pending frees of the track (docs/analysis.md "Pending frees"), read from pending_frees
    // at open (readPendingFrees): allocNs = the request, freeNs = the completion (kAlive: still
    // pending at the end), id = pending_frees.id, region as an allocation's, tag unused; sorted
    // by (allocNs, id). pendingByEnd: indices of the completed ones by (freeNs, index);
    // pendingStream: each one's stream.
    AllocRecords pending;
    std::vector<uint32_t> pendingByEnd;
    std::vector<uint32_t> pendingStream;
    // Allocations of the track as the stored index lists them, while a deferred load has not
    // read them yet (Engine::Impl::ensureRows).
    size_t storedAllocs = 0;
    // Mapped pieces of each expandable region (region id -> indices into regions), for regions
    // with more than one: a block outlives the piece it was placed in when the segment grows or
    // shrinks around it, and then lives on in the piece that covers it.
    std::unordered_map<int64_t, std::vector<uint32_t>> pieces;
    // The piece of a's region alive at time t that covers it (a.region when that one is alive at
    // t, or when none is).
    uint32_t placeAt(const Alloc& a, int64_t t) const;
    int64_t events() const
    {
        return static_cast<int64_t>(allocs.size() + byFree.size() + regions.size() +
                                    regionsByEnd.size());
    }
};

// Incremental allocator state of one track: live allocations per region and the free fragments
// between them, with running totals so that every figure of a State costs O(1) (largest
// fragment: O(log distinct sizes)).
class FragState
{
public:
    explicit FragState(const TrackData& t);
    void regionCreate(uint32_t r);
    void regionDestroy(uint32_t r);
    // pending: a pending free's wait (TrackData::pending) begins or ends: its range is in no
    // fragment meanwhile, and counts in pendingIn instead of allocatedIn.
    void alloc(const Alloc& a, bool pending = false);
    void free(const Alloc& a, bool pending = false);
    // Rebuilds from a checkpoint's live set (regions alive at time).
    void rebuild(const Checkpoint& c);

    uint64_t reserved = 0;
    uint64_t allocatedIn = 0;
    uint64_t allocatedOut = 0;
    int64_t live = 0;
    int regionCount = 0;
    int64_t fragCount = 0;
    uint64_t freeBytes = 0;
    int64_t pendingLive = 0; // pending frees waiting now (inside regions or not)
    uint64_t pendingIn = 0;  // their bytes inside live regions
    uint64_t pendingOut = 0; // ... outside
    uint64_t largest() const { return sizes_.largest(); }
    // The largest free block once every pending free completes: runs of adjacent fragments and
    // pending blocks (largest() when nothing is pending).
    uint64_t largestOncePendingComplete() const;
    // The pending blocks inside live regions, region by region in address order.
    std::vector<Fragment> pendingBlocks() const;
    double ratio() const
    {
        return freeBytes == 0
                   ? 0.0
                   : 1.0 - static_cast<double>(largest()) / static_cast<double>(freeBytes);
    }
    double entropy() const { return classes_.bits(); }
    State snapshot(int64_t t, bool withHistogram) const;
    // The free fragment the last free() left the block's space in, and whether a live block
    // bounds it on each side (a hole: the explorer's call sites count them).
    struct FreedGap
    {
        uint64_t bytes = 0;
        bool enclosed = false;
    };
    FreedGap lastFreed;
    // Every free fragment, region by region in address order.
    std::vector<Fragment> fragments() const;

private:
    struct RegionLive
    {
        bool alive = false;
        std::map<uint64_t, uint64_t> allocs; // address -> end (live blocks and pending frees)
        std::set<uint64_t> pending;          // the entries of allocs that are pending frees
    };
    FragState(const TrackData& t, std::vector<RegionLive>&& empty); // reuses the storage
    void addFragment(uint64_t size);
    void removeFragment(uint64_t size);
    void gapsOf(uint32_t r, bool add);
    // Inserts a live block into region r (alive) and updates the fragments around it.
    void insertInto(uint32_t r, uint64_t address, uint64_t end, bool pending);
    // Region r's free fragments and pending blocks (either may be null), in address order.
    void rangesOf(uint32_t r, std::vector<Fragment>* free, std::vector<Fragment>* pending) const;
    // A block's bytes inside (outside) live regions: pendingIn or allocatedIn (Out).
    uint64_t& inside(bool pending) { return pending ? pendingIn : allocatedIn; }
    uint64_t& outside(bool pending) { return pending ? pendingOut : allocatedOut; }
    // Regions holding pending frees (region index -> how many).
    std::map<uint32_t, int64_t> pendingRegions_;
    void notePending(uint32_t r, int64_t delta);

    const TrackData* td_;
    std::unordered_map<uint64_t, uint32_t> movedTo_; // block address -> piece it moved to
    // Alive pieces of each expandable region by address (region id -> address -> index).
    std::unordered_map<int64_t, std::map<uint64_t, uint32_t>> alivePieces_;
    void indexPiece(uint32_t r, bool alive);
    std::vector<RegionLive> regions_;
    FragmentSizes sizes_;
    SizeClassCounts classes_;
    std::array<int64_t, 64> binCount_{};
    std::array<uint64_t, 64> binBytes_{};
    std::array<int64_t, 3> clusterCount_{};
    std::array<uint64_t, 3> clusterBytes_{};
};

// PendingStart / PendingEnd: a pending free's wait begins / ends (index into TrackData::pending).
enum class ReplayEvent : uint8_t {
    RegionCreate,
    Free,
    Alloc,
    RegionDestroy,
    PendingStart,
    PendingEnd
};

// Walks a track's six sorted streams forward in time, in the order region creations, frees,
// pending frees' ends, their starts, allocations, region releases at equal times (ingest ends an
// overlapped block when the new one arrives, a block cannot be freed before it exists, its wait
// begins when it is freed, and a wait's end gives its range back before a new block takes it).
class Replayer
{
public:
    explicit Replayer(const TrackData& t) : t_(t), state_(t) {}
    // State after every event <= time, starting from the nearest checkpoint (or the empty
    // state when useCheckpoints is false).
    void seek(int64_t time, bool useCheckpoints = true);
    // Processes every event with time <= limit; hook(kind, index, time) runs after each one
    // (index: into allocs for Alloc/Free, into regions for region events).
    template <typename Hook> void advanceTo(int64_t limit, Hook&& hook);
    void advanceTo(int64_t limit)
    {
        advanceTo(limit, [](ReplayEvent, uint32_t, int64_t) {});
    }
    const FragState& state() const { return state_; }
    int64_t processed() const { return processed_; }
    // Time of the next event advanceTo would process; kNoEvent when none is left.
    static constexpr int64_t kNoEvent = std::numeric_limits<int64_t>::max();
    int64_t nextTime() const;

private:
    const TrackData& t_;
    FragState state_;
    size_t allocPos_ = 0, freePos_ = 0, regionPos_ = 0, regionEndPos_ = 0;
    size_t pendingPos_ = 0, pendingEndPos_ = 0;
    int64_t time_ = std::numeric_limits<int64_t>::min();
    int64_t processed_ = 0;
    int64_t lastEventTime() const; // of the events processed so far (min when none)
};

// The track summary (summary.cpp) taken on the way through a forward replay that skips no event
// (loadFrames' pass over the frames): after(r, t) after each event, at its time t.
class SummaryPass
{
public:
    explicit SummaryPass(int64_t sessionEnd);
    SummaryPass(SummaryPass&&) noexcept;
    SummaryPass& operator=(SummaryPass&&) noexcept;
    ~SummaryPass();
    void after(const Replayer& r, int64_t t);
    // Takes on the pass over the events that follow this one's (a later stretch of time, every
    // event of it after every event of this): the figures are then those of one pass over both.
    void append(SummaryPass&& later);
    SummaryFigures figures() const;

private:
    struct Sums;
    std::unique_ptr<Sums> s_;
    int64_t end_;
};
// Whether Engine::trackSummary splits the track by pool (PyTorch's private pools), which a
// SummaryPass does not. poolOf: region id -> pool id (regionPools).
bool summarySplitsByPool(const TrackData& td, const std::unordered_map<int64_t, uint64_t>& poolOf);

inline int64_t Replayer::nextTime() const
{
    const auto& A = t_.allocs;
    const auto& R = t_.regions;
    const int64_t tr = regionPos_ < R.size() ? R[regionPos_].createNs : kNoEvent;
    const int64_t tf = freePos_ < t_.byFree.size() ? A[t_.byFree[freePos_]].freeNs : kNoEvent;
    const int64_t ta = allocPos_ < A.size() ? A[allocPos_].allocNs : kNoEvent;
    const int64_t te = regionEndPos_ < t_.regionsByEnd.size()
                           ? R[t_.regionsByEnd[regionEndPos_]].destroyNs
                           : kNoEvent;
    const auto& P = t_.pending;
    const int64_t tps = pendingPos_ < P.size() ? P[pendingPos_].allocNs : kNoEvent;
    const int64_t tpe = pendingEndPos_ < t_.pendingByEnd.size()
                            ? P[t_.pendingByEnd[pendingEndPos_]].freeNs
                            : kNoEvent;
    return std::min({tr, tf, ta, te, tps, tpe});
}

template <typename Hook> void Replayer::advanceTo(int64_t limit, Hook&& hook)
{
    constexpr int64_t kNone = kNoEvent;
    const auto& A = t_.allocs;
    const auto& F = t_.byFree;
    const auto& R = t_.regions;
    const auto& RE = t_.regionsByEnd;
    const auto& P = t_.pending;
    const auto& PE = t_.pendingByEnd;
    while (true) {
        const int64_t tr = regionPos_ < R.size() ? R[regionPos_].createNs : kNone;
        const int64_t tf = freePos_ < F.size() ? A[F[freePos_]].freeNs : kNone;
        const int64_t ta = allocPos_ < A.size() ? A[allocPos_].allocNs : kNone;
        const int64_t te = regionEndPos_ < RE.size() ? R[RE[regionEndPos_]].destroyNs : kNone;
        const int64_t tps = pendingPos_ < P.size() ? P[pendingPos_].allocNs : kNone;
        const int64_t tpe = pendingEndPos_ < PE.size() ? P[PE[pendingEndPos_]].freeNs : kNone;
        const int64_t t = std::min({tr, tf, ta, te, tps, tpe});
        if (t == kNone || t > limit) break;
        ++processed_;
        if (tr == t) {
            const auto i = static_cast<uint32_t>(regionPos_++);
            state_.regionCreate(i);
            hook(ReplayEvent::RegionCreate, i, t);
        } else if (tf == t) {
            const uint32_t i = F[freePos_++];
            if (A[i].occupies()) state_.free(A[i]);
            hook(ReplayEvent::Free, i, t);
        } else if (tpe == t) {
            const uint32_t i = PE[pendingEndPos_++];
            if (P[i].occupies()) state_.free(P[i], true);
            hook(ReplayEvent::PendingEnd, i, t);
        } else if (tps == t) {
            const auto i = static_cast<uint32_t>(pendingPos_++);
            if (P[i].occupies()) state_.alloc(P[i], true);
            hook(ReplayEvent::PendingStart, i, t);
        } else if (ta == t) {
            const auto i = static_cast<uint32_t>(allocPos_++);
            if (A[i].occupies()) state_.alloc(A[i]);
            hook(ReplayEvent::Alloc, i, t);
        } else {
            const uint32_t i = RE[regionEndPos_++];
            state_.regionDestroy(i);
            hook(ReplayEvent::RegionDestroy, i, t);
        }
    }
    time_ = std::max(time_, limit);
}

// Region id -> memory pool (regions.pool_id) of a track's regions (core/analysis/pools.cpp):
// on the engine's connection (takes dbMutex), or on a session whose lock the caller holds.
std::unordered_map<int64_t, uint64_t> regionPools(const Engine::Impl& d, uint32_t device,
                                                  Level level);
std::unordered_map<int64_t, uint64_t> regionPools(const Session& s, uint32_t device, Level level);

// Sorts a track's allocations by (allocNs, id) when the rows did not come in that order.
void sortAllocs(TrackData& t);

// The largest free block once every pending free completes: the largest run of contiguous
// ranges of one region among the free fragments and the pending blocks.
uint64_t largestOncePendingComplete(const std::vector<Fragment>& free,
                                    const std::vector<Fragment>& pending);
// Sets s's figures once pending frees complete from that largest block and s's free and
// pending bytes.
void setOncePendingComplete(State& s, uint64_t largest);

// The row conversions load() and LiveEngine::refresh share (they clamp hostile rows the same
// way, so a refreshed engine equals a freshly opened one).
RegionRec readRegionRow(const store::RegionRow& row, const std::string& path, uint32_t& device,
                        int& level, bool& expandable);
// regionId: -1 when the row has none; the returned record's region is left kNoRegion.
Alloc readAllocRow(const store::AllocationRecord& row, const std::string& path, uint32_t& device,
                   int& level, int64_t& regionId);

struct FrameRow
{
    int64_t index;
    int64_t start;
    int64_t end;
};

// The engine's connection for lookups (strings, stacks, kernels). A LiveEngine closes it after
// every refresh: an open connection would keep the recorder from finishing the file (switching
// it out of WAL mode needs it alone); the next lookup opens it again.
class LazySession
{
public:
    void setPath(std::string p) { path_ = std::move(p); }
    explicit operator bool() const { return s_.has_value() || reopen_; }
    Session* operator->() const
    {
        if (!s_ && reopen_) s_.emplace(Session::open(path_, false, SQLITE_OPEN_NOMUTEX));
        return &*s_;
    }
    Session& operator*() const { return *operator->(); }
    void emplace(Session&& s)
    {
        s_.emplace(std::move(s));
        reopen_ = false;
    }
    void reset()
    {
        s_.reset();
        reopen_ = false;
    }
    void close()
    {
        const bool had = s_.has_value() || reopen_;
        s_.reset();
        reopen_ = had;
    }

private:
    mutable std::optional<Session> s_;
    std::string path_;
    bool reopen_ = false;
};

// The analysis_cache key of a track's level-of-detail grid.
std::string lodKey(const TrackData& t);

// The lock around the engine's connection. On a LiveEngine's engine between refreshes it is
// transient: releasing the lock closes the connection a lookup opened, so no connection stays
// open while the recorder may be finishing the file.
class DbMutex
{
public:
    void lock() { m_.lock(); }
    void unlock()
    {
        if (transient_ && session_) session_->close();
        m_.unlock();
    }
    void bind(LazySession* s) { session_ = s; }
    void setTransient(bool t) { transient_ = t; } // with the lock held
private:
    std::mutex m_;
    LazySession* session_ = nullptr;
    bool transient_ = false;
};

struct Engine::Impl
{
    std::string path;
    mutable DbMutex dbMutex;
    mutable LazySession session; // for lazy lookups (strings, stacks, kernels)
    SessionSummary summary;
    Caveats caveats;
    LoadOptions options;
    std::vector<TrackData> tracks;
    mutable std::shared_mutex liveMutex; // Engine::readLock; LiveEngine::refresh writes under it
    // Region id -> (track, index in its regions): several for an expandable segment.
    std::unordered_map<int64_t, std::vector<std::pair<size_t, uint32_t>>> regionById;
    std::vector<FrameInfo> frames;    // by index
    std::vector<size_t> framesInTime; // indices into frames of the timed ones, by (start, index)
    std::vector<Collapse> collapses;
    RuleSplit ruleSplit; // the open() rules that can make collapses, and those that fire on most
    int64_t timeBegin = 0;
    int64_t timeEnd = 0;

    const TrackData* track(uint32_t device, Level level) const;
    const TrackData& trackOrThrow(uint32_t device, Level level) const;
    // Reads and indexes the whole file. snapshot: inside one read transaction (a file a
    // recorder is still writing); the connection stays open for lookups either way.
    void load(const LoadOptions& o, bool snapshot = false);
    void buildCheckpoints(TrackData& t);
    void applySummary(SessionSummary s); // summary, times and caveats
    // A LiveEngine keeps each track's checkpoint walk (builders[track]) to carry it on later.
    bool keepBuilders = false;
    std::vector<CheckpointBuilder> builders;
    void indexTrack(TrackData& t); // sorts, byFree, regionsByEnd, checkpoints, layout
    uint32_t regionOf(int64_t regionId, size_t ti, const Alloc& a) const;
    // The same among the places of one region id (a regionById entry).
    uint32_t regionAmong(const std::vector<std::pair<size_t, uint32_t>>& where, size_t ti,
                         const Alloc& a) const;
    void buildLayout(TrackData& t);
    // Every track's pending frees from s's pending_frees table (TrackData::pending), each in the
    // region that held its range when its wait began (tracks and their regions read first).
    void readPendingFrees(const Session& s);
    // Frames, their metrics, per-frame figures and collapses (frames.cpp), all at once. load()
    // takes the steps apart on a long un-indexed open: the kernel pass reads on a connection of
    // its own while the tracks are sorted, and the replay runs while the index is stored.
    void loadFrames(const LoadOptions& o);
    struct FrameWork
    {
        bool compute = false;     // the per-frame figures are not stored: replay and count kernels
        std::vector<char> byPool; // per track: its summary splits by pool (no SummaryPass)
        std::vector<std::pair<const TrackData*, SummaryPass>> passes;
        std::exception_ptr kernelError;
        bool kernelsStarted = false; // on the thread below (joined by whoever waits for it)
        std::jthread kernels;        // last: joined before the members it writes go
    };
    // Reads the frames and their metrics (db: the engine's connection, its lock held, or load()'s
    // own); false when there are none.
    bool readFrames(const Session& db, const LoadOptions& o, FrameWork& w);
    // Kernels per frame, new variants and the kernel index: one pass over db's kernels table.
    // Stops with Cancelled when o.cancel is set.
    void countFrameKernels(const Session& db, const LoadOptions& o);
    // When the figures are computed and the records are many enough to be worth a thread
    // (LoadOptions::parallelFrom): countFrameKernels on w.kernels, on `shared` (its lock held
    // by the caller throughout) or, when null, on a read-only connection of its own.
    void startFrameKernels(FrameWork& w, const LoadOptions& o, const Session* shared);
    // Joins that thread (unless joined already), or counts on db when none was started;
    // rethrows what the pass threw.
    void endFrameKernels(FrameWork& w, const LoadOptions& o, const Session& db);
    // Allocator figures per frame and track: a forward replay per track, split over the cores
    // that `busy` threads beside leave.
    void replayFrames(const LoadOptions& o, FrameWork& w, unsigned busy);
    // Stores the computed figures (dbMutex held), then marks collapses and broken rules.
    void finishFrames(const LoadOptions& o, FrameWork& w);
    bool readFrameCache(const Session& db, const std::vector<size_t>& timed);
    void writeFrameCache(const std::vector<size_t>& timed);
    // Stored index (docs/session-format.md "analysis_cache"): every cached value is keyed by
    // the engine version and cacheStamp: counts and bounds of the tables the figures depend on
    // plus the nonce of the guard (triggers that drop it on any change to those tables). Empty:
    // nothing is cached (a session still being written, caching off, a read-only file without
    // a guard).
    std::string cacheStamp;
    // Deferred rows: when every stored value is valid at open, the allocation records and the
    // replay index stay in the file until a query needs them (timelines, frames, collapses and
    // the level-of-detail preview come from the cache without them). ensureRows() reads them,
    // once, from the stored columns (never the allocations table); every query that walks
    // allocations calls it first (track() and trackOrThrow() do).
    mutable std::mutex rowsMutex;
    mutable std::atomic<bool> rowsReady{true};
    mutable std::exception_ptr rowsError;
    void ensureRows() const;
    void loadDeferredRows();
    // Rows of the allocations table a deferred load had to read (stored values malformed).
    std::atomic<int64_t> deferredRowsRead{0};
    bool readStoredRows(const Session& s, TrackData& t);
    // Every allocation row into its track (trackFor: the track index of (device, level));
    // progress and cancel from o when given; parallel: a long table in two ranges at once (not
    // within a read transaction that another connection would not share). Returns the rows read.
    int64_t readAllocations(const Session& s, const std::function<size_t(uint32_t, int)>& trackFor,
                            const LoadOptions* o, int64_t total, bool parallel = false);
    // Whether the stored values allow a deferred load; adds the tracks that have allocations
    // only (trackFor) and sets each track's storedAllocs.
    bool prepareDeferred(const Session& s, const std::function<size_t(uint32_t, int)>& trackFor);
    // A track without loading rows (layout, regions, cached answers).
    const TrackData* trackInfo(uint32_t device, Level level) const;
    mutable std::atomic<int64_t> timelinesFromCache{0};
    // Level-of-detail grids per track (index as tracks), built on first use under lodMutex
    // (or by open() for LoadOptions::preview); dropped by a live refresh.
    using Lod = HeatmapPreview::Grid;
    // A frame's allocations with their role (tag, else size, and the ordinal among the frame's
    // blocks of that role), for Engine::addressJumps: it compares each frame's with the previous
    // frame's, a collapse query asks for ~20 frames twice and `report` for thousands, so each
    // frame's are built once. Bounded; emptied by forgetDerived(). Roles are numbers here (a
    // frame holds thousands of blocks); roleText() spells one out.
    struct RoleRow
    {
        int64_t id;
        uint64_t address, size;
        uint32_t tagClass; // tagClassOf the block: 0 when its role is its size
        uint32_t ordinal;
    };
    // rows: in (time, id) order; byRole: indexes into rows in (tag class, size when untagged,
    // ordinal) order, each role once, so two frames' roles meet in one merge.
    struct FrameRoles
    {
        std::vector<RoleRow> rows;
        std::vector<uint32_t> byRole;
    };
    std::string roleText(const RoleRow& r, bool withOrdinal = true) const;
    // Every block of the frame with the one of the same role in the frame before it in time, as
    // (before, now) indexes into the two frames' rows, in the order of now's; movedOnly: those
    // that moved at least their own size. Numbers only: `report` asks for thousands of frames,
    // and the verdict needs only how many moved.
    struct RolePairs
    {
        std::shared_ptr<const FrameRoles> before, now;
        std::vector<std::pair<uint32_t, uint32_t>> pairs;
    };
    RolePairs rolePairs(const TrackData& td, int64_t frame, bool movedOnly) const;
    // rolePairs spelt out.
    std::vector<AddressJump> jumps(const TrackData& td, int64_t frame, bool movedOnly) const;
    // An interned string ("" when the file lacks it), each read once: strings never change
    // once written. tagOf: the text of a block's tag ("" when none).
    std::string text(int64_t stringId) const;
    std::string tagOf(const Alloc& a) const;
    // A number per distinct tag text, 0 for none (or an empty one): blocks with the same tag
    // text have the same class whatever their string ids.
    uint32_t tagClassOf(const Alloc& a) const;
    mutable std::mutex textsMutex;
    mutable std::unordered_map<int64_t, std::string> texts;           // under textsMutex
    mutable std::unordered_map<int64_t, uint32_t> tagClassById;       // under textsMutex
    mutable std::unordered_map<std::string, uint32_t> tagClassByText; // under textsMutex
    mutable std::vector<std::string> tagClassTexts{std::string()};    // under textsMutex
    // A device's kernel launches starting in [from, to), in (start, id) order: a frame's, which
    // the kernel summary, the kernel-variant shifts and the verdict's graph figures all read,
    // for the collapsed frame and its ~16 healthy ones, and `report` for thousands of
    // collapses that share them. Each range read once; bounded; emptied by forgetDerived().
    using Launches = std::vector<store::LaunchRow>;
    std::shared_ptr<const Launches> launchesIn(int64_t device, int64_t from, int64_t to) const;
    mutable std::mutex launchesMutex;
    mutable std::map<std::tuple<int64_t, int64_t, int64_t>, std::shared_ptr<const Launches>>
        launches;
    mutable size_t launchRows = 0; // held in `launches`
    // More read-only connections for launchesIn, so that threads (report's collapses) read
    // launches at once rather than in turn on the engine's connection: at 100 M events those
    // reads held its lock 10 of the 20 s the collapses took. Each opened on first use. Only on
    // Engine::open's engines: a LiveEngine's connection must close between refreshes.
    struct LaunchReader
    {
        std::mutex m;
        std::optional<Session> session;
    };
    mutable std::array<LaunchReader, 3> launchReaders;
    // Set by Engine::open: the file's identity then (a reader opens the path later, and a file
    // replaced meanwhile must not be read); cleared when a reader finds another file there.
    mutable std::atomic<bool> readersAllowed{false};
    std::pair<uint64_t, uint64_t> fileId{0, 0}; // (st_dev, st_ino)
    // The devices that ran kernels (buildKernelIndex first).
    std::vector<int64_t> kernelDeviceIds() const;
    // Replayers (one per track) that collapse queries borrow: a long run's track has 10^5
    // regions, and making and dropping a replayer's state for each of `report`'s collapses cost
    // 3 % of it. A borrowed set goes on from where its last query left it when that is closer
    // than a checkpoint (Replayer::seek). Emptied by forgetDerived(): they hold the tracks.
    using Replayers = std::vector<std::unique_ptr<Replayer>>;
    Replayers borrowReplayers() const;
    void returnReplayers(Replayers r) const;
    mutable std::mutex replayersMutex;
    mutable std::vector<Replayers> idleReplayers;
    // The verdict's base rates (verdict.cpp): the figures and kernel calls of the run's healthy
    // frames, for the last set of frames asked (indices and ranges; every collapse of one rule
    // set shares it). Emptied by forgetDerived().
    mutable std::mutex runFiguresMutex;
    mutable std::vector<std::tuple<int64_t, int64_t, int64_t>> runFiguresKey; // under it
    mutable std::shared_ptr<const RunFigures> runFigures;                     // under it
    mutable std::mutex rolesMutex;
    mutable std::map<std::tuple<uint32_t, int, int64_t>, std::shared_ptr<const FrameRoles>> roles;
    std::shared_ptr<const FrameRoles> frameRoles(const TrackData& td, const FrameInfo& f) const;
    // Engine::stateAt's answer from a replay that stands at t on the track td.
    State stateOf(const Engine& e, const TrackData& td, const FragState& st, int64_t t) const;
    // Engine::trackSummary by (device, level): a replay of the whole track (seconds on a long
    // run) that `report`, `compare`, `whatif` and the GUI all ask for. Kept here and stored in
    // analysis_cache ("summary:<device>:<level>"); emptied by forgetDerived().
    mutable std::mutex summariesMutex;
    mutable std::map<std::pair<uint32_t, int>, TrackSummary> summaries;
    bool readSummaryCache(uint32_t device, Level level, TrackSummary& out) const;
    void writeSummaryCache(uint32_t device, Level level, const TrackSummary& s) const;
    void writeSummaryCacheLocked(uint32_t device, Level level,
                                 const TrackSummary& s) const; // dbMutex held
    // Drops what was derived from the rows and frames (loadFrames: an open or a live refresh).
    void forgetDerived() const;
    mutable std::mutex lodMutex;
    mutable std::vector<std::shared_ptr<const Lod>> lods;
    std::shared_ptr<const Lod> lodOf(const TrackData& t) const;
    // A grid's frame (span, size) for a track, and its cells from the track's records (rows
    // loaded): the blocks added in the records' order, in `parts` consecutive ranges (one thread
    // each) whose grids are then added up. The cells are the same to rounding whatever the
    // order and the parts.
    Lod lodFrame(const TrackData& t) const;
    static void lodCells(const TrackData& t, const Lod& frame, std::vector<double>& occ,
                         std::vector<double>& reg, size_t parts = 1);
    std::vector<Track> trackList() const; // Engine::tracks()
    // Engine::defaultTrack's pick among list: the highest level of device with regions, else
    // with allocations.
    static std::optional<size_t> defaultTrackIndex(const std::vector<Track>& list, uint32_t device);
    // LoadOptions::preview: the default track's grid, built from the records just read
    // (before the sort), kept as lods[] and handed out; stored with the index (lodsToStore).
    void publishPreview(const LoadOptions& o);
    struct LodCells
    {
        size_t track;
        std::vector<double> occ, reg;
    };
    std::vector<LodCells> lodsToStore; // under lodMutex
    // The grids stored under the current stamp (read at open; under lodMutex).
    std::set<std::string> storedLods;
    void readStoredLods(const Session& s);
    // A track's level-of-detail cells (float, nt x ny per channel) in analysis_cache.
    bool readLodCache(const TrackData& t, int nt, int ny, std::vector<double>& occ,
                      std::vector<double>& reg) const;
    void writeLodCache(const TrackData& t, int nt, int ny, const std::vector<double>& occ,
                       const std::vector<double>& reg) const;
    HeatmapRaster heatmapFrame(const HeatmapRequest& rq, const TrackData& td) const;
    void setCacheStamp(const Session& s);
    // The sorted free stream, released regions and checkpoints of a track from the cache;
    // false (track untouched) when absent, stale or malformed.
    bool readIndex(const Session& s, TrackData& t);
    bool writeIndex(); // every track's, through a separate read-write connection
    // The grids in lodsToStore only (an open that used the stored index but found no grid).
    bool writeGrids();
    void takeGrids(std::vector<std::pair<std::string, std::string_view>>& rows,
                   std::deque<std::string>& blobs);
    // Built, not stored yet (LoadOptions::storeIndexAtOpen false); under storeMutex.
    bool indexPending = false;
    bool gridsPending = false;
    mutable std::mutex storeMutex;
    std::atomic<bool> indexStoredLater{false};
    bool readTimelineCache(const std::string& key, Timeline& tl) const;
    // An exact raster kept for its request (Engine::heatmapKept); h holds the resolved window.
    bool readRasterCache(HeatmapRaster& h, uint32_t device, Level level) const;
    void writeRasterCache(const HeatmapRaster& h, uint32_t device, Level level) const;
    void writeTimelineCache(const std::string& key, const Timeline& tl) const;
    LoadInfo loadInfo;
    // Lazily, under dbMutex: devices that ran kernels (queries then use the (device, start_ns)
    // index) and each kernel name's earliest start at or after the first frame.
    mutable bool kernelIndexReady = false;
    mutable std::vector<int64_t> kernelDevices;
    mutable std::unordered_map<int64_t, int64_t> kernelFirstStart;
    // Fills the two above (under dbMutex), from analysis_cache when stored there.
    void buildKernelIndex(int64_t firstStart) const;
    bool readKernelIndexCache(int64_t firstStart) const; // under dbMutex
    void writeKernelIndexCache(int64_t firstStart) const;
    // Lazily, under dbMutex: every OOM in time order (kernel-variant shifts ask, for each of
    // hundreds of launches, whether one fell in the gap before it; precursors and frame figures
    // for each frame). Reset with the kernel index.
    mutable std::optional<std::vector<store::OomRow>> oomRows;
    // The OOMs with first <= time <= last, in time order: a range of oomRows (under dbMutex;
    // empty without a session).
    std::span<const store::OomRow> oomsBetween(int64_t first, int64_t last) const;
    std::vector<uint32_t> liveAt(const TrackData& t, int64_t time, int64_t until) const;
    std::vector<Collapse> computeCollapses(const std::vector<CollapseRule>& rules) const;
    AllocationInfo info(const TrackData& t, const Alloc& a) const;
    Caveats resultCaveats(const std::string& extra = {}) const;
};

} // namespace fs::analysis
