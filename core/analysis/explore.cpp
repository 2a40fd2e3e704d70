// Explorer: the blocks at an instant, event stepping, jump targets, the headline, and the
// per-track data the other explore files share (explore.h, explore_impl.h).
#include "explore_impl.h"
#include "history.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include <fmt/format.h>

namespace fs::analysis {

const Engine::Impl& engineImpl(const Engine& e)
{
    return *e.d_;
}

const TrackData& exploreTrack(const Engine& e, uint32_t device, Level level)
{
    return engineImpl(e).trackOrThrow(device, level);
}

const char* groupByName(GroupBy g)
{
    switch (g) {
    case GroupBy::CallSite:
        return "call site";
    case GroupBy::Tag:
        return "tag";
    case GroupBy::Stream:
        return "stream";
    case GroupBy::Pool:
        return "pool";
    case GroupBy::Category:
        return "memory category";
    }
    return "call site";
}

const char* colouringName(Colouring c)
{
    switch (c) {
    case Colouring::Occupancy:
        return "occupancy";
    case Colouring::CallSite:
        return "call site";
    case Colouring::Tag:
        return "tag";
    case Colouring::Stream:
        return "stream";
    case Colouring::Pool:
        return "pool";
    case Colouring::Search:
        return "search matches";
    case Colouring::Category:
        return "memory category";
    }
    return "occupancy";
}

// ---- the headline ----------------------------------------------------------------------------

namespace {
std::string percent(double share)
{
    const double p = share * 100;
    return p < 1 && p > 0 ? fmt::format("{:.2f} %", p) : fmt::format("{:.0f} %", p);
}

// A share printed beside the bound it is compared with: with as many decimals (up to 4) as it
// takes not to print the bound itself unless it equals it, so 4.88 % under a 5 % bound reads
// "4.9 %", never "5 % (under 5 %)".
std::string percentBeside(double share, double bound)
{
    const double p = share * 100, b = bound * 100;
    if (p == b || percent(share) != percent(bound)) return percent(share);
    double scale = 1;
    int decimals = 1;
    for (; decimals < 4; ++decimals) {
        scale *= 10;
        if (std::round(p * scale) != std::round(b * scale)) break;
    }
    return fmt::format("{:.{}f} %", p, decimals);
}
} // namespace

Headline headline(const State& s, const FragmentedRule& rule)
{
    Headline h;
    h.ratio = s.fragmentationRatio;
    h.freeShare = s.reservedBytes == 0
                      ? 0.0
                      : static_cast<double>(s.freeBytes) / static_cast<double>(s.reservedBytes);
    const bool highF = h.ratio > rule.minRatio;
    const bool roomy = s.reservedBytes > 0 && h.freeShare >= rule.minFreeShare;
    h.fragmented = highF && roomy;
    if (s.reservedBytes == 0) {
        h.text = "not fragmented: nothing is reserved";
    } else if (h.fragmented) {
        h.text = fmt::format("fragmented: F {:.2f} > {:.2f} with {} of reserved free (at least {})",
                             h.ratio, rule.minRatio, percentBeside(h.freeShare, rule.minFreeShare),
                             percent(rule.minFreeShare));
    } else if (highF) {
        h.text = fmt::format("not fragmented: F {:.2f} > {:.2f}, but only {} of reserved is free "
                             "(under {}): the allocator is full, not fragmented",
                             h.ratio, rule.minRatio, percentBeside(h.freeShare, rule.minFreeShare),
                             percent(rule.minFreeShare));
    } else {
        h.text = fmt::format("not fragmented: F {:.2f} <= {:.2f} ({} of reserved free)", h.ratio,
                             rule.minRatio, percent(h.freeShare));
    }
    return h;
}

// ---- shared per-track data -------------------------------------------------------------------

uint64_t TrackAttrs::requested(size_t i, uint64_t size) const
{
    const uint32_t s = slack[i];
    if (s == kUnknown) return 0;
    if (s == kBig) {
        const auto it = bigSlack.find(static_cast<uint32_t>(i));
        return it == bigSlack.end() || it->second > size ? 0 : size - it->second;
    }
    return s > size ? 0 : size - s;
}

Explorer::Explorer(std::shared_ptr<const Engine> engine) : engine_(std::move(engine)) {}
Explorer::~Explorer() = default;

std::shared_ptr<Explorer::Data> Explorer::data() const
{
    const Engine::Impl& d = engineImpl(*engine_);
    d.ensureRows();
    int64_t fp = static_cast<int64_t>(d.tracks.size());
    for (const TrackData& t : d.tracks)
        fp += t.events();
    std::lock_guard lock(mu_);
    if (!data_ || data_->fingerprint != fp) {
        data_ = std::make_shared<Data>();
        data_->fingerprint = fp;
        data_->attrs.resize(d.tracks.size());
        data_->holes.resize(d.tracks.size());
        data_->pools.resize(d.tracks.size());
    }
    return data_;
}

namespace {
size_t trackIndex(const Engine& e, const TrackData& td)
{
    return static_cast<size_t>(&td - engineImpl(e).tracks.data());
}
} // namespace

std::shared_ptr<const PoolMap> poolsOf(const Engine& e, Explorer::Data& d, const TrackData& td)
{
    const size_t ti = trackIndex(e, td);
    if (ti >= d.pools.size()) return std::make_shared<PoolMap>(); // the empty track
    {
        std::lock_guard lock(d.mu);
        if (d.pools[ti]) return d.pools[ti];
    }
    auto p = std::make_shared<PoolMap>();
    p->byId = regionPools(engineImpl(e), td.device, td.level);
    p->byIndex.reserve(td.regions.size());
    for (const RegionRec& r : td.regions)
        p->byIndex.push_back(p->ofId(r.id));
    std::lock_guard lock(d.mu);
    if (!d.pools[ti]) d.pools[ti] = std::move(p);
    return d.pools[ti];
}

std::shared_ptr<const TrackAttrs> attributesOf(const Engine& e, Explorer::Data& d,
                                               const TrackData& td)
{
    const size_t ti = trackIndex(e, td);
    if (ti >= d.attrs.size()) return std::make_shared<TrackAttrs>();
    {
        std::lock_guard lock(d.mu);
        if (d.attrs[ti]) return d.attrs[ti];
    }
    std::lock_guard load(d.loadMu);
    {
        std::lock_guard lock(d.mu);
        if (d.attrs[ti]) return d.attrs[ti];
    }
    const size_t n = td.allocs.size();
    auto a = std::make_shared<TrackAttrs>();
    a->stack.assign(n, 0);
    a->tag.assign(n, 0);
    a->stream.assign(n, 0);
    a->slack.assign(n, TrackAttrs::kUnknown);
    a->meta.assign(n, 0);
    // Rows come by id; the records are by (time, id): an id -> index table, dense when the ids
    // are (they follow allocation order), else sorted pairs.
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
    for (const Alloc& x : td.allocs) {
        lo = std::min(lo, x.id);
        hi = std::max(hi, x.id);
    }
    std::vector<uint32_t> dense;
    std::vector<std::pair<int64_t, uint32_t>> sparse;
    if (n > 0 && static_cast<uint64_t>(hi - lo) < 4 * static_cast<uint64_t>(n) + 1024) {
        dense.assign(static_cast<size_t>(hi - lo + 1), ~uint32_t{0});
        for (size_t i = 0; i < n; ++i)
            dense[static_cast<size_t>(td.allocs[i].id - lo)] = static_cast<uint32_t>(i);
    } else {
        sparse.reserve(n);
        for (size_t i = 0; i < n; ++i)
            sparse.emplace_back(td.allocs[i].id, static_cast<uint32_t>(i));
        std::sort(sparse.begin(), sparse.end());
    }
    auto indexOf = [&](int64_t id) -> int64_t {
        if (!dense.empty()) {
            if (id < lo || id > hi) return -1;
            const uint32_t i = dense[static_cast<size_t>(id - lo)];
            return i == ~uint32_t{0} ? -1 : i;
        }
        const auto it = std::lower_bound(sparse.begin(), sparse.end(), std::make_pair(id, 0u));
        return it != sparse.end() && it->first == id ? it->second : -1;
    };
    std::unordered_map<uint32_t, uint16_t> streamIndex;
    std::unordered_set<uint32_t> tags, metas;
    const Engine::Impl& impl = engineImpl(e);
    // Ghost blocks: allocated before a snapshot's trace began (history.h).
    if (const auto hist = traceHistory(impl.summary.meta); !hist.empty())
        for (size_t i = 0; i < n; ++i)
            if (isGhostBlock(hist, td.device, td.allocs[i].address, td.allocs[i].allocNs))
                a->ghost.insert(static_cast<uint32_t>(i));
    int64_t after = std::numeric_limits<int64_t>::min();
    // In chunks: the engine's connection is shared with lookups the GUI thread makes (hover,
    // details); a chunk holds it a few tens of ms at most.
    constexpr int64_t kChunk = 65536;
    for (bool more = n > 0; more;) {
        std::lock_guard db(impl.dbMutex);
        if (!impl.session) break;
        const int64_t got = readAttributeRows(
            *impl.session.operator->(), td.device, td.level, after, kChunk,
            [&](const AttributeRow& r) {
                after = r.id;
                const int64_t i = indexOf(r.id);
                if (i < 0) return;
                const auto k = static_cast<size_t>(i);
                a->stack[k] = r.stack;
                a->tag[k] = r.tag;
                if (r.tag) tags.insert(r.tag);
                a->meta[k] = r.meta;
                if (r.meta) metas.insert(r.meta);
                auto [it, inserted] =
                    streamIndex.try_emplace(r.stream, static_cast<uint16_t>(a->streams.size()));
                if (inserted) {
                    if (a->streams.size() >= 0xffff)
                        it->second = 0xffff; // "other streams"
                    else
                        a->streams.push_back(r.stream);
                }
                a->stream[k] = it->second == 0xffff ? 0 : it->second;
                if (r.requestedKnown) {
                    const uint64_t size = td.allocs[k].size;
                    const uint64_t s = size >= r.requested ? size - r.requested : 0;
                    if (s < TrackAttrs::kBig) {
                        a->slack[k] = static_cast<uint32_t>(s);
                    } else {
                        a->slack[k] = TrackAttrs::kBig;
                        a->bigSlack[static_cast<uint32_t>(k)] = s;
                    }
                }
            });
        more = got == kChunk;
    }
    if (a->streams.empty()) a->streams.push_back(0);
    {
        std::lock_guard db(impl.dbMutex);
        if (impl.session) {
            for (uint32_t t : tags)
                a->tagText[t] = impl.session->string(StringId{t});
            for (uint32_t t : metas)
                a->metaText[t] = impl.session->string(StringId{t});
        }
    }
    std::lock_guard lock(d.mu);
    d.attrs[ti] = std::move(a);
    return d.attrs[ti];
}

std::shared_ptr<const StackTable> stacksOf(const Engine& e, Explorer::Data& d)
{
    {
        std::lock_guard lock(d.mu);
        if (d.stacks) return d.stacks;
    }
    std::lock_guard load(d.loadMu);
    {
        std::lock_guard lock(d.mu);
        if (d.stacks) return d.stacks;
    }
    auto st = std::make_shared<StackTable>();
    st->sites.push_back({"(no stack recorded)", {}});
    std::vector<std::pair<uint32_t, std::vector<std::string>>> rows;
    {
        const Engine::Impl& impl = engineImpl(e);
        std::lock_guard db(impl.dbMutex);
        if (impl.session) rows = readStacks(*impl.session.operator->());
    }
    std::unordered_map<std::string, uint32_t> siteByText;
    for (const auto& [id, frames] : rows) {
        const StackView v = viewStack(frames);
        std::string lower;
        for (const std::string& f : frames) {
            lower += f;
            lower += '\n';
        }
        std::transform(lower.begin(), lower.end(), lower.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        st->text[id] = std::move(lower);
        if (v.callSite < 0) continue;
        const StackFrame& f = v.frames[static_cast<size_t>(v.callSite)];
        auto [it, inserted] =
            siteByText.try_emplace(f.text, static_cast<uint32_t>(st->sites.size()));
        if (inserted) st->sites.push_back({f.label(), f.text});
        st->siteOf[id] = it->second;
    }
    std::lock_guard lock(d.mu);
    d.stacks = std::move(st);
    return d.stacks;
}

ExploreContext exploreContext(const Engine& e, std::shared_ptr<Explorer::Data> data,
                              uint32_t device, Level level, bool attributes)
{
    const TrackData& td = exploreTrack(e, device, level);
    ExploreContext c{engineImpl(e), td, std::move(data), nullptr, nullptr, nullptr};
    c.pools = poolsOf(e, *c.data, td);
    if (attributes) {
        c.attrs = attributesOf(e, *c.data, td);
        c.stacks = stacksOf(e, *c.data);
    }
    return c;
}

uint64_t groupKey(GroupBy by, const TrackData& td, size_t i, const TrackAttrs& a,
                  const StackTable& st, const PoolMap& pools)
{
    switch (by) {
    case GroupBy::CallSite:
        return st.site(a.stack[i]);
    case GroupBy::Tag:
        return a.tag[i];
    case GroupBy::Stream:
        return a.stream[i];
    case GroupBy::Pool:
        return pools.ofAlloc(td.allocs[i]);
    case GroupBy::Category: // callers look it up (categoriesOf): it needs the rules
        return 0;
    }
    return 0;
}

std::string groupLabel(GroupBy by, uint64_t key, const TrackData& td, const TrackAttrs& a,
                       const StackTable& st)
{
    switch (by) {
    case GroupBy::CallSite:
        return key < st.sites.size() ? st.sites[key].label : std::string("?");
    case GroupBy::Tag: {
        if (key == 0) return "(no tag)";
        const auto it = a.tagText.find(static_cast<uint32_t>(key));
        return it == a.tagText.end() || it->second.empty() ? "(no tag)" : it->second;
    }
    case GroupBy::Stream:
        return fmt::format("stream {}", key < a.streams.size() ? a.streams[key] : 0);
    case GroupBy::Pool:
        return "pool " + poolLabel(key, td.level);
    case GroupBy::Category:
        return memoryCategoryName(static_cast<MemoryCategory>(key));
    }
    return {};
}

BlockRow blockRow(const TrackData& td, size_t i, const PoolMap& pools, const TrackAttrs* a,
                  const StackTable* st)
{
    const Alloc& x = td.allocs[i];
    BlockRow b;
    b.id = x.id;
    b.address = x.address;
    b.size = x.size;
    b.regionId = x.region == kNoRegion ? -1 : td.regions[x.region].id;
    b.pool = pools.ofAlloc(x);
    b.since = x.allocNs;
    b.until = x.freeNs;
    if (a && st && i < a->stack.size()) {
        b.requested = a->requested(i, x.size);
        b.stream = a->streams[a->stream[i]];
        b.tag = groupLabel(GroupBy::Tag, a->tag[i], td, *a, *st);
        if (a->tag[i] == 0) b.tag.clear();
        if (a->stack[i]) b.site = st->sites[st->site(a->stack[i])].label;
        if (i < a->meta.size() && a->meta[i])
            if (auto m = a->metaText.find(a->meta[i]); m != a->metaText.end())
                b.userMetadata = m->second;
        b.ghost = a->ghost.count(static_cast<uint32_t>(i)) > 0;
    }
    return b;
}

// ---- Explorer --------------------------------------------------------------------------------

bool Explorer::stateOnly() const
{
    const auto D = data();
    {
        std::lock_guard lock(D->mu);
        if (D->stateOnly >= 0) return D->stateOnly == 1;
    }
    const Engine::Impl& d = engineImpl(*engine_);
    const int64_t t0 = d.timeBegin;
    bool any = false, only = true;
    for (const TrackData& t : d.tracks) {
        for (const RegionRec& r : t.regions) {
            any = true;
            only = only && r.createNs <= t0 && r.destroyNs == kAlive;
        }
        for (const Alloc& a : t.allocs) {
            any = true;
            only = only && a.allocNs <= t0 && a.freeNs == kAlive;
        }
        for (const Alloc& a : t.pending) // waits, as blocks
            only = only && a.allocNs <= t0 && a.freeNs == kAlive;
    }
    std::lock_guard lock(D->mu);
    D->stateOnly = any && only ? 1 : 0;
    return D->stateOnly == 1;
}

namespace {
// f(range, time of an entry) for each of the track's six sorted event streams, as the Replayer
// walks them: allocations, frees, region creations and releases, pending frees' waits beginning
// and ending.
template <typename F> void forEachStream(const TrackData& td, F&& f)
{
    const auto& A = td.allocs;
    const auto& P = td.pending;
    f(A, [](const Alloc& x) { return x.allocNs; });
    f(td.byFree, [&](uint32_t i) { return A[i].freeNs; });
    f(td.regions, [](const RegionRec& x) { return x.createNs; });
    f(td.regionsByEnd, [&](uint32_t i) { return td.regions[i].destroyNs; });
    f(P, [](const Alloc& x) { return x.allocNs; });
    f(td.pendingByEnd, [&](uint32_t i) { return P[i].freeNs; });
}
} // namespace

int64_t Explorer::nextEvent(uint32_t device, Level level, int64_t t) const
{
    int64_t best = kNoTime;
    forEachStream(exploreTrack(*engine_, device, level), [&](const auto& v, auto time) {
        const auto it = std::upper_bound(v.begin(), v.end(), t,
                                         [&](int64_t x, const auto& e) { return x < time(e); });
        if (it != v.end() && (best == kNoTime || time(*it) < best)) best = time(*it);
    });
    return best;
}

int64_t Explorer::previousEvent(uint32_t device, Level level, int64_t t) const
{
    int64_t best = kNoTime;
    forEachStream(exploreTrack(*engine_, device, level), [&](const auto& v, auto time) {
        const auto it = std::lower_bound(v.begin(), v.end(), t,
                                         [&](const auto& e, int64_t x) { return time(e) < x; });
        if (it != v.begin() && (best == kNoTime || time(*std::prev(it)) > best))
            best = time(*std::prev(it));
    });
    return best;
}

bool Explorer::attributesReady(uint32_t device, Level level) const
{
    const Engine::Impl& d = engineImpl(*engine_);
    if (!d.rowsReady.load()) return false;
    const TrackData* td = d.track(device, level);
    if (!td) return true;
    const auto D = data();
    std::lock_guard lock(D->mu);
    const size_t ti = trackIndex(*engine_, *td);
    return ti < D->attrs.size() && D->attrs[ti] && D->stacks;
}

void Explorer::loadAttributes(uint32_t device, Level level) const
{
    const TrackData& td = exploreTrack(*engine_, device, level);
    const auto D = data();
    attributesOf(*engine_, *D, td);
    stacksOf(*engine_, *D);
}

BlocksAt Explorer::blocksAt(uint32_t device, Level level, int64_t t, std::optional<uint64_t> pool,
                            bool withAttributes) const
{
    const Engine& e = *engine_;
    const ExploreContext c =
        exploreContext(e, data(), device, level, withAttributes || attributesReady(device, level));
    const Engine::Impl& d = c.d;
    const TrackData& td = c.td;
    const auto& pools = c.pools;
    const auto& attrs = c.attrs;
    const auto& stacks = c.stacks;
    BlocksAt out;
    out.device = device;
    out.level = level;
    out.pool = pool;
    out.time = t;
    out.attributes = attrs != nullptr;
    out.caveats = d.resultCaveats();
    Replayer r(td);
    r.seek(t);
    if (pool) {
        // The pool's figures as the engine gives them (they add up to the track's).
        for (PoolState& p : e.poolStatesAt(device, level, t))
            if (p.pool == *pool) out.state = std::move(p.state);
        out.state.device = device;
        out.state.level = level;
        out.state.time = t;
    } else {
        // As Engine::stateAt, from the same replay the fragments come from.
        out.state = r.state().snapshot(t, true);
        out.state.device = device;
        out.state.level = level;
        out.state.entropyWindowNs = std::max<int64_t>(d.options.entropyWindowNs, 1);
        out.state.eventSizeEntropyBits =
            e.eventEntropyAt(device, level, t, out.state.entropyWindowNs);
    }
    for (uint32_t i : d.liveAt(td, t, t)) {
        if (pool && pools->ofAlloc(td.allocs[i]) != *pool) continue;
        out.rows.push_back(blockRow(td, i, *pools, attrs.get(), stacks.get()));
    }
    for (const Fragment& f : r.state().fragments()) {
        const uint64_t p = pools->ofId(f.regionId);
        if (pool && p != *pool) continue;
        BlockRow b;
        b.free = true;
        b.address = f.address;
        b.size = f.size;
        b.regionId = f.regionId;
        b.pool = p;
        out.rows.push_back(std::move(b));
    }
    // Pending frees waiting at t (those the replay placed in a region).
    for (size_t i = 0; i < td.pending.size() && td.pending[i].allocNs <= t; ++i) {
        const Alloc& a = td.pending[i];
        if (!a.occupies() || a.freeNs <= t || a.region == kNoRegion) continue;
        const uint32_t rr = td.placeAt(a, t);
        const uint64_t p = pools->byIndex[rr];
        if (pool && p != *pool) continue;
        BlockRow b;
        b.pending = true;
        b.address = a.address;
        b.size = a.size;
        b.regionId = td.regions[rr].id;
        b.pool = p;
        b.since = a.allocNs;
        b.until = a.freeNs;
        b.stream = td.pendingStream[i];
        out.rows.push_back(std::move(b));
    }
    std::sort(out.rows.begin(), out.rows.end(), [](const BlockRow& a, const BlockRow& b) {
        return a.address != b.address ? a.address < b.address : a.free < b.free;
    });
    return out;
}

BlockCounts countRows(const std::vector<BlockRow>& rows)
{
    BlockCounts c;
    for (const BlockRow& r : rows)
        ++(r.free ? c.fragments : r.pending ? c.pending : c.blocks);
    return c;
}

JumpTargets Explorer::jumpTargets(uint32_t device, Level level, std::optional<uint64_t> pool) const
{
    // The engine's exact summary (summary.h), the figures and times `fragscope report` prints,
    // so that a jump lands on the instant the report names.
    const TrackSummary sum = engine_->trackSummary(device, level);
    const SummaryFigures* f = &sum.figures;
    if (pool) // a track with one pool has no per-pool figures: the track's are that pool's
        for (const PoolSummary& p : sum.pools)
            if (p.pool == *pool) f = &p.figures;
    JumpTargets j;
    j.maxRatioTime = f->maxFragmentationRatioAtNs;
    j.maxRatio = f->maxFragmentationRatio;
    j.peakReservedTime = f->peakReservedAtNs;
    j.peakReserved = f->peakReservedBytes;
    j.minLargestTime = f->minLargestFreeAtNs;
    j.minLargest = f->minLargestFreeBytes;
    return j;
}
} // namespace fs::analysis
