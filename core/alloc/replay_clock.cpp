#include "replay_clock.h"

#include <algorithm>

namespace fs::alloc {

ReplayClock::ReplayClock(const DeviceTrace& d) : d_(d)
{
    std::vector<uint32_t> owners;
    for (const RecordedSegment& s : d.segments) {
        if (s.expandable) continue;
        if (s.createdBy != kNoRequest) owners.push_back(s.createdBy);
        if (s.releasedBy != kNoRequest) owners.push_back(s.releasedBy);
    }
    for (size_t i = 0; i < d.mappingChanges.size(); ++i)
        if (d.mappingChanges[i].request != kNoRequest) {
            owners.push_back(d.mappingChanges[i].request);
            maps_.emplace_back(d.mappingChanges[i].request, static_cast<uint32_t>(i));
        }
    std::sort(owners.begin(), owners.end());
    for (uint32_t o : owners)
        if (owned_.empty() || owned_.back().first != o)
            owned_.emplace_back(o, 1);
        else
            ++owned_.back().second;
    std::sort(maps_.begin(), maps_.end());
}

void ReplayClock::state()
{
    if (stateFor_ == cur_) return;
    stateFor_ = cur_;
    while (nextBurst_ < d_.bursts.size() && d_.bursts[nextBurst_].request < cur_)
        ++nextBurst_;
    burst_ = nextBurst_ < d_.bursts.size() && d_.bursts[nextBurst_].request == cur_
                 ? &d_.bursts[nextBurst_]
                 : nullptr;
    while (nextMap_ < maps_.size() && maps_[nextMap_].first < cur_)
        ++nextMap_;
    mapsBegin_ = mapsEnd_ = nextMap_;
    while (mapsEnd_ < maps_.size() && maps_[mapsEnd_].first == cur_)
        ++mapsEnd_;
    remaining_ = burst_ ? burst_->bytes : 0;
    matched_ = 0;
    releasesSoFar_ = 0;
    mappedSoFar_ = unmappedSoFar_ = 0;
    refused_ = false;
}

void ReplayClock::finish()
{
    state();
    // Mapping changes are known per instant, not per page run: they count as made when the
    // replay mapped and unmapped as many bytes during the request as the recording did.
    uint64_t gained = 0, lost = 0;
    for (size_t k = mapsBegin_; k < mapsEnd_; ++k) {
        const SegmentEvent& m = d_.mappingChanges[maps_[k].second];
        (m.kind == SegmentEvent::Map ? gained : lost) += m.size;
    }
    uint32_t made = matched_;
    if (gained == mappedSoFar_ && lost == unmappedSoFar_)
        made += static_cast<uint32_t>(mapsEnd_ - mapsBegin_);
    while (nextOwned_ < owned_.size() && owned_[nextOwned_].first < cur_) {
        diverged_ = true; // never reached: end() runs after every request
        ++nextOwned_;
    }
    if (nextOwned_ < owned_.size() && owned_[nextOwned_].first == cur_) {
        if (made < owned_[nextOwned_].second) diverged_ = true; // a recorded event not made
        ++nextOwned_;
    }
    if (burst_ && remaining_ == 0 && burst_->count > 0)
        taken_.maxBurstSpanNs =
            std::max(taken_.maxBurstSpanNs, d_.burstTimes[burst_->first + burst_->count - 1] -
                                                d_.burstTimes[burst_->first]);
}

void ReplayClock::emptyCache(bool beforeMalloc)
{
    ++taken_.emptyCaches;
    if (beforeMalloc) ++taken_.emptyCachesBefore;
}

// Assumption for a release the recording did not make then: the burst's release times in order.
int64_t ReplayClock::releaseTime(int64_t recorded, bool matched)
{
    int64_t t = recorded;
    if (!matched) {
        diverged_ = true;
        ++taken_.assumed;
        t = requestTime();
        if (burst_ && burst_->count > 0)
            t = d_.burstTimes[burst_->first + std::min(releasesSoFar_, burst_->count - 1)];
    }
    ++releasesSoFar_;
    return t;
}

int64_t ReplayClock::created(uint32_t recorded)
{
    state();
    if (recorded < d_.segments.size() && d_.segments[recorded].createdBy == cur_) {
        ++matched_;
        ++taken_.creations;
        return d_.segments[recorded].createNs;
    }
    diverged_ = true;
    ++taken_.assumed;
    return requestTime();
}

int64_t ReplayClock::released(uint32_t recorded, uint64_t bytes)
{
    state();
    const bool matched = recorded < d_.segments.size() && d_.segments[recorded].releasedBy == cur_;
    if (matched) {
        ++matched_;
        ++taken_.releases;
        remaining_ -= std::min(remaining_, bytes);
    }
    return releaseTime(matched ? d_.segments[recorded].destroyNs : 0, matched);
}

// The recorded mapping change of the current request (of `kind`) where the recorded bytes add
// up to `sofar`, the replay's bytes so far; null past them.
const SegmentEvent* ReplayClock::mappingAt(SegmentEvent::Kind kind, uint64_t sofar) const
{
    uint64_t sum = 0;
    for (size_t k = mapsBegin_; k < mapsEnd_; ++k) {
        const SegmentEvent& m = d_.mappingChanges[maps_[k].second];
        if (m.kind != kind) continue;
        sum += m.size;
        if (sum >= sofar) return &m;
    }
    return nullptr;
}

int64_t ReplayClock::mapped(uint64_t bytes)
{
    state();
    mappedSoFar_ += bytes;
    if (const SegmentEvent* m = mappingAt(SegmentEvent::Map, mappedSoFar_)) {
        ++taken_.creations;
        return m->time;
    }
    diverged_ = true;
    ++taken_.assumed;
    return requestTime();
}

int64_t ReplayClock::unmapped(uint64_t bytes)
{
    state();
    unmappedSoFar_ += bytes;
    const SegmentEvent* m = mappingAt(SegmentEvent::Unmap, unmappedSoFar_);
    if (m) {
        ++taken_.releases;
        remaining_ -= std::min(remaining_, bytes);
    }
    return releaseTime(m ? m->time : 0, m != nullptr);
}

bool ReplayClock::refuse(uint64_t reserved, uint64_t bytes)
{
    if (diverged_) return false;
    state();
    const Request& r = d_.requests[cur_];
    if (r.kind == Request::Alloc && r.index == kFailedRequest) {
        if (!refused_) ++taken_.failuresFollowed;
        refused_ = true;
        return true;
    }
    if (remaining_ == 0) return false;
    if (!refused_) {
        ++taken_.retries;
        const uint64_t mark = reserved + bytes - 1;
        usableMark_ = usableMark_ == 0 ? mark : std::min(usableMark_, mark);
    }
    refused_ = true;
    return true;
}

} // namespace fs::alloc
