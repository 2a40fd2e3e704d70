// Search (explore.h): by address at an instant, by size range, by stack text or file:line, by
// tag; every match over the run counted, the first ones listed.
#include "explore_impl.h"

#include "core/format.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace fs::analysis {

namespace {

std::string lower(std::string s)
{
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}

std::string trim(const std::string& s)
{
    size_t a = 0, b = s.size();
    while (a < b && std::isspace(static_cast<unsigned char>(s[a])))
        ++a;
    while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1])))
        --b;
    return s.substr(a, b - a);
}

// "4MiB", "4 MiB", "512B", "1.5GiB", "4096": bytes; false when it is not a size at all.
bool parseSize(const std::string& text, uint64_t& out)
{
    const std::string s = trim(text);
    double v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p == s.data() || !std::isfinite(v) || v < 0) return false;
    const std::string unit = lower(trim(std::string(p, s.data() + s.size())));
    double scale = 0;
    if (unit.empty() || unit == "b")
        scale = 1;
    else if (unit == "k" || unit == "kb" || unit == "kib")
        scale = 1024.0;
    else if (unit == "m" || unit == "mb" || unit == "mib")
        scale = 1024.0 * 1024;
    else if (unit == "g" || unit == "gb" || unit == "gib")
        scale = 1024.0 * 1024 * 1024;
    else if (unit == "t" || unit == "tb" || unit == "tib")
        scale = 1024.0 * 1024 * 1024 * 1024;
    else
        throw std::invalid_argument("'" + text + "': unknown size unit '" + unit +
                                    "' (B, KiB, MiB, GiB, TiB)");
    const double b = v * scale;
    if (b > 1.8e19) throw std::invalid_argument("'" + text + "': size out of range");
    out = static_cast<uint64_t>(std::llround(b));
    return true;
}

bool startsWithDigit(const std::string& s)
{
    return !s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '.');
}

} // namespace

std::string SearchQuery::describe() const
{
    switch (kind) {
    case SearchKind::Address:
        return fmt::format("address {:#x}", address);
    case SearchKind::Size:
        if (minSize == maxSize) return "size " + humanBytes(minSize);
        if (maxSize == ~uint64_t{0}) return "size >= " + humanBytes(minSize);
        if (minSize == 0) return "size <= " + humanBytes(maxSize);
        return "size " + humanBytes(minSize) + " to " + humanBytes(maxSize);
    case SearchKind::Tag:
        return "tag containing '" + text + "'";
    case SearchKind::Meta:
        return "user metadata containing '" + text + "'";
    case SearchKind::Text:
        return "stack containing '" + text + "'";
    }
    return {};
}

SearchQuery parseSearch(const std::string& input)
{
    const std::string s = trim(input);
    if (s.empty()) throw std::invalid_argument("empty search");
    SearchQuery q;
    const std::string l = lower(s);
    if (l.starts_with("0x")) {
        uint64_t a = 0;
        auto [p, ec] = std::from_chars(s.data() + 2, s.data() + s.size(), a, 16);
        if (ec != std::errc() || p != s.data() + s.size() || s.size() == 2)
            throw std::invalid_argument("'" + s + "': not a hexadecimal address");
        q.kind = SearchKind::Address;
        q.address = a;
        return q;
    }
    if (l.starts_with("meta:")) {
        q.kind = SearchKind::Meta;
        q.text = trim(s.substr(5));
        if (q.text.empty()) throw std::invalid_argument("meta: needs a text");
        return q;
    }
    if (l.starts_with("tag:")) {
        q.kind = SearchKind::Tag;
        q.text = trim(s.substr(4));
        if (q.text.empty()) throw std::invalid_argument("tag: needs a name");
        return q;
    }
    // Sizes: "A-B", ">=A", ">A", "<=B", "<B", "A".
    for (const char* op : {">=", "<=", ">", "<"}) {
        if (!s.starts_with(op)) continue;
        uint64_t v = 0;
        if (!parseSize(s.substr(std::string(op).size()), v))
            throw std::invalid_argument("'" + s + "': expected a size after " + op);
        q.kind = SearchKind::Size;
        const std::string o = op;
        if (o == ">=") q.minSize = v;
        if (o == ">") q.minSize = v + 1;
        if (o == "<=") q.maxSize = v;
        if (o == "<") {
            if (v == 0) throw std::invalid_argument("'" + s + "': no size is below 0");
            q.maxSize = v - 1;
        }
        return q;
    }
    if (startsWithDigit(s)) {
        const size_t dash = s.find('-', 1);
        uint64_t a = 0, b = 0;
        if (dash != std::string::npos && parseSize(s.substr(0, dash), a) &&
            parseSize(s.substr(dash + 1), b)) {
            q.kind = SearchKind::Size;
            q.minSize = std::min(a, b);
            q.maxSize = std::max(a, b);
            return q;
        }
        // A size, unless it reads as text ("3rd_party.py:12" is a file:line).
        const bool sizeLike = std::all_of(
            s.begin(), s.end(), [](char c) { return std::isalnum(c) || c == '.' || c == ' '; });
        if (dash == std::string::npos && sizeLike && parseSize(s, a)) {
            q.kind = SearchKind::Size;
            q.minSize = q.maxSize = a;
            return q;
        }
    }
    q.kind = SearchKind::Text;
    q.text = s;
    return q;
}

SearchMatcher::SearchMatcher(const SearchQuery& q, const TrackData& td, const TrackAttrs& a,
                             const StackTable& st)
    : q_(q), td_(td), a_(a), st_(st), needle_(lower(q.text))
{
}

bool SearchMatcher::operator()(size_t i)
{
    const Alloc& x = td_.allocs[i];
    switch (q_.kind) {
    case SearchKind::Address:
        return x.address <= q_.address && q_.address < x.end();
    case SearchKind::Size:
        return x.size >= q_.minSize && x.size <= q_.maxSize;
    case SearchKind::Tag: {
        const uint32_t tag = a_.tag[i];
        if (!tag) return false;
        auto [it, inserted] = memo_.try_emplace(tag, false);
        if (inserted) {
            const auto tt = a_.tagText.find(tag);
            it->second =
                tt != a_.tagText.end() && lower(tt->second).find(needle_) != std::string::npos;
        }
        return it->second;
    }
    case SearchKind::Meta: {
        const uint32_t m = i < a_.meta.size() ? a_.meta[i] : 0;
        if (!m) return false;
        auto [it, inserted] = memo_.try_emplace(m, false);
        if (inserted) {
            const auto tt = a_.metaText.find(m);
            it->second =
                tt != a_.metaText.end() && lower(tt->second).find(needle_) != std::string::npos;
        }
        return it->second;
    }
    case SearchKind::Text: {
        const uint32_t s = a_.stack[i];
        if (!s) return false;
        auto [it, inserted] = memo_.try_emplace(s, false);
        if (inserted) {
            const auto tt = st_.text.find(s);
            it->second = tt != st_.text.end() && tt->second.find(needle_) != std::string::npos;
        }
        return it->second;
    }
    }
    return false;
}

SearchResult Explorer::search(uint32_t device, Level level, const std::string& query, int64_t t,
                              std::optional<uint64_t> pool, size_t limit) const
{
    SearchResult out;
    out.query = parseSearch(query);
    const SearchQuery& q = out.query;
    const ExploreContext c = exploreContext(*engine_, data(), device, level, true);
    const Engine::Impl& d = c.d;
    const TrackData& td = c.td;
    const bool ordinal = d.caveats.ordinalTime;
    auto when = [&](int64_t v) {
        return ordinal ? fmt::format("#{}", v)
                       : fmt::format("{:.6f} s", static_cast<double>(v - d.timeBegin) / 1e9);
    };
    if (q.kind == SearchKind::Address) {
        for (uint32_t i : d.liveAt(td, t, t)) {
            const Alloc& a = td.allocs[i];
            if (a.address <= q.address && q.address < a.end() &&
                (!pool || c.pools->ofAlloc(a) == *pool)) {
                out.holder = blockRow(td, i, *c.pools, c.attrs.get(), c.stacks.get());
                out.matches = out.liveMatches = 1;
                out.liveMatchBytes = a.size;
                out.message = fmt::format("{:#x} lies in allocation #{} ({:#x}, {}) at {}",
                                          q.address, a.id, a.address, humanBytes(a.size), when(t));
                return out;
            }
        }
        Replayer r(td);
        r.seek(t);
        for (const Fragment& f : r.state().fragments())
            if (f.address <= q.address && q.address < f.address + f.size &&
                (!pool || c.pools->ofId(f.regionId) == *pool)) {
                BlockRow b;
                b.free = true;
                b.address = f.address;
                b.size = f.size;
                b.regionId = f.regionId;
                b.pool = c.pools->ofId(f.regionId);
                out.holder = b;
                out.message =
                    fmt::format("{:#x} lies in a free fragment ({:#x}, {}) of region "
                                "#{} at {}",
                                q.address, f.address, humanBytes(f.size), f.regionId, when(t));
                return out;
            }
        for (size_t k = 0; k < td.regions.size(); ++k) {
            const RegionRec& rr = td.regions[k];
            if (rr.address <= q.address && q.address < rr.address + rr.size &&
                (!pool || c.pools->byIndex[k] == *pool)) {
                out.region = RegionInfo{rr.id,      device,  level,       rr.kind,
                                        rr.address, rr.size, rr.createNs, rr.destroyNs};
                out.message = fmt::format(
                    "nothing holds {:#x} at {}: region #{} held it from {} to {}", q.address,
                    when(t), rr.id, when(rr.createNs),
                    rr.destroyNs == kAlive ? std::string("the end") : when(rr.destroyNs));
                return out;
            }
        }
        out.message = fmt::format("nothing found: no block, free fragment or region of this track "
                                  "ever held {:#x}",
                                  q.address);
        return out;
    }
    SearchMatcher matches(q, td, *c.attrs, *c.stacks);
    for (size_t i = 0; i < td.allocs.size(); ++i) {
        const Alloc& a = td.allocs[i];
        if (pool && c.pools->ofAlloc(a) != *pool) continue;
        if (!matches(i)) continue;
        ++out.matches;
        if (a.occupies() && a.allocNs <= t && a.freeNs > t) {
            ++out.liveMatches;
            out.liveMatchBytes += a.size;
        }
        if (out.rows.size() < limit)
            out.rows.push_back(blockRow(td, i, *c.pools, c.attrs.get(), c.stacks.get()));
    }
    if (out.matches > 0) {
        out.message = fmt::format("{} allocation{} with {} over the run; {} live at {} ({})",
                                  out.matches, out.matches == 1 ? "" : "s", q.describe(),
                                  out.liveMatches, when(t), humanBytes(out.liveMatchBytes));
    } else if (q.kind == SearchKind::Text && c.stacks->siteOf.empty()) {
        out.message = "nothing found: this session recorded no call stacks";
    } else if (q.kind == SearchKind::Tag && c.attrs->tagText.empty()) {
        out.message = "nothing found: this session recorded no tags";
    } else {
        out.message = "nothing found: no allocation of this track has " + q.describe();
    }
    return out;
}

} // namespace fs::analysis
