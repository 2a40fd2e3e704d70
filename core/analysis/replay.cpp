// Incremental fragment bookkeeping and the checkpointed replay (docs/analysis.md "Replay").
#include "engine_impl.h"

#include <algorithm>

namespace fs::analysis {

FragState::FragState(const TrackData& t) : td_(&t), regions_(t.regions.size()) {}

FragState::FragState(const TrackData& t, std::vector<RegionLive>&& empty)
    : td_(&t), regions_(std::move(empty))
{
    regions_.resize(t.regions.size());
}

void FragState::addFragment(uint64_t size)
{
    if (size == 0) return;
    ++fragCount;
    freeBytes += size;
    sizes_.add(size);
    classes_.add(size);
    const auto k = static_cast<size_t>(log2Bin(size));
    ++binCount_[k];
    binBytes_[k] += size;
    const int c = clusterOf(size);
    if (c >= 0) {
        ++clusterCount_[static_cast<size_t>(c)];
        clusterBytes_[static_cast<size_t>(c)] += size;
    }
}

void FragState::removeFragment(uint64_t size)
{
    if (size == 0) return;
    --fragCount;
    freeBytes -= size;
    sizes_.remove(size);
    classes_.remove(size);
    const auto k = static_cast<size_t>(log2Bin(size));
    --binCount_[k];
    binBytes_[k] -= size;
    const int c = clusterOf(size);
    if (c >= 0) {
        --clusterCount_[static_cast<size_t>(c)];
        clusterBytes_[static_cast<size_t>(c)] -= size;
    }
}

// Adds (or removes) every gap of region r between its live allocations.
void FragState::gapsOf(uint32_t r, bool add)
{
    const RegionRec& rr = td_->regions[r];
    uint64_t pos = rr.address;
    const uint64_t end = rr.address + rr.size;
    for (const auto& [a, e] : regions_[r].allocs) {
        if (a > pos)
            add ? addFragment(std::min(a, end) - pos) : removeFragment(std::min(a, end) - pos);
        pos = std::max(pos, e);
    }
    if (end > pos) add ? addFragment(end - pos) : removeFragment(end - pos);
}

void FragState::regionCreate(uint32_t r)
{
    RegionLive& R = regions_[r];
    if (R.alive) return;
    R.alive = true;
    ++regionCount;
    reserved += td_->regions[r].size;
    indexPiece(r, true);
    // Blocks already recorded in it (none in a consistent session) move inside.
    for (const auto& [a, e] : R.allocs) {
        const bool p = R.pending.count(a) > 0;
        outside(p) -= e - a;
        inside(p) += e - a;
    }
    gapsOf(r, true);
}

void FragState::regionDestroy(uint32_t r)
{
    RegionLive& R = regions_[r];
    if (!R.alive) return;
    gapsOf(r, false);
    R.alive = false;
    --regionCount;
    const RegionRec& rr = td_->regions[r];
    reserved -= rr.size;
    indexPiece(r, false);
    // Blocks still live move to the piece of the same expandable segment that now covers them
    // (it was mapped at this instant, before this release); others are outside any region.
    const auto pit = alivePieces_.find(rr.id);
    for (auto it = R.allocs.begin(); it != R.allocs.end();) {
        const auto [a, e] = *it;
        const bool p = R.pending.count(a) > 0;
        inside(p) -= e - a;
        uint32_t to = kNoRegion;
        if (pit != alivePieces_.end()) {
            auto q = pit->second.upper_bound(a);
            if (q != pit->second.begin()) {
                --q;
                const RegionRec& qr = td_->regions[q->second];
                if (q->second != r && a < qr.address + qr.size) to = q->second;
            }
        }
        if (to == kNoRegion) {
            outside(p) += e - a;
            ++it;
            continue;
        }
        const RegionRec& qr = td_->regions[to];
        insertInto(to, a, std::min(e, qr.address + qr.size), p);
        movedTo_[a] = to;
        if (p) {
            R.pending.erase(a);
            notePending(r, -1);
        }
        it = R.allocs.erase(it);
    }
}

void FragState::indexPiece(uint32_t r, bool alive)
{
    const RegionRec& rr = td_->regions[r];
    if (td_->pieces.empty() || !td_->pieces.count(rr.id)) return;
    auto& m = alivePieces_[rr.id];
    if (alive)
        m[rr.address] = r; // a piece that replaces another at the same address takes its place
    else if (auto it = m.find(rr.address); it != m.end() && it->second == r)
        m.erase(it);
}

void FragState::notePending(uint32_t r, int64_t delta)
{
    auto [it, inserted] = pendingRegions_.try_emplace(r, 0);
    it->second += delta;
    if (it->second <= 0) pendingRegions_.erase(it);
}

void FragState::insertInto(uint32_t r, uint64_t address, uint64_t end, bool pending)
{
    RegionLive& R = regions_[r];
    const RegionRec& rr = td_->regions[r];
    const uint64_t rEnd = rr.address + rr.size;
    auto [it, inserted] = R.allocs.emplace(address, end);
    if (!inserted) { // two live blocks at one address: inconsistent input, count it outside
        outside(pending) += end - address;
        return;
    }
    if (pending) {
        R.pending.insert(address);
        notePending(r, 1);
    }
    inside(pending) += end - address;
    const uint64_t prevEnd =
        it == R.allocs.begin() ? rr.address : std::max(rr.address, std::prev(it)->second);
    const auto next = std::next(it);
    const uint64_t nextStart = next == R.allocs.end() ? rEnd : next->first;
    if (nextStart > prevEnd) removeFragment(nextStart - prevEnd);
    if (address > prevEnd) addFragment(address - prevEnd);
    if (nextStart > end) addFragment(nextStart - end);
}

uint32_t TrackData::placeAt(const Alloc& a, int64_t t) const
{
    if (a.region == kNoRegion) return a.region;
    const RegionRec& rr = regions[a.region];
    if (rr.createNs <= t && rr.destroyNs > t) return a.region;
    const auto it = pieces.find(rr.id);
    if (it == pieces.end()) return a.region;
    for (uint32_t q : it->second) {
        const RegionRec& r = regions[q];
        if (r.createNs <= t && r.destroyNs > t && a.address >= r.address &&
            a.address < r.address + r.size)
            return q;
    }
    return a.region;
}

void FragState::alloc(const Alloc& a, bool pending)
{
    ++(pending ? pendingLive : live);
    if (a.region == kNoRegion) {
        outside(pending) += a.size;
        return;
    }
    RegionLive& R = regions_[a.region];
    const RegionRec& rr = td_->regions[a.region];
    const uint64_t rEnd = rr.address + rr.size;
    const uint64_t end = std::min(a.end(), rEnd);
    auto [it, inserted] = R.allocs.emplace(a.address, end);
    if (!inserted) { // two live blocks at one address: inconsistent input, count it outside
        outside(pending) += a.size;
        return;
    }
    if (pending) {
        R.pending.insert(a.address);
        notePending(a.region, 1);
    }
    if (!R.alive) {
        outside(pending) += end - a.address;
        return;
    }
    inside(pending) += end - a.address;
    const uint64_t prevEnd =
        it == R.allocs.begin() ? rr.address : std::max(rr.address, std::prev(it)->second);
    const auto next = std::next(it);
    const uint64_t nextStart = next == R.allocs.end() ? rEnd : next->first;
    if (nextStart > prevEnd) removeFragment(nextStart - prevEnd);
    if (a.address > prevEnd) addFragment(a.address - prevEnd);
    if (nextStart > end) addFragment(nextStart - end);
}

void FragState::free(const Alloc& a, bool pending)
{
    lastFreed = {};
    if (a.region == kNoRegion) {
        --(pending ? pendingLive : live);
        outside(pending) -= a.size;
        return;
    }
    uint32_t r = a.region;
    auto it = regions_[r].allocs.find(a.address);
    if (it == regions_[r].allocs.end()) {
        const auto m = movedTo_.find(a.address); // moved when its piece was unmapped
        if (m == movedTo_.end()) return;         // never inserted (see alloc())
        r = m->second;
        movedTo_.erase(m);
        it = regions_[r].allocs.find(a.address);
        if (it == regions_[r].allocs.end()) return;
    }
    RegionLive& R = regions_[r];
    --(pending ? pendingLive : live);
    if ((R.pending.count(a.address) > 0) != pending) {
        // The entry is the other kind's (a wait and a block at one address: inconsistent
        // input); alloc() counted this one outside.
        outside(pending) -= a.size;
        return;
    }
    if (pending) {
        R.pending.erase(a.address);
        notePending(r, -1);
    }
    const uint64_t end = it->second;
    if (!R.alive) {
        outside(pending) -= end - a.address;
        R.allocs.erase(it);
        return;
    }
    const RegionRec& rr = td_->regions[r];
    const uint64_t rEnd = rr.address + rr.size;
    inside(pending) -= end - a.address;
    const uint64_t prevEnd =
        it == R.allocs.begin() ? rr.address : std::max(rr.address, std::prev(it)->second);
    const auto next = std::next(it);
    const uint64_t nextStart = next == R.allocs.end() ? rEnd : next->first;
    if (a.address > prevEnd) removeFragment(a.address - prevEnd);
    if (nextStart > end) removeFragment(nextStart - end);
    if (nextStart > prevEnd) addFragment(nextStart - prevEnd);
    lastFreed = {nextStart - prevEnd, it != R.allocs.begin() && next != R.allocs.end()};
    R.allocs.erase(it);
}

void FragState::rebuild(const Checkpoint& c)
{
    // A new state that keeps the regions' storage: on a long run (10^5 regions) making and
    // freeing it again cost more than the rest of a seek.
    std::vector<RegionLive> keep = std::move(regions_);
    for (RegionLive& r : keep) {
        r.alive = false;
        r.allocs.clear();
        r.pending.clear();
    }
    *this = FragState(*td_, std::move(keep));
    for (size_t r = 0; r < c.regionPos; ++r) {
        const RegionRec& rr = td_->regions[r];
        if (rr.destroyNs > c.time) {
            regions_[r].alive = true;
            ++regionCount;
            reserved += rr.size;
            indexPiece(static_cast<uint32_t>(r), true);
        }
    }
    auto place = [&](const Alloc& a, bool pending) {
        ++(pending ? pendingLive : live);
        if (a.region == kNoRegion) {
            outside(pending) += a.size;
            return;
        }
        const uint32_t r = td_->placeAt(a, c.time);
        if (r != a.region) movedTo_[a.address] = r;
        RegionLive& R = regions_[r];
        const RegionRec& rr = td_->regions[r];
        const uint64_t end = std::min(a.end(), rr.address + rr.size);
        if (!R.allocs.emplace(a.address, end).second) {
            outside(pending) += a.size; // mirrors alloc() for two live blocks at one address
            return;
        }
        if (pending) {
            R.pending.insert(a.address);
            notePending(r, 1);
        }
        (R.alive ? inside(pending) : outside(pending)) += end - a.address;
    };
    for (uint32_t i : c.live)
        place(td_->allocs[i], false);
    // Pending frees waiting at the checkpoint's time (the checkpoints keep allocations only).
    for (const Alloc& a : td_->pending) {
        if (a.allocNs > c.time) break;
        if (a.occupies() && a.freeNs > c.time) place(a, true);
    }
    for (uint32_t r = 0; r < regions_.size(); ++r)
        if (regions_[r].alive) gapsOf(r, true);
}

State FragState::snapshot(int64_t t, bool withHistogram) const
{
    State s;
    s.device = td_->device;
    s.level = td_->level;
    s.time = t;
    s.regionCount = regionCount;
    s.liveAllocations = live;
    s.reservedBytes = reserved;
    s.allocatedBytes = allocatedIn;
    s.allocatedOutsideBytes = allocatedOut;
    s.freeBytes = freeBytes;
    s.fragmentCount = fragCount;
    s.largestFreeFragmentBytes = largest();
    s.fragmentationRatio = ratio();
    s.fragmentEntropyBits = entropy();
    if (withHistogram)
        s.histogram = makeHistogram(binCount_, binBytes_, clusterCount_, clusterBytes_);
    s.pendingFreeBlocks = pendingLive;
    s.pendingFreeBytes = pendingIn;
    setOncePendingComplete(s, largestOncePendingComplete());
    return s;
}

void setOncePendingComplete(State& s, uint64_t largest)
{
    s.largestFreeOncePendingCompleteBytes = largest;
    const uint64_t all = s.freeIncludingPendingBytes();
    s.fragmentationRatioOncePendingComplete =
        all == 0 ? 0.0 : 1.0 - static_cast<double>(largest) / static_cast<double>(all);
}

void FragState::rangesOf(uint32_t r, std::vector<Fragment>* free,
                         std::vector<Fragment>* pending) const
{
    const RegionLive& R = regions_[r];
    const RegionRec& rr = td_->regions[r];
    uint64_t pos = rr.address;
    const uint64_t end = rr.address + rr.size;
    for (const auto& [a, e] : R.allocs) {
        if (free && a > pos) free->push_back({rr.id, pos, std::min(a, end) - pos});
        if (pending && R.pending.count(a)) {
            const uint64_t lo = std::max(a, pos), hi = std::min(e, end);
            if (hi > lo) pending->push_back({rr.id, lo, hi - lo});
        }
        pos = std::max(pos, e);
    }
    if (free && end > pos) free->push_back({rr.id, pos, end - pos});
}

uint64_t FragState::largestOncePendingComplete() const
{
    uint64_t best = largest();
    for (const auto& [r, n] : pendingRegions_) {
        if (!regions_[r].alive) continue;
        std::vector<Fragment> free, pending;
        rangesOf(r, &free, &pending);
        best = std::max(best, analysis::largestOncePendingComplete(free, pending));
    }
    return best;
}

std::vector<Fragment> FragState::pendingBlocks() const
{
    std::vector<Fragment> out;
    for (const auto& [r, n] : pendingRegions_)
        if (regions_[r].alive) rangesOf(r, nullptr, &out);
    return out;
}

uint64_t largestOncePendingComplete(const std::vector<Fragment>& free,
                                    const std::vector<Fragment>& pending)
{
    std::vector<Fragment> all = free;
    all.insert(all.end(), pending.begin(), pending.end());
    std::sort(all.begin(), all.end(), [](const Fragment& a, const Fragment& b) {
        return a.regionId != b.regionId ? a.regionId < b.regionId : a.address < b.address;
    });
    uint64_t best = 0, run = 0;
    for (size_t i = 0; i < all.size(); ++i) {
        const bool joins = i > 0 && all[i].regionId == all[i - 1].regionId &&
                           all[i - 1].address + all[i - 1].size == all[i].address;
        run = joins ? run + all[i].size : all[i].size;
        best = std::max(best, run);
    }
    return best;
}

std::vector<Fragment> FragState::fragments() const
{
    std::vector<Fragment> out;
    for (uint32_t r = 0; r < regions_.size(); ++r)
        if (regions_[r].alive) rangesOf(r, &out, nullptr);
    return out;
}

int64_t Replayer::lastEventTime() const
{
    // Each stream is sorted: its last processed event is the one before its position.
    int64_t t = std::numeric_limits<int64_t>::min();
    if (allocPos_) t = std::max(t, t_.allocs[allocPos_ - 1].allocNs);
    if (freePos_) t = std::max(t, t_.allocs[t_.byFree[freePos_ - 1]].freeNs);
    if (regionPos_) t = std::max(t, t_.regions[regionPos_ - 1].createNs);
    if (regionEndPos_) t = std::max(t, t_.regions[t_.regionsByEnd[regionEndPos_ - 1]].destroyNs);
    if (pendingPos_) t = std::max(t, t_.pending[pendingPos_ - 1].allocNs);
    if (pendingEndPos_) t = std::max(t, t_.pending[t_.pendingByEnd[pendingEndPos_ - 1]].freeNs);
    return t;
}

void Replayer::seek(int64_t time, bool useCheckpoints)
{
    // Back to a time no processed event comes after (the last advance stopped at a limit past
    // it, e.g. a frame's end that is the next frame's start): the state is already the one at
    // `time`, and going on from here beats a rebuild.
    if (time < time_ && lastEventTime() <= time) time_ = time;
    const Checkpoint* best = nullptr;
    if (useCheckpoints) {
        // Last checkpoint at or before time.
        auto it = std::upper_bound(t_.checkpoints.begin(), t_.checkpoints.end(), time,
                                   [](int64_t v, const Checkpoint& c) { return v < c.time; });
        if (it != t_.checkpoints.begin()) best = &*std::prev(it);
    }
    // Continuing forward from where we are is cheaper than a rebuild when it is closer.
    const bool forward = time >= time_ && (!best || best->time <= time_);
    if (!forward) {
        if (best) {
            state_.rebuild(*best);
            allocPos_ = best->allocPos;
            freePos_ = best->freePos;
            regionPos_ = best->regionPos;
            regionEndPos_ = best->regionEndPos;
            time_ = best->time;
            // The pending streams' positions (checkpoints do not keep them; rebuild placed the
            // waits alive then).
            const auto& P = t_.pending;
            pendingPos_ = static_cast<size_t>(
                std::upper_bound(P.begin(), P.end(), time_,
                                 [](int64_t v, const Alloc& a) { return v < a.allocNs; }) -
                P.begin());
            pendingEndPos_ = static_cast<size_t>(
                std::upper_bound(t_.pendingByEnd.begin(), t_.pendingByEnd.end(), time_,
                                 [&](int64_t v, uint32_t i) { return v < P[i].freeNs; }) -
                t_.pendingByEnd.begin());
        } else {
            state_ = FragState(t_);
            allocPos_ = freePos_ = regionPos_ = regionEndPos_ = 0;
            pendingPos_ = pendingEndPos_ = 0;
            time_ = std::numeric_limits<int64_t>::min();
        }
    }
    advanceTo(time);
}

void CheckpointBuilder::start(TrackData& t)
{
    live.clear();
    pos.clear();
    ai = fi = ri = rei = 0;
    sinceLast = 0;
    lastInstant = std::numeric_limits<int64_t>::min();
    t.checkpoints.clear();
    t.checkpoints.push_back(Checkpoint{std::numeric_limits<int64_t>::min(), 0, 0, 0, 0, {}});
}

void CheckpointBuilder::resume(TrackData& t, int64_t minTime)
{
    if (minTime > lastInstant) return; // the new events all come after where it stopped
    // Checkpoints at or after the earliest new event are wrong now: drop them and walk again
    // from the last one before it (the first, the empty state, is at INT64_MIN and stays).
    while (t.checkpoints.size() > 1 && t.checkpoints.back().time >= minTime)
        t.checkpoints.pop_back();
    const Checkpoint& c = t.checkpoints.back();
    live = c.live;
    pos.assign(t.allocs.size(), 0);
    for (size_t k = 0; k < live.size(); ++k)
        pos[live[k]] = static_cast<uint32_t>(k);
    ai = c.allocPos;
    fi = c.freePos;
    ri = c.regionPos;
    rei = c.regionEndPos;
    sinceLast = 0;
    lastInstant = c.time;
}

void CheckpointBuilder::run(TrackData& t)
{
    // The live set is kept as a dense vector with each block's position, so adding and removing
    // are O(1); a checkpoint copies and sorts it. Spacing grows with the live set so that the
    // checkpoints together hold about as many entries as the session has events.
    const auto& A = t.allocs;
    pos.resize(A.size(), 0);
    constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
    while (true) {
        const int64_t tr = ri < t.regions.size() ? t.regions[ri].createNs : kNone;
        const int64_t tf = fi < t.byFree.size() ? A[t.byFree[fi]].freeNs : kNone;
        const int64_t ta = ai < A.size() ? A[ai].allocNs : kNone;
        const int64_t te =
            rei < t.regionsByEnd.size() ? t.regions[t.regionsByEnd[rei]].destroyNs : kNone;
        const int64_t now = std::min(std::min(tr, tf), std::min(ta, te));
        if (now == kNone) break;
        // Consume every event at this instant so the checkpoint sits between two instants.
        while (ri < t.regions.size() && t.regions[ri].createNs == now)
            ++ri;
        while (fi < t.byFree.size() && A[t.byFree[fi]].freeNs == now) {
            const uint32_t i = t.byFree[fi++];
            if (A[i].occupies()) {
                const uint32_t p = pos[i];
                pos[live.back()] = p;
                live[p] = live.back();
                live.pop_back();
            }
            ++sinceLast;
        }
        while (ai < A.size() && A[ai].allocNs == now) {
            if (A[ai].occupies()) {
                pos[ai] = static_cast<uint32_t>(live.size());
                live.push_back(static_cast<uint32_t>(ai));
            }
            ++ai;
            ++sinceLast;
        }
        while (rei < t.regionsByEnd.size() && t.regions[t.regionsByEnd[rei]].destroyNs == now)
            ++rei;
        lastInstant = now;
        if (checkpointDue(sinceLast, live.size())) {
            Checkpoint c{now, ai, fi, ri, rei, live};
            std::sort(c.live.begin(), c.live.end());
            t.checkpoints.push_back(std::move(c));
            sinceLast = 0;
        }
    }
}

std::vector<uint32_t> Engine::Impl::liveAt(const TrackData& t, int64_t time, int64_t until) const
{
    // Blocks alive at some instant of [time, until]: the live set of the checkpoint before time,
    // plus every block allocated after it up to until, keeping those still alive at time.
    auto it = std::upper_bound(t.checkpoints.begin(), t.checkpoints.end(), time,
                               [](int64_t v, const Checkpoint& c) { return v < c.time; });
    const Checkpoint& c = *std::prev(it); // the first checkpoint is at INT64_MIN
    std::vector<uint32_t> out;
    out.reserve(c.live.size());
    for (uint32_t i : c.live)
        if (t.allocs[i].freeNs > time) out.push_back(i);
    for (size_t i = c.allocPos; i < t.allocs.size() && t.allocs[i].allocNs <= until; ++i) {
        const Alloc& a = t.allocs[i];
        if (a.occupies() && a.freeNs > time) out.push_back(static_cast<uint32_t>(i));
    }
    return out;
}

} // namespace fs::analysis
