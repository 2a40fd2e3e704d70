// Kernel-variant shifts (docs/analysis.md "Kernel-variant shifts"): per kernel family, the share
// of calls that ran each variant in frame f against the healthy frames before the collapse, and
// the allocation request that preceded the first shifted call.
//
// Nothing here knows a kernel or tag name: families come from graph nodes, launch positions and
// name stems, so the same method works on recorded CUPTI sessions, imports and simulated runs.
#include "precursors.h"
#include "stats.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <span>
#include <unordered_map>

#include <fmt/format.h>

#include "core/format.h"
#include "core/store/kernels.h"
#include "core/store/ooms.h"

namespace fs::analysis {

namespace {

// The family bases, most specific first: a launch belongs to the first basis whose key the
// baseline frames know.
enum Basis : int { kNode = 0, kPosition = 1, kStem = 2, kBases = 3 };
constexpr const char* kBasisName[kBases] = {"graph_node", "launch_position", "name_stem"};

// A family key: hi packs the basis, device and (positions) stream; lo the node id, the launch
// ordinal or the stem id. Integers, not strings: a frame holds thousands of launches.
struct Key
{
    uint64_t hi = 0; // 0: no key on this basis
    uint64_t lo = 0;
    bool operator==(const Key& o) const { return hi == o.hi && lo == o.lo; }
    bool operator<(const Key& o) const { return hi != o.hi ? hi < o.hi : lo < o.lo; }
    explicit operator bool() const { return hi != 0; }
};
Key nodeKey(uint32_t device, int64_t node)
{
    return {uint64_t{1} << 62 | device, static_cast<uint64_t>(node)};
}
Key positionKey(uint32_t device, uint32_t stream, bool inGraph, int64_t ordinal)
{
    return {uint64_t{2} << 62 | uint64_t{device} << 33 | uint64_t{stream} << 1 |
                (inGraph ? 1u : 0u),
            static_cast<uint64_t>(ordinal)};
}
Key stemKey(uint32_t device, int64_t stem)
{
    return {uint64_t{3} << 62 | device, static_cast<uint64_t>(stem)};
}

// Names and stems met so far (a frame repeats a few names thousands of times).
struct Names
{
    std::unordered_map<int64_t, std::string> text;
    std::unordered_map<int64_t, int64_t> stemOf; // name id -> stem id
    std::vector<std::string> stems;
    std::unordered_map<std::string, int64_t> stemIds;
};

struct Launch
{
    int64_t start = 0;
    uint32_t device = 0;
    uint32_t stream = 0;
    int64_t name = 0;
    bool inGraph = false;
    std::array<Key, kBases> key; // family key on each basis (empty when none)
};

struct Family
{
    std::unordered_map<int64_t, int64_t> byName; // calls per variant
    int64_t total = 0;
    void add(int64_t name)
    {
        ++byName[name];
        ++total;
    }
    int64_t calls(int64_t name) const
    {
        auto it = byName.find(name);
        return it == byName.end() ? 0 : it->second;
    }
};
// The calls per variant of every family on one basis, flat: a row per (family, variant) with
// its calls, sorted; a family per key with its rows and total. Built by one sort: a frame holds
// thousands of launches, on the position basis nearly one family each, and a hash map per
// family cost more than the rest of the work.
struct FamilyTable
{
    struct Row
    {
        Key key;
        int64_t name;
        int64_t calls;
    };
    struct Fam
    {
        Key key;
        size_t first, count; // rows[first, first + count)
        int64_t total;
    };
    std::vector<Row> rows;
    std::vector<Fam> fams; // by key
    // calls: (family, variant) per call, in any order (sorted here).
    void build(std::vector<std::pair<Key, int64_t>>& calls)
    {
        std::sort(calls.begin(), calls.end());
        for (const auto& [key, name] : calls)
            append(key, name, 1);
    }
    // The calls of several tables summed: their rows (each table's sorted) merged pairwise, so
    // the baseline's table costs a merge per level instead of a sort of every call again.
    void sumOf(const std::vector<const FamilyTable*>& parts)
    {
        std::vector<Row> a, b;
        std::vector<size_t> bounds{0};
        for (const FamilyTable* p : parts) {
            a.insert(a.end(), p->rows.begin(), p->rows.end());
            bounds.push_back(a.size());
        }
        b.resize(a.size());
        auto before = [](const Row& x, const Row& y) {
            return x.key == y.key ? x.name < y.name : x.key < y.key;
        };
        while (bounds.size() > 2) {
            std::vector<size_t> merged{0};
            for (size_t i = 0; i + 1 < bounds.size(); i += 2) {
                const size_t lo = bounds[i], mid = bounds[i + 1];
                const size_t hi = i + 2 < bounds.size() ? bounds[i + 2] : mid;
                std::merge(a.begin() + static_cast<std::ptrdiff_t>(lo),
                           a.begin() + static_cast<std::ptrdiff_t>(mid),
                           a.begin() + static_cast<std::ptrdiff_t>(mid),
                           a.begin() + static_cast<std::ptrdiff_t>(hi),
                           b.begin() + static_cast<std::ptrdiff_t>(lo), before);
                merged.push_back(hi);
            }
            a.swap(b);
            bounds = std::move(merged);
        }
        for (const Row& r : a)
            append(r.key, r.name, r.calls);
    }
    // Adds n calls of variant `name` in family `key`; the additions come in (key, name) order.
    void append(const Key& key, int64_t name, int64_t n)
    {
        if (fams.empty() || !(fams.back().key == key)) fams.push_back({key, rows.size(), 0, 0});
        Fam& f = fams.back();
        if (f.count == 0 || rows.back().name != name) {
            rows.push_back({key, name, 0});
            ++f.count;
        }
        rows.back().calls += n;
        f.total += n;
    }
    const Fam* find(const Key& k) const
    {
        auto it = std::lower_bound(fams.begin(), fams.end(), k,
                                   [](const Fam& f, const Key& v) { return f.key < v; });
        return it != fams.end() && it->key == k ? &*it : nullptr;
    }
    std::span<const Row> variants(const Fam& f) const { return {rows.data() + f.first, f.count}; }
    int64_t calls(const Fam& f, int64_t name) const
    {
        const std::span<const Row> v = variants(f);
        auto it = std::lower_bound(v.begin(), v.end(), name,
                                   [](const Row& r, int64_t n) { return r.name < n; });
        return it != v.end() && it->name == name ? it->calls : 0;
    }
};
using Families = std::array<FamilyTable, kBases>;

// Launches of frame f in start order, with their family keys and name texts.
std::vector<Launch> launchesOf(const Engine::Impl& d, const FrameInfo& f, Names& names)
{
    std::vector<Launch> out;
    for (int64_t device : d.kernelDeviceIds()) {
        // Launches so far per (stream, in a graph): graph and stream launches are counted apart,
        // so a graph that gains a node does not shift the positions of the stream's own launches.
        std::map<std::pair<uint32_t, bool>, int64_t> ordinal;
        const auto launches = d.launchesIn(device, f.start, f.end); // held: the memo may drop it
        for (const store::LaunchRow& k : *launches) {
            Launch l;
            l.start = k.startNs;
            l.device = static_cast<uint32_t>(device);
            l.stream = static_cast<uint32_t>(k.stream.value_or(0));
            l.name = k.name;
            auto [it, added] = names.stemOf.try_emplace(l.name, 0);
            if (added) {
                std::string text = d.text(l.name);
                const std::string stem = kernelNameStem(text);
                auto [si, newStem] =
                    names.stemIds.try_emplace(stem, static_cast<int64_t>(names.stems.size()));
                if (newStem) names.stems.push_back(stem);
                it->second = si->second;
                names.text.emplace(l.name, std::move(text));
            }
            const bool inGraph = k.graphNodeId.has_value();
            l.inGraph = inGraph;
            if (inGraph) l.key[kNode] = nodeKey(l.device, static_cast<int64_t>(*k.graphNodeId));
            l.key[kPosition] =
                positionKey(l.device, l.stream, inGraph, ordinal[{l.stream, inGraph}]++);
            l.key[kStem] = stemKey(l.device, it->second);
            out.push_back(l);
        }
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const Launch& a, const Launch& b) { return a.start < b.start; });
    return out;
}

std::string familyLabel(Basis b, const Key& k, const Names& names)
{
    switch (b) {
    case kNode:
        return fmt::format("graph node {}", k.lo);
    case kPosition:
        return fmt::format("{}launch #{} on stream {}", (k.hi & 1) ? "graph " : "", k.lo,
                           (k.hi >> 1) & 0xffffffffu);
    default:
        return "name stem '" + names.stems[static_cast<size_t>(k.lo)] + "'";
    }
}

// What the allocator did between two launches on a stream: (begin, end].
struct Gap
{
    int64_t largestId = -1;
    int64_t largestTime = 0;
    uint64_t largestSize = 0;
    uint64_t largestAddress = 0;
    int64_t largestRegion = -1;
    int regionsReleased = 0;
    uint64_t oomRequested = 0;
    bool oom = false;
};

Gap gapOf(const Engine::Impl& d, uint32_t device, int64_t begin, int64_t end)
{
    Gap g;
    for (const TrackData& td : d.tracks) {
        if (td.device != device) continue;
        auto it = std::upper_bound(td.allocs.begin(), td.allocs.end(), begin,
                                   [](int64_t t, const Alloc& a) { return t < a.allocNs; });
        for (; it != td.allocs.end() && it->allocNs <= end; ++it)
            if (it->size > g.largestSize) {
                g.largestSize = it->size;
                g.largestId = it->id;
                g.largestTime = it->allocNs;
                g.largestAddress = it->address;
                g.largestRegion = it->region == kNoRegion ? -1 : td.regions[it->region].id;
            }
        // Released in (begin, end]: a range of the regions in release order.
        auto releasedBy = [&](int64_t t) {
            return std::upper_bound(
                td.regionsByEnd.begin(), td.regionsByEnd.end(), t,
                [&](int64_t v, uint32_t r) { return v < td.regions[r].destroyNs; });
        };
        g.regionsReleased += static_cast<int>(releasedBy(end) - releasedBy(begin));
    }
    // The device's OOMs in (begin, end] and the largest request among them.
    std::lock_guard lock(d.dbMutex);
    if (begin < std::numeric_limits<int64_t>::max())
        for (const store::OomRow& o : d.oomsBetween(begin + 1, end))
            if (o.device == static_cast<int64_t>(device)) {
                g.oom = true;
                g.oomRequested = std::max(g.oomRequested, o.requestedBytes.value_or(0));
            }
    return g;
}

// Start of the launch on (device, stream) before time t, or kNoTime.
int64_t previousLaunch(const Engine::Impl& d, uint32_t device, uint32_t stream, int64_t t,
                       int64_t name = -1)
{
    std::lock_guard lock(d.dbMutex);
    if (!d.session) return kNoTime;
    return store::previousKernelStart(*d.session, device, stream, t, name).value_or(kNoTime);
}

PrecedingAllocation precedingAllocation(const Engine::Impl& d, const std::vector<Launch>& ls,
                                        size_t first, int64_t usual, int64_t frameStart)
{
    PrecedingAllocation p;
    const Launch& l = ls[first];
    int64_t begin = frameStart - 1;
    for (size_t i = first; i-- > 0;)
        if (ls[i].device == l.device && ls[i].stream == l.stream) {
            begin = ls[i].start;
            break;
        }
    const Gap now = gapOf(d, l.device, begin, l.start);
    Gap before;
    if (usual >= 0) {
        const int64_t u = previousLaunch(d, l.device, l.stream, l.start, usual);
        if (u != kNoTime) {
            const int64_t ub = previousLaunch(d, l.device, l.stream, u);
            before = gapOf(d, l.device, ub == kNoTime ? u - 1 : ub, u);
        }
    }
    p.allocationId = now.largestId;
    p.time = now.largestTime;
    p.address = now.largestAddress;
    p.size = now.largestSize;
    p.usualSize = before.largestSize;
    p.usualAddress = before.largestAddress;
    p.regionsReleased = now.regionsReleased;
    p.oomRequested = now.oomRequested;
    const std::string released =
        now.regionsReleased > 0
            ? fmt::format(" after the allocator released {} cached segment{}", now.regionsReleased,
                          now.regionsReleased == 1 ? "" : "s")
            : std::string();
    if (now.oom) {
        p.change = RequestChange::Failed;
        p.description = fmt::format("a request of {} failed (out of memory){}",
                                    humanBytes(now.oomRequested), released);
    } else if (now.largestId >= 0 && before.largestId >= 0 &&
               now.largestSize < before.largestSize) {
        p.change = RequestChange::Shrank;
        p.description =
            fmt::format("the largest request before it shrank from {} to {}{}",
                        humanBytes(before.largestSize), humanBytes(now.largestSize), released);
    } else if (now.largestId >= 0 && before.largestId >= 0 &&
               (now.largestRegion != before.largestRegion ||
                now.largestAddress != before.largestAddress)) {
        p.change = RequestChange::Moved;
        p.description =
            fmt::format("the largest request before it ({}) landed at {:#x}, not {:#x}",
                        humanBytes(now.largestSize), now.largestAddress, before.largestAddress);
    }
    return p;
}

std::string percent(double share)
{
    return fmt::format("{:.1f} %", 100 * share);
}

} // namespace

std::string kernelNameStem(const std::string& name)
{
    std::string base = name.substr(0, name.find_first_of("<("));
    for (const char* sep : {"::", " "}) {
        const auto p = base.rfind(sep);
        if (p != std::string::npos) base = base.substr(p + std::string(sep).size());
    }
    std::string out;
    int words = 0;
    for (size_t i = 0; i < base.size() && words < 2;) {
        const size_t j = std::min(base.find('_', i), base.size());
        if (j > i) {
            if (!out.empty()) out += '_';
            out += base.substr(i, j - i);
            ++words;
        }
        i = j + 1;
    }
    for (char& c : out)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out.empty() ? name : out;
}

std::vector<Precursor> kernelShifts(const Engine::Impl& d, const FrameInfo& f,
                                    const std::vector<const FrameInfo*>& baseline)
{
    if (baseline.empty()) return {}; // nothing to compare the variants against
    Names names;
    // The baseline: calls per variant and family, summed and per frame (for novelty and the
    // departures); launches kept for the requests before them.
    Families base;
    std::vector<Families> perFrame(baseline.size());
    std::vector<std::vector<Launch>> baseLaunches(baseline.size());
    std::unordered_map<int64_t, std::pair<int64_t, int64_t>> graphUse; // name -> (in, out)
    std::array<std::vector<std::pair<Key, int64_t>>, kBases> frameCalls;
    for (size_t h = 0; h < baseline.size(); ++h) {
        baseLaunches[h] = launchesOf(d, *baseline[h], names);
        for (const Launch& l : baseLaunches[h]) {
            auto& use = graphUse[l.name];
            (l.inGraph ? use.first : use.second) += 1;
            for (size_t b = 0; b < kBases; ++b)
                if (l.key[b]) frameCalls[b].emplace_back(l.key[b], l.name);
        }
        for (size_t b = 0; b < kBases; ++b) {
            perFrame[h][b].build(frameCalls[b]);
            frameCalls[b].clear();
        }
    }
    for (size_t b = 0; b < kBases; ++b) {
        std::vector<const FamilyTable*> parts;
        for (const Families& pf : perFrame)
            parts.push_back(&pf[b]);
        base[b].sumOf(parts);
    }

    // Frame f: each launch joins its most specific family the baseline knows.
    const std::vector<Launch> ls = launchesOf(d, f, names);
    struct FamilyNow
    {
        Family calls;
        std::unordered_map<int64_t, size_t> first; // variant -> index of its first launch
    };
    std::map<std::pair<int, Key>, FamilyNow> now;
    for (size_t i = 0; i < ls.size(); ++i) {
        int basis = kStem;
        // A kernel the healthy frames ran inside graphs, launched here outside one (eagerly):
        // its position among the stream's other launches means nothing, its name stem does.
        auto use = graphUse.find(ls[i].name);
        const bool leftGraph =
            !ls[i].inGraph && use != graphUse.end() && use->second.first > use->second.second;
        for (int b = kNode; b < kStem && !leftGraph; ++b)
            if (ls[i].key[static_cast<size_t>(b)] &&
                base[static_cast<size_t>(b)].find(ls[i].key[static_cast<size_t>(b)])) {
                basis = b;
                break;
            }
        FamilyNow& fn = now[{basis, ls[i].key[static_cast<size_t>(basis)]}];
        fn.calls.add(ls[i].name);
        fn.first.try_emplace(ls[i].name, i);
    }

    // One row per (basis, usual variant, new variant), summed over its families.
    struct Group
    {
        std::vector<Key> keys;
        int64_t callsAfter = 0, totalAfter = 0, callsBefore = 0, totalBefore = 0;
        size_t first = 0;
    };
    std::map<std::tuple<int, int64_t, int64_t>, Group> groups;
    for (const auto& [fk, fn] : now) {
        const auto b = static_cast<size_t>(fk.first);
        const FamilyTable::Fam* before = base[b].find(fk.second);
        int64_t usual = -1, usualCalls = 0;
        if (before)
            for (const FamilyTable::Row& r : base[b].variants(*before))
                if (r.calls > usualCalls || (r.calls == usualCalls && r.name < usual)) {
                    usual = r.name;
                    usualCalls = r.calls;
                }
        for (const auto& [variant, n] : fn.calls.byName) {
            if (variant == usual) continue; // more of the usual variant is no shift
            const double after = static_cast<double>(n) / static_cast<double>(fn.calls.total);
            const double was = before ? static_cast<double>(base[b].calls(*before, variant)) /
                                            static_cast<double>(before->total)
                                      : 0.0;
            if (after <= was) continue;
            Group& g = groups[{fk.first, usual, variant}];
            const size_t first = fn.first.at(variant);
            if (g.keys.empty() || ls[first].start < ls[g.first].start) g.first = first;
            g.keys.push_back(fk.second);
            g.callsAfter += n;
            g.totalAfter += fn.calls.total;
            if (before) {
                g.callsBefore += base[b].calls(*before, variant);
                g.totalBefore += before->total;
            }
        }
    }

    std::vector<Precursor> out;
    for (const auto& [gk, g] : groups) {
        const auto& [basis, usual, variant] = gk;
        KernelShift s;
        s.basis = kBasisName[basis];
        s.families = static_cast<int>(g.keys.size());
        s.variant = names.text[variant];
        s.usual = usual >= 0 ? names.text[usual] : std::string();
        s.callsAfter = g.callsAfter;
        s.totalAfter = g.totalAfter;
        s.callsBefore = g.callsBefore;
        s.totalBefore = g.totalBefore;
        s.shareAfter = static_cast<double>(g.callsAfter) / static_cast<double>(g.totalAfter);
        s.shareBefore =
            g.totalBefore ? static_cast<double>(g.callsBefore) / static_cast<double>(g.totalBefore)
                          : 0.0;
        s.shareAfterLow = wilsonLower(g.callsAfter, g.totalAfter);
        Evidence ev;
        ev.kernelEffect = std::max(0.0, s.shareAfterLow - s.shareBefore);
        if (ev.kernelEffect <= 0) continue; // within what chance gives on this many calls
        // Novelty: healthy frames in which these families already ran the variant at half the
        // share or more; and the share in each healthy frame, for the departure.
        ev.healthyFrames = static_cast<int64_t>(baseline.size());
        std::vector<double> shares;
        for (const Families& pf : perFrame) {
            int64_t c = 0, n = 0;
            const FamilyTable& table = pf[static_cast<size_t>(basis)];
            for (const Key& k : g.keys) {
                const FamilyTable::Fam* fam = table.find(k);
                if (!fam) continue;
                c += table.calls(*fam, variant);
                n += fam->total;
            }
            if (n == 0) continue;
            shares.push_back(static_cast<double>(c) / static_cast<double>(n));
            if (shares.back() >= s.shareAfter / 2) ++ev.seenInHealthy;
        }
        ev.novelty = ev.healthyFrames ? 1.0 - static_cast<double>(ev.seenInHealthy) /
                                                  static_cast<double>(ev.healthyFrames)
                                      : 1.0;
        const Departure shareDep = departure(s.shareAfter, shares);
        // The family label: one family by name, several by count and their first keys.
        std::vector<Key> keys = g.keys;
        std::sort(keys.begin(), keys.end());
        if (keys.size() == 1) {
            s.family = familyLabel(static_cast<Basis>(basis), keys[0], names);
        } else {
            const char* what[] = {"graph nodes", "launch positions", "name stems"};
            std::string list;
            for (size_t i = 0; i < keys.size() && i < 3; ++i)
                list += (i ? ", " : "") +
                        (basis == kNode ? std::to_string(keys[i].lo)
                                        : familyLabel(static_cast<Basis>(basis), keys[i], names));
            s.family = fmt::format("{} {} ({}{})", keys.size(), what[basis], list,
                                   keys.size() > 3 ? ", ..." : "");
        }
        {
            std::lock_guard lock(d.dbMutex);
            if (auto it = d.kernelFirstStart.find(variant); it != d.kernelFirstStart.end())
                for (const FrameInfo& fr : d.frames)
                    if (fr.start != kNoTime && it->second >= fr.start && it->second < fr.end) {
                        s.firstFrame = fr.index;
                        break;
                    }
        }
        if (s.firstFrame < 0) s.firstFrame = f.index;
        s.preceding = precedingAllocation(d, ls, g.first, usual, f.start);
        // The allocator link: how much smaller the largest request before the first shifted call
        // is than the one before the usual variant's last call, in log2 units, against the same
        // change from one healthy frame to the next before the calls of these families. A
        // library that falls back asks for less, or its request fails; a frame-to-frame change
        // discounts slow trends (a workspace that grows with the context).
        {
            auto lg = [](uint64_t bytes) { return std::log2(1.0 + static_cast<double>(bytes)); };
            // Per healthy frame (in time order): the median over the families' calls of the
            // largest request before each (at most 16 calls, evenly spaced: a frame may hold
            // thousands).
            std::vector<double> sizes;
            for (size_t h = 0; h < baseLaunches.size(); ++h) {
                const std::vector<Launch>& hl = baseLaunches[h];
                std::vector<size_t> calls;
                for (size_t j = 0; j < hl.size(); ++j) {
                    const Key& k = hl[j].key[static_cast<size_t>(basis)];
                    if (k && std::find(g.keys.begin(), g.keys.end(), k) != g.keys.end())
                        calls.push_back(j);
                }
                if (calls.empty()) continue;
                const size_t step = (calls.size() + 15) / 16;
                std::vector<double> before;
                for (size_t c = 0; c < calls.size(); c += step) {
                    const size_t j = calls[c];
                    int64_t gapBegin = baseline[h]->start - 1;
                    for (size_t q = j; q-- > 0;)
                        if (hl[q].device == hl[j].device && hl[q].stream == hl[j].stream) {
                            gapBegin = hl[q].start;
                            break;
                        }
                    before.push_back(lg(gapOf(d, hl[j].device, gapBegin, hl[j].start).largestSize));
                }
                sizes.push_back(median(before));
            }
            std::vector<double> drops;
            for (size_t h = 1; h < sizes.size(); ++h)
                drops.push_back(sizes[h - 1] - sizes[h]);
            const Departure req =
                departure(lg(s.preceding.usualSize) - lg(s.preceding.size), drops);
            s.requestZ = req.z;
            s.requestThreshold = req.threshold;
            ev.allocatorLinked = s.preceding.change == RequestChange::Failed || req.standsOut;
        }
        setDeparture(ev, "variant_share", shareDep);

        Precursor p;
        p.kind = PrecursorKind::KernelVariantShift;
        p.time = ls[g.first].start;
        p.device = ls[g.first].device;
        p.level = Level::Driver;
        p.allocationId = s.preceding.allocationId;
        p.address = s.preceding.address;
        p.size = s.preceding.size;
        p.count = g.callsAfter;
        p.evidence = ev;
        p.description =
            s.usual.empty()
                ? fmt::format("'{}' ran {}x at {}, which the healthy frames never ran", s.variant,
                              s.callsAfter, s.family)
                : fmt::format("'{}' instead of '{}' at {}: {} of calls in frame {} ({}/{}), {} "
                              "in the healthy frames",
                              s.variant, s.usual, s.family, percent(s.shareAfter), f.index,
                              s.callsAfter, s.totalAfter, percent(s.shareBefore));
        if (s.firstFrame != f.index)
            p.description += fmt::format("; first ran in frame {}", s.firstFrame);
        if (s.preceding.change != RequestChange::None)
            p.description += "; " + s.preceding.description;
        p.shift = std::move(s);
        out.push_back(std::move(p));
    }
    return out;
}

} // namespace fs::analysis
