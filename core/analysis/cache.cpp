// What the engine keeps in the session file (docs/analysis.md "Caching"): its values and their
// encoding. The store keeps them (core/store/analysis_cache.h: table analysis_cache, one row per
// key, valid only for this engine version and this exact session content, the stamp).
#include "engine_impl.h"

#include "parallel.h"

#include "core/pages.h"

#include "core/store/analysis_cache.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <deque>
#include <functional>
#include <set>

#include <fmt/format.h>

namespace fs::analysis {

namespace {

constexpr const char* kFrameKey = "frames";

struct Writer
{
    std::string out;
    template <typename T> void put(T v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }
};

struct Reader
{
    const char* p;
    const char* end;
    bool ok = true;
    template <typename T> T get()
    {
        T v{};
        if (end - p < static_cast<std::ptrdiff_t>(sizeof v)) {
            ok = false;
            return v;
        }
        std::memcpy(&v, p, sizeof v);
        p += sizeof v;
        return v;
    }
    // n values of T into out; false (nothing read) when the blob is shorter.
    template <typename T> bool array(std::vector<T>& out, uint64_t n)
    {
        if (!ok || n > static_cast<uint64_t>(end - p) / sizeof(T)) return ok = false;
        out.resize(static_cast<size_t>(n));
        if (n) std::memcpy(out.data(), p, static_cast<size_t>(n) * sizeof(T));
        p += n * sizeof(T);
        return true;
    }
};

template <typename T> void putArray(Writer& w, const std::vector<T>& v)
{
    w.put<uint64_t>(v.size());
    w.out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

std::string indexKey(const TrackData& t)
{
    return fmt::format("index:{}:{}", t.device, static_cast<int>(t.level));
}

using store::PutValue;

bool storeCache(const std::string& path, const std::string& stampValue,
                const std::vector<std::pair<std::string, std::string_view>>& rows,
                const std::function<void(const PutValue&)>& more = {})
{
    return store::storeValues(path, stampValue, kEngineVersion, rows, more);
}

bool fetchCache(const Session& s, const std::string& key, const std::string& stampValue,
                std::string& out)
{
    return store::fetchValue(s, key, stampValue, kEngineVersion, out);
}

// The guard's nonce named in a stamp ("...|g<nonce>").
std::string guardIn(const std::string& stampValue)
{
    return stampValue.substr(stampValue.rfind("|g") + 2);
}

void putState(Writer& w, const State& s)
{
    w.put<int64_t>(s.regionCount);
    w.put(s.liveAllocations);
    w.put(s.reservedBytes);
    w.put(s.allocatedBytes);
    w.put(s.allocatedOutsideBytes);
    w.put(s.freeBytes);
    w.put(s.fragmentCount);
    w.put(s.largestFreeFragmentBytes);
    w.put(s.fragmentationRatio);
    w.put(s.fragmentEntropyBits);
    w.put(s.pendingFreeBlocks);
    w.put(s.pendingFreeBytes);
    w.put(s.largestFreeOncePendingCompleteBytes);
    w.put(s.fragmentationRatioOncePendingComplete);
}

void getState(Reader& r, State& s)
{
    s.regionCount = static_cast<int>(r.get<int64_t>());
    s.liveAllocations = r.get<int64_t>();
    s.reservedBytes = r.get<uint64_t>();
    s.allocatedBytes = r.get<uint64_t>();
    s.allocatedOutsideBytes = r.get<uint64_t>();
    s.freeBytes = r.get<uint64_t>();
    s.fragmentCount = r.get<int64_t>();
    s.largestFreeFragmentBytes = r.get<uint64_t>();
    s.fragmentationRatio = r.get<double>();
    s.fragmentEntropyBits = r.get<double>();
    s.pendingFreeBlocks = r.get<int64_t>();
    s.pendingFreeBytes = r.get<uint64_t>();
    s.largestFreeOncePendingCompleteBytes = r.get<uint64_t>();
    s.fragmentationRatioOncePendingComplete = r.get<double>();
}

} // namespace

void Engine::Impl::setCacheStamp(const Session& ses)
{
    cacheStamp.clear();
    const std::string s = store::contentStamp(ses, summary);
    if (s.empty()) return;
    std::string guard = store::readGuard(ses);
    if (guard.empty()) guard = store::installGuard(path);
    if (!guard.empty()) cacheStamp = fmt::format("{}|g{}", s, guard);
}

namespace {

// Allocation records go to the cache in chunks (a blob stays far below SQLite's 1 GB limit).
constexpr size_t kRowChunk = size_t{1} << 20;

std::string rowsKey(const TrackData& t, size_t chunk)
{
    return fmt::format("rows:{}:{}:{}", t.device, static_cast<int>(t.level), chunk);
}

// Allocation records in the cache, each a run of LEB128 varints, most of them differences from
// the previous record of the chunk (sorted by allocation time, so times and ids grow slowly):
//   allocation time, id: zigzag deltas;
//   region: a zigzag delta of region + 1 (0: outside every region);
//   address: in a region, the zigzag offset from the region's start; outside, a zigzag delta
//     from the previous address; both in units of the chunk's address grain;
//   size: in units of the chunk's size grain;
//   lifetime + 1 (0: never freed); tag.
// A grain is the largest power of two that divides every value of the chunk (allocators place
// and size blocks in multiples of 512 bytes or more), its exponent in the chunk's first two
// bytes. 16.5 bytes a record on the 100M-event simulation, against 21.9 as plain deltas and 48
// in memory: fewer bytes to write and read (docs/analysis.md "Caching").
char* putVarint(char* p, uint64_t v) // at most 10 bytes; returns the end
{
    while (v >= 0x80) {
        *p++ = static_cast<char>(v | 0x80);
        v >>= 7;
    }
    *p++ = static_cast<char>(v);
    return p;
}

uint64_t zigzag(int64_t v)
{
    return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}

int64_t unzigzag(uint64_t v)
{
    return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

int64_t diff(uint64_t a, uint64_t b) // a - b, wrapping
{
    return static_cast<int64_t>(a - b);
}

// The exponent of the largest power of two dividing every value OR-ed into bits (0 for none).
uint8_t grainOf(uint64_t bits)
{
    return bits == 0 ? 0 : static_cast<uint8_t>(std::countr_zero(bits));
}

// Reads varints from a blob; ok turns false on a truncated or overlong one.
struct VarintReader
{
    const unsigned char* p;
    const unsigned char* end;
    bool ok = true;
    uint64_t next()
    {
        uint64_t v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (p == end) break;
            const unsigned char c = *p++;
            v |= static_cast<uint64_t>(c & 0x7f) << shift;
            if (!(c & 0x80)) return v;
        }
        ok = false;
        return 0;
    }
};

std::string encodeRows(const Alloc* a, size_t n, const std::vector<RegionRec>& regions)
{
    uint64_t addressBits = 0, sizeBits = 0;
    for (size_t i = 0; i < n; ++i) {
        addressBits |= a[i].address;
        if (a[i].region < regions.size()) addressBits |= regions[a[i].region].address;
        sizeBits |= a[i].size;
    }
    const uint8_t addressGrain = grainOf(addressBits), sizeGrain = grainOf(sizeBits);
    // Written through a pointer into room made ahead (a record's seven varints take at most 70
    // bytes), not a byte at a time through push_back, which was most of the encoding.
    constexpr size_t kMaxRecord = 70;
    std::string out(2 + n * 20 + kMaxRecord, '\0');
    out[0] = static_cast<char>(addressGrain);
    out[1] = static_cast<char>(sizeGrain);
    size_t at = 2;
    Alloc prev{};
    prev.region = kNoRegion;
    for (size_t i = 0; i < n; ++i) {
        if (out.size() - at < kMaxRecord) out.resize(out.size() * 2);
        const Alloc& x = a[i];
        char* p = out.data() + at;
        p = putVarint(
            p, zigzag(diff(static_cast<uint64_t>(x.allocNs), static_cast<uint64_t>(prev.allocNs))));
        p = putVarint(p, zigzag(diff(static_cast<uint64_t>(x.id), static_cast<uint64_t>(prev.id))));
        // region + 1 wraps kNoRegion to 0
        p = putVarint(p, zigzag(diff(uint64_t{x.region + 1u}, uint64_t{prev.region + 1u})));
        const uint64_t from = x.region < regions.size() ? regions[x.region].address : prev.address;
        p = putVarint(p, zigzag(diff(x.address, from) >> addressGrain));
        p = putVarint(p, x.size >> sizeGrain);
        p = putVarint(p, x.freeNs == kAlive ? 0
                                            : static_cast<uint64_t>(x.freeNs) -
                                                  static_cast<uint64_t>(x.allocNs) + 1);
        p = putVarint(p, x.tag);
        at = static_cast<size_t>(p - out.data());
        prev = x;
    }
    out.resize(at);
    return out;
}

// False when the blob does not decode to exactly n records (or names a region not in regions).
bool decodeRows(const std::string& blob, Alloc* out, size_t n,
                const std::vector<RegionRec>& regions)
{
    if (blob.size() < 2) return false;
    const auto addressGrain = static_cast<uint8_t>(blob[0]),
               sizeGrain = static_cast<uint8_t>(blob[1]);
    if (addressGrain > 63 || sizeGrain > 63) return false;
    const auto* begin = reinterpret_cast<const unsigned char*>(blob.data());
    VarintReader r{begin + 2, begin + blob.size()};
    Alloc prev{};
    prev.region = kNoRegion;
    for (size_t i = 0; i < n && r.ok; ++i) {
        Alloc x{};
        x.allocNs = static_cast<int64_t>(static_cast<uint64_t>(prev.allocNs) +
                                         static_cast<uint64_t>(unzigzag(r.next())));
        x.id = static_cast<int64_t>(static_cast<uint64_t>(prev.id) +
                                    static_cast<uint64_t>(unzigzag(r.next())));
        const uint64_t region =
            uint64_t{prev.region + 1u} + static_cast<uint64_t>(unzigzag(r.next()));
        if (region > regions.size()) return false;
        x.region = region == 0 ? kNoRegion : static_cast<uint32_t>(region - 1);
        const uint64_t from = region == 0 ? prev.address : regions[x.region].address;
        x.address = from + (static_cast<uint64_t>(unzigzag(r.next())) << addressGrain);
        x.size = r.next() << sizeGrain;
        const uint64_t life = r.next();
        x.freeNs =
            life == 0 ? kAlive : static_cast<int64_t>(static_cast<uint64_t>(x.allocNs) + life - 1);
        const uint64_t tag = r.next();
        if (tag > kTagById) return false;
        x.tag = static_cast<uint32_t>(tag);
        out[i] = x;
        prev = x;
    }
    return r.ok && r.p == r.end;
}

// Indices that mostly grow by a little (the freed blocks in free order: 1 byte each instead
// of 4), as zigzag varint deltas.
void putDeltas(Writer& w, const std::vector<uint32_t>& v)
{
    w.put<uint64_t>(v.size());
    const size_t at = w.out.size();
    w.out.resize(at + v.size() * 5);
    char* p = w.out.data() + at;
    uint32_t prev = 0;
    for (uint32_t x : v) {
        p = putVarint(p, zigzag(int64_t{x} - int64_t{prev}));
        prev = x;
    }
    w.out.resize(static_cast<size_t>(p - w.out.data()));
}

bool getDeltas(Reader& r, std::vector<uint32_t>& out)
{
    const uint64_t n = r.get<uint64_t>();
    if (!r.ok || n > static_cast<uint64_t>(r.end - r.p)) return r.ok = false; // 1 byte at least
    out.resize(static_cast<size_t>(n));
    VarintReader v{reinterpret_cast<const unsigned char*>(r.p),
                   reinterpret_cast<const unsigned char*>(r.end)};
    int64_t prev = 0;
    for (uint32_t& x : out) {
        prev += unzigzag(v.next());
        if (prev < 0 || prev > std::numeric_limits<uint32_t>::max()) v.ok = false;
        x = static_cast<uint32_t>(prev);
    }
    r.p = reinterpret_cast<const char*>(v.p);
    return r.ok = v.ok;
}

} // namespace

bool Engine::Impl::prepareDeferred(const Session& db,
                                   const std::function<size_t(uint32_t, int)>& trackFor)
{
    std::string blob;
    if (!fetchCache(db, "tracks", cacheStamp, blob)) return false;
    Reader r{blob.data(), blob.data() + blob.size()};
    const uint64_t n = r.get<uint64_t>();
    if (!r.ok || n > blob.size()) return false;
    std::vector<std::pair<size_t, uint64_t>> counts;
    for (uint64_t k = 0; k < n; ++k) {
        const uint32_t device = r.get<uint32_t>();
        const int32_t level = r.get<int32_t>();
        const uint64_t allocs = r.get<uint64_t>(), regs = r.get<uint64_t>();
        if (!r.ok || level < 0 || level >= kLevelCount) return false;
        counts.emplace_back(trackFor(device, level), allocs);
        if (tracks[counts.back().first].regions.size() != regs) return false;
    }
    if (!r.ok || r.p != r.end || counts.size() != tracks.size()) return false;
    // Every value a deferred load needs must be there under the same stamp.
    const std::set<std::string> keys = store::storedKeys(db, cacheStamp, kEngineVersion);
    for (const auto& [ti, allocs] : counts) {
        TrackData& t = tracks[ti];
        t.storedAllocs = allocs;
        if (!keys.count(indexKey(t))) return false;
        for (size_t c = 0; c * kRowChunk < allocs; ++c)
            if (!keys.count(rowsKey(t, c))) return false;
    }
    // The regions were read after the guard: still the same guard, still the same content.
    return store::readGuard(db) == guardIn(cacheStamp);
}

bool Engine::Impl::readStoredRows(const Session& db, TrackData& t)
{
    const size_t n = t.storedAllocs;
    const size_t threads = parallelChunks(n, options.parallelFrom);
    AllocRecords allocs;
    allocs.reserve(n);
    if (threads > 1) // the kernel clears each page: the threads share it
        forEachChunk(n, threads, [&](size_t, size_t begin, size_t end) {
            mapPages(allocs.data() + begin, (end - begin) * sizeof(Alloc));
        });
    allocs.resize(n);
    // The blobs are read one at a time (one connection), a group of them decoded at once.
    const size_t chunks = (n + kRowChunk - 1) / kRowChunk;
    std::vector<std::string> blobs(std::min(threads, std::max<size_t>(chunks, 1)));
    for (size_t c = 0; c < chunks; c += blobs.size()) {
        const size_t group = std::min(blobs.size(), chunks - c);
        for (size_t k = 0; k < group; ++k)
            if (!fetchCache(db, rowsKey(t, c + k), cacheStamp, blobs[k])) return false;
        std::vector<char> decoded(group, 0);
        forEachChunk(group, group, [&](size_t, size_t k, size_t) {
            const size_t first = (c + k) * kRowChunk;
            decoded[k] = decodeRows(blobs[k], allocs.data() + first, std::min(kRowChunk, n - first),
                                    t.regions);
        });
        if (std::find(decoded.begin(), decoded.end(), 0) != decoded.end()) return false;
    }
    // The records must be what a load from the rows gives: sorted, in range.
    const auto nR = static_cast<uint32_t>(t.regions.size());
    std::vector<char> valid(threads, 1);
    forEachChunk(n, threads, [&](size_t part, size_t begin, size_t end) {
        for (size_t i = begin; i < end && valid[part]; ++i) {
            const Alloc& a = allocs[i];
            if (a.freeNs < a.allocNs || a.address + a.size < a.address ||
                (a.region != kNoRegion && a.region >= nR) ||
                (i > 0 && (allocs[i - 1].allocNs > a.allocNs ||
                           (allocs[i - 1].allocNs == a.allocNs && allocs[i - 1].id >= a.id))))
                valid[part] = 0;
        }
    });
    if (std::find(valid.begin(), valid.end(), 0) != valid.end()) return false;
    t.allocs = std::move(allocs);
    return readIndex(db, t);
}

void Engine::Impl::loadDeferredRows()
{
    // A connection of its own: lookups keep theirs meanwhile. The stored values carry the stamp
    // the engine opened with, so records and index describe the content it opened even if the
    // file changed since.
    Session db = Session::openUnchecked(path);
    db.beginRead();
    bool stored = true;
    for (TrackData& t : tracks)
        if (!(stored = readStoredRows(db, t))) break;
    if (!stored) {
        // Missing or malformed stored values. While the guard of the stamp is still there, the
        // rows are those the engine opened: read and index them again. Otherwise the file was
        // changed since it was opened, and nothing here matches the rest of the engine.
        if (store::readGuard(db) != guardIn(cacheStamp))
            throw SessionError(path, "changed by another program since it was opened (the "
                                     "stored analysis index no longer matches); open it again");
        std::map<std::pair<uint32_t, int>, size_t> index;
        for (size_t ti = 0; ti < tracks.size(); ++ti) {
            TrackData& t = tracks[ti];
            t.allocs.clear();
            index[{t.device, static_cast<int>(t.level)}] = ti;
        }
        const int64_t rows = readAllocations(
            db,
            [&](uint32_t device, int level) -> size_t {
                auto it = index.find({device, level});
                if (it == index.end())
                    throw SessionError(path, "allocations: a track the stored index does not "
                                             "list; open the file again");
                return it->second;
            },
            nullptr, 1);
        for (TrackData& t : tracks)
            indexTrack(t);
        deferredRowsRead.store(std::max<int64_t>(rows, 1));
    }
    db.commitRead();
    if (!stored) writeIndex();
}

void Engine::Impl::ensureRows() const
{
    if (!rowsReady.load(std::memory_order_acquire)) {
        std::lock_guard lock(rowsMutex);
        if (!rowsReady.load(std::memory_order_relaxed)) {
            try {
                const_cast<Impl*>(this)->loadDeferredRows();
            } catch (...) {
                rowsError = std::current_exception();
            }
            rowsReady.store(true, std::memory_order_release);
        }
    }
    if (rowsError) std::rethrow_exception(rowsError);
}

bool Engine::Impl::readIndex(const Session& db, TrackData& t)
{
    std::string blob;
    if (!fetchCache(db, indexKey(t), cacheStamp, blob)) return false;
    sortAllocs(t); // the stored positions index the sorted stream
    Reader r{blob.data(), blob.data() + blob.size()};
    const size_t nA = t.allocs.size(), nR = t.regions.size();
    if (r.get<uint64_t>() != nA || r.get<uint64_t>() != nR) return false;
    std::vector<uint32_t> byFree, byEnd;
    if (!getDeltas(r, byFree) || !r.array(byEnd, r.get<uint64_t>())) return false;
    // byFree must hold each freed block once (indexTrack's permutation of them). Checked with a
    // bit per block, then one pass over the records in order: a look at each block's record
    // through byFree is a cache miss per block (3 s of a 100 M-event report).
    std::vector<uint64_t> listed((nA + 63) / 64);
    for (uint32_t i : byFree) {
        if (i >= nA) return false;
        uint64_t& word = listed[i >> 6];
        const uint64_t bit = uint64_t{1} << (i & 63);
        if (word & bit) return false;
        word |= bit;
    }
    for (size_t i = 0; i < nA; ++i)
        if ((t.allocs[i].freeNs != kAlive) != ((listed[i >> 6] >> (i & 63)) & 1)) return false;
    for (uint32_t i : byEnd)
        if (i >= nR || t.regions[i].destroyNs == kAlive) return false;
    const uint64_t nc = r.get<uint64_t>();
    if (!r.ok || nc == 0 || nc > blob.size()) return false;
    std::vector<Checkpoint> cps(static_cast<size_t>(nc));
    for (Checkpoint& c : cps) {
        c.time = r.get<int64_t>();
        c.allocPos = r.get<uint64_t>();
        c.freePos = r.get<uint64_t>();
        c.regionPos = r.get<uint64_t>();
        c.regionEndPos = r.get<uint64_t>();
        if (!r.array(c.live, r.get<uint64_t>()) || c.allocPos > nA || c.freePos > byFree.size() ||
            c.regionPos > nR || c.regionEndPos > byEnd.size())
            return false;
        for (uint32_t i : c.live)
            if (i >= nA) return false;
    }
    if (!r.ok || r.p != r.end) return false;
    t.byFree = std::move(byFree);
    t.regionsByEnd = std::move(byEnd);
    t.checkpoints = std::move(cps);
    return true;
}

namespace {

std::string lodBlob(int nt, int ny, const std::vector<double>& occ, const std::vector<double>& reg)
{
    Writer w;
    w.put<int32_t>(nt);
    w.put<int32_t>(ny);
    for (const auto* v : {&occ, &reg}) {
        const std::vector<float> f(v->begin(), v->end());
        w.out.append(reinterpret_cast<const char*>(f.data()), f.size() * sizeof(float));
    }
    return std::move(w.out);
}

} // namespace

// The grid open() built for LoadOptions::preview (lodOf stores the ones it builds), as rows to
// store; lodsToStore is emptied.
void Engine::Impl::takeGrids(std::vector<std::pair<std::string, std::string_view>>& rows,
                             std::deque<std::string>& blobs)
{
    std::lock_guard lock(lodMutex);
    for (const LodCells& c : lodsToStore) {
        const Lod frame = lodFrame(tracks[c.track]);
        blobs.push_back(lodBlob(frame.nt, frame.ny, c.occ, c.reg));
        rows.emplace_back(lodKey(tracks[c.track]), blobs.back());
    }
    lodsToStore.clear();
}

bool Engine::Impl::writeGrids()
{
    std::vector<std::pair<std::string, std::string_view>> rows;
    std::deque<std::string> blobs;
    takeGrids(rows, blobs);
    return !rows.empty() && storeCache(path, cacheStamp, rows);
}

bool Engine::Impl::writeIndex()
{
    std::vector<std::pair<std::string, std::string_view>> rows;
    std::deque<std::string> blobs; // owns the values the views in rows point into
    Writer list;
    list.put<uint64_t>(tracks.size());
    for (const TrackData& t : tracks) {
        list.put<uint32_t>(t.device);
        list.put<int32_t>(static_cast<int32_t>(t.level));
        list.put<uint64_t>(t.allocs.size());
        list.put<uint64_t>(t.regions.size());
        Writer w;
        w.put<uint64_t>(t.allocs.size());
        w.put<uint64_t>(t.regions.size());
        putDeltas(w, t.byFree);
        putArray(w, t.regionsByEnd);
        w.put<uint64_t>(t.checkpoints.size());
        for (const Checkpoint& c : t.checkpoints) {
            w.put(c.time);
            w.put<uint64_t>(c.allocPos);
            w.put<uint64_t>(c.freePos);
            w.put<uint64_t>(c.regionPos);
            w.put<uint64_t>(c.regionEndPos);
            putArray(w, c.live);
        }
        blobs.push_back(std::move(w.out));
        rows.emplace_back(indexKey(t), blobs.back());
    }
    blobs.push_back(std::move(list.out));
    rows.emplace_back("tracks", blobs.back());
    takeGrids(rows, blobs);
    // The sorted records themselves, so that a reopen reads no allocation row: encoded and
    // written a chunk at a time.
    return storeCache(path, cacheStamp, rows, [&](const PutValue& put) {
        for (const TrackData& t : tracks)
            for (size_t c = 0; c * kRowChunk < t.allocs.size(); ++c) {
                const size_t first = c * kRowChunk;
                const size_t count = std::min(kRowChunk, t.allocs.size() - first);
                put(rowsKey(t, c), encodeRows(&t.allocs[first], count, t.regions));
            }
    });
}

bool Engine::Impl::readTimelineCache(const std::string& key, Timeline& tl) const
{
    std::lock_guard lock(dbMutex);
    if (cacheStamp.empty() || !session) return false;
    std::string blob;
    if (!fetchCache(*session, key, cacheStamp, blob)) return false;
    Reader r{blob.data(), blob.data() + blob.size()};
    const uint64_t n = r.get<uint64_t>();
    tl.step = r.get<int64_t>();
    tl.eventsReplayed = r.get<int64_t>();
    if (!r.array(tl.time, n)) return false;
    for (auto* v :
         {&tl.reserved, &tl.allocated, &tl.allocatedOutside, &tl.freeInRegions, &tl.fragmentCount,
          &tl.largestFragment, &tl.fragmentationRatio, &tl.eventEntropy, &tl.fragmentEntropy})
        if (!r.array(*v, n)) return false;
    return r.ok && r.p == r.end;
}

void Engine::Impl::writeTimelineCache(const std::string& key, const Timeline& tl) const
{
    Writer w;
    w.put<uint64_t>(tl.time.size());
    w.put(tl.step);
    w.put(tl.eventsReplayed);
    w.out.append(reinterpret_cast<const char*>(tl.time.data()), tl.time.size() * sizeof(int64_t));
    for (const auto* v :
         {&tl.reserved, &tl.allocated, &tl.allocatedOutside, &tl.freeInRegions, &tl.fragmentCount,
          &tl.largestFragment, &tl.fragmentationRatio, &tl.eventEntropy, &tl.fragmentEntropy})
        w.out.append(reinterpret_cast<const char*>(v->data()), v->size() * sizeof(double));
    std::lock_guard lock(dbMutex);
    storeCache(path, cacheStamp, {{key, w.out}});
}

namespace {

std::string summaryKey(uint32_t device, Level level)
{
    return fmt::format("summary:{}:{}", device, static_cast<int>(level));
}

// Every field of the figures, in their stored order (reading and writing walk the same list).
template <typename F> void eachField(SummaryFigures& f, F&& fn)
{
    fn(f.peakReservedBytes);
    fn(f.peakReservedAtNs);
    fn(f.peakAllocatedBytes);
    fn(f.peakAllocatedAtNs);
    fn(f.peakAllocatedOutsideBytes);
    fn(f.peakAllocatedOutsideAtNs);
    fn(f.meanFragmentationRatio);
    fn(f.maxFragmentationRatio);
    fn(f.maxFragmentationRatioAtNs);
    fn(f.minLargestFreeBytes);
    fn(f.minLargestFreeAtNs);
    fn(f.maxFragmentCount);
    fn(f.maxFragmentCountAtNs);
    fn(f.finalReservedBytes);
    fn(f.instants);
    fn(f.countedInstants);
    fn(f.reservedNs);
}

} // namespace

void Engine::Impl::forgetDerived() const
{
    {
        std::lock_guard lock(rolesMutex);
        roles.clear();
    }
    {
        std::lock_guard lock(launchesMutex);
        launches.clear();
        launchRows = 0;
    }
    {
        std::lock_guard lock(replayersMutex);
        idleReplayers.clear();
    }
    {
        std::lock_guard lock(runFiguresMutex);
        runFiguresKey.clear();
        runFigures.reset();
    }
    std::lock_guard lock(summariesMutex);
    summaries.clear();
}

bool Engine::Impl::readSummaryCache(uint32_t device, Level level, TrackSummary& out) const
{
    {
        std::lock_guard lock(summariesMutex);
        if (auto it = summaries.find({device, static_cast<int>(level)}); it != summaries.end()) {
            out.figures = it->second.figures;
            out.pools = it->second.pools;
            return true;
        }
    }
    std::string blob;
    {
        std::lock_guard lock(dbMutex);
        if (cacheStamp.empty() || !session) return false;
        if (!fetchCache(*session, summaryKey(device, level), cacheStamp, blob)) return false;
    }
    Reader r{blob.data(), blob.data() + blob.size()};
    auto read = [&](SummaryFigures& f) {
        eachField(f, [&](auto& v) { v = r.get<std::decay_t<decltype(v)>>(); });
    };
    TrackSummary s;
    read(s.figures);
    const uint64_t pools = r.get<uint64_t>();
    for (uint64_t i = 0; r.ok && i < pools && r.p < r.end; ++i) {
        PoolSummary& p = s.pools.emplace_back();
        p.pool = r.get<uint64_t>();
        read(p.figures);
    }
    if (!r.ok || r.p != r.end || s.pools.size() != pools) return false;
    out.figures = s.figures;
    out.pools = s.pools;
    std::lock_guard lock(summariesMutex);
    summaries.emplace(std::make_pair(device, static_cast<int>(level)), std::move(s));
    return true;
}

void Engine::Impl::writeSummaryCache(uint32_t device, Level level, const TrackSummary& s) const
{
    std::lock_guard lock(dbMutex);
    writeSummaryCacheLocked(device, level, s);
}

void Engine::Impl::writeSummaryCacheLocked(uint32_t device, Level level,
                                           const TrackSummary& s) const
{
    {
        std::lock_guard lock(summariesMutex);
        summaries[{device, static_cast<int>(level)}] = s;
    }
    Writer w;
    auto write = [&](SummaryFigures f) { eachField(f, [&](const auto& v) { w.put(v); }); };
    write(s.figures);
    w.put<uint64_t>(s.pools.size());
    for (const PoolSummary& p : s.pools) {
        w.put<uint64_t>(p.pool);
        write(p.figures);
    }
    if (!cacheStamp.empty()) storeCache(path, cacheStamp, {{summaryKey(device, level), w.out}});
}

namespace {
std::string rasterKey(uint32_t device, Level level)
{
    return fmt::format("heatmap:{}:{}", device, static_cast<int>(level));
}
} // namespace

bool Engine::Impl::readRasterCache(HeatmapRaster& h, uint32_t device, Level level) const
{
    std::lock_guard lock(dbMutex);
    if (cacheStamp.empty() || !session) return false;
    std::string blob;
    if (!fetchCache(*session, rasterKey(device, level), cacheStamp, blob)) return false;
    Reader r{blob.data(), blob.data() + blob.size()};
    // The request as resolved (window and size) must be the same, value for value.
    if (r.get<int32_t>() != h.width || r.get<int32_t>() != h.height || r.get<int64_t>() != h.t0 ||
        r.get<int64_t>() != h.t1 || r.get<uint64_t>() != h.y0 || r.get<uint64_t>() != h.y1)
        return false;
    const int64_t inView = r.get<int64_t>();
    const auto n = static_cast<uint64_t>(h.width) * static_cast<uint64_t>(h.height);
    std::vector<float> occ, reg;
    std::vector<uint8_t> st;
    if (!r.array(occ, n) || !r.array(reg, n) || !r.array(st, n) || r.p != r.end) return false;
    h.state.resize(st.size());
    for (size_t k = 0; k < st.size(); ++k) {
        if (st[k] > static_cast<uint8_t>(CellState::Pending)) return false;
        h.state[k] = static_cast<CellState>(st[k]);
    }
    h.occupancy = std::move(occ);
    h.reservedFraction = std::move(reg);
    h.allocationsInView = inView;
    return true;
}

void Engine::Impl::writeRasterCache(const HeatmapRaster& h, uint32_t device, Level level) const
{
    Writer w;
    w.put<int32_t>(h.width);
    w.put<int32_t>(h.height);
    w.put(h.t0);
    w.put(h.t1);
    w.put(h.y0);
    w.put(h.y1);
    w.put(h.allocationsInView);
    w.out.append(reinterpret_cast<const char*>(h.occupancy.data()),
                 h.occupancy.size() * sizeof(float));
    w.out.append(reinterpret_cast<const char*>(h.reservedFraction.data()),
                 h.reservedFraction.size() * sizeof(float));
    for (CellState c : h.state)
        w.put<uint8_t>(static_cast<uint8_t>(c));
    std::lock_guard lock(dbMutex);
    storeCache(path, cacheStamp, {{rasterKey(device, level), w.out}});
}

// Devices that ran kernels and each kernel name's first start at or after firstStart (the first
// frame's start, part of the key).
bool Engine::Impl::readKernelIndexCache(int64_t firstStart) const
{
    if (cacheStamp.empty() || !session) return false;
    std::string blob;
    if (!fetchCache(*session, fmt::format("kernels:{}", firstStart), cacheStamp, blob))
        return false;
    Reader r{blob.data(), blob.data() + blob.size()};
    std::vector<int64_t> devices, names, starts;
    if (!r.array(devices, r.get<uint64_t>())) return false;
    const uint64_t n = r.get<uint64_t>();
    if (!r.array(names, n) || !r.array(starts, n) || r.p != r.end) return false;
    kernelDevices = std::move(devices);
    kernelFirstStart.clear();
    for (size_t i = 0; i < names.size(); ++i)
        kernelFirstStart.emplace(names[i], starts[i]);
    return true;
}

void Engine::Impl::writeKernelIndexCache(int64_t firstStart) const
{
    if (cacheStamp.empty()) return;
    std::vector<int64_t> names, starts;
    for (const auto& [name, start] : kernelFirstStart) {
        names.push_back(name);
        starts.push_back(start);
    }
    Writer w;
    putArray(w, kernelDevices);
    w.put<uint64_t>(names.size());
    w.out.append(reinterpret_cast<const char*>(names.data()), names.size() * sizeof(int64_t));
    w.out.append(reinterpret_cast<const char*>(starts.data()), starts.size() * sizeof(int64_t));
    storeCache(path, cacheStamp, {{fmt::format("kernels:{}", firstStart), std::move(w.out)}});
}

std::string lodKey(const TrackData& t)
{
    return fmt::format("lod:{}:{}", t.device, static_cast<int>(t.level));
}

void Engine::Impl::readStoredLods(const Session& s)
{
    std::lock_guard lock(lodMutex);
    storedLods = store::storedKeys(s, cacheStamp, kEngineVersion, "lod:");
}

bool Engine::Impl::readLodCache(const TrackData& t, int nt, int ny, std::vector<double>& occ,
                                std::vector<double>& reg) const
{
    std::lock_guard lock(dbMutex);
    if (cacheStamp.empty() || !session) return false;
    std::string blob;
    if (!fetchCache(*session, lodKey(t), cacheStamp, blob)) return false;
    Reader r{blob.data(), blob.data() + blob.size()};
    if (r.get<int32_t>() != nt || r.get<int32_t>() != ny) return false;
    const auto cells = static_cast<uint64_t>(nt) * static_cast<uint64_t>(ny);
    std::vector<float> o, g;
    if (!r.array(o, cells) || !r.array(g, cells) || r.p != r.end) return false;
    occ.assign(o.begin(), o.end());
    reg.assign(g.begin(), g.end());
    return true;
}

void Engine::Impl::writeLodCache(const TrackData& t, int nt, int ny, const std::vector<double>& occ,
                                 const std::vector<double>& reg) const
{
    const std::string blob = lodBlob(nt, ny, occ, reg);
    std::lock_guard lock(dbMutex);
    storeCache(path, cacheStamp, {{lodKey(t), blob}});
}

bool Engine::Impl::readFrameCache(const Session& db, const std::vector<size_t>& timed)
{
    std::string blob;
    if (!fetchCache(db, kFrameKey, cacheStamp, blob) || blob.empty()) return false;
    Reader r{blob.data(), blob.data() + blob.size()};
    if (r.get<uint64_t>() != timed.size() || r.get<uint64_t>() != tracks.size()) return false;
    std::vector<FrameInfo> copy = frames;
    for (size_t fi : timed) {
        FrameInfo& f = copy[fi];
        if (r.get<int64_t>() != f.index) return false;
        f.kernels = r.get<int64_t>();
        f.distinctKernels = r.get<int64_t>();
        f.newKernelVariants = r.get<int64_t>();
        f.allocator.clear();
        for (const TrackData& td : tracks) {
            FrameAllocator fa;
            fa.device = td.device;
            fa.level = td.level;
            if (r.get<uint32_t>() != td.device ||
                r.get<uint32_t>() != static_cast<uint32_t>(td.level))
                return false;
            getState(r, fa.atEnd);
            fa.atEnd.device = td.device;
            fa.atEnd.level = td.level;
            fa.atEnd.time = f.end;
            fa.minLargestFragment = r.get<uint64_t>();
            fa.maxLargestFragment = r.get<uint64_t>();
            fa.minRatio = r.get<double>();
            fa.maxRatio = r.get<double>();
            fa.minFragmentCount = r.get<int64_t>();
            fa.maxFragmentCount = r.get<int64_t>();
            fa.allocs = r.get<int64_t>();
            fa.frees = r.get<int64_t>();
            fa.allocBytes = r.get<uint64_t>();
            f.allocator.push_back(std::move(fa));
        }
    }
    if (!r.ok || r.p != r.end) return false;
    frames = std::move(copy);
    loadInfo.frameCacheUsed = true;
    return true;
}

void Engine::Impl::writeFrameCache(const std::vector<size_t>& timed)
{
    Writer w;
    w.put<uint64_t>(timed.size());
    w.put<uint64_t>(tracks.size());
    for (size_t fi : timed) {
        const FrameInfo& f = frames[fi];
        w.put(f.index);
        w.put(f.kernels);
        w.put(f.distinctKernels);
        w.put(f.newKernelVariants);
        for (const FrameAllocator& fa : f.allocator) {
            w.put<uint32_t>(fa.device);
            w.put<uint32_t>(static_cast<uint32_t>(fa.level));
            putState(w, fa.atEnd);
            w.put(fa.minLargestFragment);
            w.put(fa.maxLargestFragment);
            w.put(fa.minRatio);
            w.put(fa.maxRatio);
            w.put(fa.minFragmentCount);
            w.put(fa.maxFragmentCount);
            w.put(fa.allocs);
            w.put(fa.frees);
            w.put(fa.allocBytes);
        }
    }
    loadInfo.frameCacheWritten = storeCache(path, cacheStamp, {{kFrameKey, w.out}});
}

} // namespace fs::analysis
