#include "pickle_reader.h"

#include "core/pages.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>

namespace fs::import {

std::string_view ptypeName(PType t)
{
    switch (t) {
    case PType::Invalid:
        return "invalid";
    case PType::None:
        return "None";
    case PType::Bool:
        return "bool";
    case PType::Int:
        return "int";
    case PType::BigInt:
        return "int";
    case PType::Float:
        return "float";
    case PType::Str:
        return "str";
    case PType::Bytes:
        return "bytes";
    case PType::List:
        return "list";
    case PType::Tuple:
        return "tuple";
    case PType::Dict:
        return "dict";
    case PType::Set:
        return "set";
    case PType::FrozenSet:
        return "frozenset";
    }
    return "?";
}

std::string_view pickleOpcodeName(uint8_t op)
{
    switch (op) {
    case '(':
        return "MARK";
    case '.':
        return "STOP";
    case '0':
        return "POP";
    case '1':
        return "POP_MARK";
    case '2':
        return "DUP";
    case 'F':
        return "FLOAT";
    case 'I':
        return "INT";
    case 'J':
        return "BININT";
    case 'K':
        return "BININT1";
    case 'L':
        return "LONG";
    case 'M':
        return "BININT2";
    case 'N':
        return "NONE";
    case 'P':
        return "PERSID";
    case 'Q':
        return "BINPERSID";
    case 'R':
        return "REDUCE";
    case 'S':
        return "STRING";
    case 'T':
        return "BINSTRING";
    case 'U':
        return "SHORT_BINSTRING";
    case 'V':
        return "UNICODE";
    case 'X':
        return "BINUNICODE";
    case 'a':
        return "APPEND";
    case 'b':
        return "BUILD";
    case 'c':
        return "GLOBAL";
    case 'd':
        return "DICT";
    case '}':
        return "EMPTY_DICT";
    case 'e':
        return "APPENDS";
    case 'g':
        return "GET";
    case 'h':
        return "BINGET";
    case 'i':
        return "INST";
    case 'j':
        return "LONG_BINGET";
    case 'l':
        return "LIST";
    case ']':
        return "EMPTY_LIST";
    case 'o':
        return "OBJ";
    case 'p':
        return "PUT";
    case 'q':
        return "BINPUT";
    case 'r':
        return "LONG_BINPUT";
    case 's':
        return "SETITEM";
    case 't':
        return "TUPLE";
    case ')':
        return "EMPTY_TUPLE";
    case 'u':
        return "SETITEMS";
    case 'G':
        return "BINFLOAT";
    case 0x80:
        return "PROTO";
    case 0x81:
        return "NEWOBJ";
    case 0x82:
        return "EXT1";
    case 0x83:
        return "EXT2";
    case 0x84:
        return "EXT4";
    case 0x85:
        return "TUPLE1";
    case 0x86:
        return "TUPLE2";
    case 0x87:
        return "TUPLE3";
    case 0x88:
        return "NEWTRUE";
    case 0x89:
        return "NEWFALSE";
    case 0x8a:
        return "LONG1";
    case 0x8b:
        return "LONG4";
    case 'B':
        return "BINBYTES";
    case 'C':
        return "SHORT_BINBYTES";
    case 0x8c:
        return "SHORT_BINUNICODE";
    case 0x8d:
        return "BINUNICODE8";
    case 0x8e:
        return "BINBYTES8";
    case 0x8f:
        return "EMPTY_SET";
    case 0x90:
        return "ADDITEMS";
    case 0x91:
        return "FROZENSET";
    case 0x92:
        return "NEWOBJ_EX";
    case 0x93:
        return "STACK_GLOBAL";
    case 0x94:
        return "MEMOIZE";
    case 0x95:
        return "FRAME";
    case 0x96:
        return "BYTEARRAY8";
    case 0x97:
        return "NEXT_BUFFER";
    case 0x98:
        return "READONLY_BUFFER";
    default:
        return "";
    }
}

// ---- PickleDoc ----------------------------------------------------------------------------

bool PickleDoc::isContainer(PValue v) const
{
    switch (v.type()) {
    case PType::List:
    case PType::Tuple:
    case PType::Dict:
    case PType::Set:
    case PType::FrozenSet:
        return true;
    default:
        return false;
    }
}

bool PickleDoc::toI64(PValue v, int64_t& out) const
{
    switch (v.type()) {
    case PType::Int:
        out = v.inlineInt();
        return true;
    case PType::Bool:
        out = static_cast<int64_t>(v.payload());
        return true;
    case PType::BigInt: {
        const std::string_view le = strs_[v.payload()];
        if (le.size() > 8) return false;
        uint64_t u = 0;
        for (size_t i = 0; i < le.size(); ++i)
            u |= static_cast<uint64_t>(static_cast<unsigned char>(le[i])) << (8 * i);
        if (le.size() < 8 && !le.empty() && (static_cast<unsigned char>(le.back()) & 0x80))
            u |= ~uint64_t{0} << (8 * le.size()); // sign-extend
        out = static_cast<int64_t>(u);
        return true;
    }
    default:
        return false;
    }
}

bool PickleDoc::toU64(PValue v, uint64_t& out) const
{
    if (v.type() == PType::BigInt) {
        // Unsigned values up to 2^64-1 take 9 bytes in LONG1 (a trailing 0 sign byte).
        std::string_view le = strs_[v.payload()];
        if (le.size() == 9 && le[8] == 0)
            le = le.substr(0, 8);
        else if (le.size() >= 8 && (static_cast<unsigned char>(le.back()) & 0x80))
            return false;
        if (le.size() > 8) return false;
        uint64_t u = 0;
        for (size_t i = 0; i < le.size(); ++i)
            u |= static_cast<uint64_t>(static_cast<unsigned char>(le[i])) << (8 * i);
        if (le.size() < 8 && !le.empty() && (static_cast<unsigned char>(le.back()) & 0x80))
            return false; // negative
        out = u;
        return true;
    }
    int64_t s = 0;
    if (!toI64(v, s) || s < 0) return false;
    out = static_cast<uint64_t>(s);
    return true;
}

std::string PickleDoc::decimal(PValue v) const
{
    int64_t i = 0;
    uint64_t u = 0;
    if (toI64(v, i)) return std::to_string(i);
    if (toU64(v, u)) return std::to_string(u);
    if (v.type() != PType::BigInt) return {};
    // Little-endian two's complement of any width: the magnitude as 32-bit limbs, divided by
    // 10^9 repeatedly.
    const std::string_view le = strs_[v.payload()];
    const bool negative = !le.empty() && (static_cast<unsigned char>(le.back()) & 0x80);
    std::vector<uint32_t> limbs((le.size() + 3) / 4, 0); // least significant first
    for (size_t k = 0; k < le.size(); ++k) {
        const auto b = static_cast<unsigned char>(le[k]);
        limbs[k / 4] |= static_cast<uint32_t>(negative ? static_cast<unsigned char>(~b) : b)
                        << (8 * (k % 4));
    }
    if (negative) { // -x = ~x + 1 over the bytes present
        if (le.size() % 4) limbs.back() &= (uint32_t{1} << (8 * (le.size() % 4))) - 1;
        for (uint32_t& l : limbs)
            if (++l != 0) break;
    }
    std::string digits;
    while (std::any_of(limbs.begin(), limbs.end(), [](uint32_t l) { return l != 0; })) {
        uint64_t rem = 0;
        for (size_t k = limbs.size(); k-- > 0;) {
            const uint64_t cur = (rem << 32) | limbs[k];
            limbs[k] = static_cast<uint32_t>(cur / 1000000000u);
            rem = cur % 1000000000u;
        }
        const bool more = std::any_of(limbs.begin(), limbs.end(), [](uint32_t l) { return l; });
        std::string chunk = std::to_string(rem);
        if (more) chunk.insert(0, 9 - chunk.size(), '0');
        digits.insert(0, chunk);
    }
    if (digits.empty()) digits = "0";
    return negative ? "-" + digits : digits;
}

bool PickleDoc::toDouble(PValue v, double& out) const
{
    if (v.type() == PType::Float) {
        out = floats_[v.payload()];
        return true;
    }
    int64_t i = 0;
    if (!toI64(v, i)) return false;
    out = static_cast<double>(i);
    return true;
}

std::string_view PickleDoc::str(PValue v) const
{
    if (v.type() == PType::Str || v.type() == PType::Bytes) return strs_[v.payload()];
    return {};
}

size_t PickleDoc::size(PValue c) const
{
    if (!isContainer(c)) return 0;
    const auto& k = containers_[c.payload()];
    if (k.compact) return k.compact;
    return k.type == PType::Dict ? k.count / 2 : k.count;
}

PValue PickleDoc::get(PValue dict, std::string_view key) const
{
    PValue found;
    forEachItem(dict, [&](PValue k, PValue v) {
        if (k.type() == PType::Str && strs_[k.payload()] == key) found = v;
    });
    return found;
}

PValue PickleDoc::at(PValue c, size_t i) const
{
    if (!isContainer(c) || containers_[c.payload()].compact) return {};
    for (uint32_t ch = containers_[c.payload()].first; ch != kNone; ch = chunks_[ch].next) {
        if (i < chunks_[ch].count) return arena_[chunks_[ch].block][chunks_[ch].start + i];
        i -= chunks_[ch].count;
    }
    return {};
}

size_t PickleDoc::memoryBytes() const
{
    return containers_.capacity() * sizeof(Container) + chunks_.capacity() * sizeof(Chunk) +
           arena_.size() * kBlock * sizeof(PValue) + pool_.size() * (1 << 20) +
           strs_.capacity() * sizeof(std::string_view) + floats_.capacity() * sizeof(double);
}

struct PickleDoc::ParseAhead
{
    enum Lane { Containers, Chunks, Memo };
    static constexpr size_t kSpareBlocks = 8; // 4 MiB of arena ready

    ParseAhead(PickleDoc& d, const std::vector<PValue>& memo) : doc(d)
    {
        auto add = [&](const auto& v) {
            return pages.addLane(v.data(), v.capacity() * sizeof(v[0]));
        };
        lanes = {add(d.containers_), add(d.chunks_), add(memo)};
        pages.setIdleTask([this] {
            {
                const std::lock_guard lock(m);
                if (spares.size() >= kSpareBlocks) return false;
            }
            auto block = mappedZeros<PValue>(kBlock); // touched here, not by the parse
            const std::lock_guard lock(m);
            spares.push_back(std::move(block));
            return true;
        });
        d.ahead_ = this;
        pages.start();
    }
    ~ParseAhead()
    {
        pages.stop(); // before the blocks and the lock go
        doc.ahead_ = nullptr;
    }
    std::vector<PValue> takeBlock()
    {
        std::vector<PValue> b;
        {
            const std::lock_guard lock(m);
            if (spares.empty()) return b;
            b = std::move(spares.back());
            spares.pop_back();
        }
        pages.kick();
        return b;
    }

    PickleDoc& doc;
    PagesAhead pages;
    std::array<int, 3> lanes{};
    std::mutex m;
    std::vector<std::vector<PValue>> spares;
};

template <typename T> void PickleDoc::grow(std::vector<T>& v, int lane, size_t newSize)
{
    if (ahead_ && ahead_->pages.running()) {
        if (newSize <= v.capacity()) {
            ahead_->pages.reach(ahead_->lanes[static_cast<size_t>(lane)], newSize * sizeof(T));
            return;
        }
        ahead_->pages.stop(); // v is about to move: nothing may touch its old place
    }
    mapSpareAhead(v, newSize);
}

PValue PickleDoc::newContainer(PType t)
{
    grow(containers_, ParseAhead::Containers, containers_.size() + 1);
    containers_.push_back({kNone, kNone, 0, t, 0});
    return PValue::make(t, containers_.size() - 1);
}

void PickleDoc::newBlock()
{
    // Mapped before it is zeroed (core/pages.h): 512 KiB a block, a few hundred blocks for a
    // large snapshot, whose page faults were a sixth of an import.
    arena_.push_back(ahead_ ? ahead_->takeBlock() : std::vector<PValue>{});
    if (arena_.back().empty()) arena_.back() = mappedZeros<PValue>(kBlock);
    arenaUsed_ = 0;
}

void PickleDoc::reserveFor(uint64_t inputBytes)
{
    // Virtual reservations sized from the input (every container costs at least 2 bytes of
    // pickle): untouched pages cost nothing, and the big vectors never reallocate and copy.
    const uint64_t cap = std::min<uint64_t>(inputBytes / 2 + 1024, uint64_t{1} << 31);
    containers_.reserve(static_cast<size_t>(cap / 2));
    chunks_.reserve(static_cast<size_t>(cap / 8));
}

int PickleDoc::keyIndex(PValue key) const
{
    if (key.type() != PType::Str) return -1;
    const uint64_t id = key.payload();
    if (id >= keyIndex_.size())
        keyIndex_.resize(std::max<size_t>(id + 1, keyIndex_.size() * 2), -2);
    int8_t& slot = keyIndex_[id];
    if (slot == -2) {
        slot = -1;
        for (size_t i = 0; i < compactKeys_.size(); ++i)
            if (compactKeys_[i] == strs_[id]) slot = static_cast<int8_t>(i);
    }
    return slot;
}

bool PickleDoc::tryCompact(PValue dict, const PValue* items, size_t n)
{
    Container& k = containers_[dict.payload()];
    if (compactKeys_.empty() || k.count != 0 || k.compact || n == 0 || n % 2 != 0 ||
        n / 2 > compactKeys_.size())
        return false;
    uint32_t mask = 0;
    PValue sorted[32];
    for (size_t i = 0; i < n; i += 2) {
        const int bit = keyIndex(items[i]);
        if (bit < 0 || (mask & (1u << bit)))
            return false; // unknown key, or a duplicate (Python keeps the last: keep the general
                          // path)
        mask |= 1u << bit;
        sorted[bit] = items[i + 1];
    }
    const auto m = static_cast<uint32_t>(n / 2);
    if (kBlock - arenaUsed_ < m) newBlock();
    PValue* dst = &arena_.back()[arenaUsed_];
    uint32_t i = 0;
    for (uint32_t bits = mask; bits != 0; bits &= bits - 1)
        dst[i++] = sorted[__builtin_ctz(bits)];
    Container& kk = containers_[dict.payload()];
    kk.first = static_cast<uint32_t>(arena_.size() - 1);
    kk.count = arenaUsed_;
    kk.last = mask;
    kk.compact = static_cast<uint8_t>(m);
    arenaUsed_ += m;
    return true;
}

void PickleDoc::materialize(PValue dict)
{
    Container& k = containers_[dict.payload()];
    if (!k.compact) return;
    std::vector<PValue> pairs;
    forEachItem(dict, [&](PValue key, PValue v) {
        pairs.push_back(key);
        pairs.push_back(v);
    });
    Container& kk = containers_[dict.payload()];
    kk = Container{kNone, kNone, 0, PType::Dict, 0};
    append(dict, pairs.data(), pairs.size());
}

void PickleDoc::append(PValue c, const PValue* items, size_t n)
{
    if (containers_[c.payload()].compact) materialize(c);
    Container& k = containers_[c.payload()];
    while (n > 0) {
        if (arenaUsed_ == kBlock) newBlock();
        size_t take = std::min<size_t>(n, kBlock - arenaUsed_);
        if (k.type == PType::Dict && take < n)
            take &= ~size_t{1}; // keep key/value pairs in one chunk
        if (take == 0) {
            arenaUsed_ = kBlock; // odd slot left at the end of a block: start a new one
            continue;
        }
        // Extend the container's last chunk when it ends exactly where we write (common for
        // SETITEMS/APPENDS batches that follow each other).
        const uint32_t block = static_cast<uint32_t>(arena_.size() - 1);
        std::memcpy(&arena_.back()[arenaUsed_], items, take * sizeof(PValue));
        if (k.last != kNone && chunks_[k.last].block == block &&
            chunks_[k.last].start + chunks_[k.last].count == arenaUsed_) {
            chunks_[k.last].count += static_cast<uint32_t>(take);
        } else {
            grow(chunks_, ParseAhead::Chunks, chunks_.size() + 1);
            chunks_.push_back({block, arenaUsed_, static_cast<uint32_t>(take), kNone});
            const auto id = static_cast<uint32_t>(chunks_.size() - 1);
            if (k.last == kNone)
                k.first = id;
            else
                chunks_[k.last].next = id;
            k.last = id;
        }
        arenaUsed_ += static_cast<uint32_t>(take);
        k.count += take;
        items += take;
        n -= take;
    }
}

PValue PickleDoc::newString(PType t, std::string_view s)
{
    constexpr size_t kPoolBlock = 1 << 20;
    const char* p = nullptr;
    if (s.size() > kPoolBlock / 4) {
        // Large strings get their own allocation.
        pool_.push_back(std::make_unique<char[]>(s.size()));
        std::memcpy(pool_.back().get(), s.data(), s.size());
        p = pool_.back().get();
        // Keep appending to the previous small-string block.
        if (pool_.size() >= 2) std::swap(pool_[pool_.size() - 1], pool_[pool_.size() - 2]);
    } else {
        if (poolCap_ - poolUsed_ < s.size() || pool_.empty()) {
            pool_.push_back(std::make_unique<char[]>(kPoolBlock));
            poolUsed_ = 0;
            poolCap_ = kPoolBlock;
        }
        char* dst = pool_.back().get() + poolUsed_;
        if (!s.empty()) std::memcpy(dst, s.data(), s.size());
        poolUsed_ += s.size();
        p = dst;
    }
    strs_.emplace_back(p, s.size());
    return PValue::make(t, strs_.size() - 1);
}

PValue PickleDoc::newFloat(double d)
{
    floats_.push_back(d);
    return PValue::make(PType::Float, floats_.size() - 1);
}

PValue PickleDoc::newBigInt(std::string_view le)
{
    // Normalise small values to inline ints so that consumers see one representation.
    if (le.size() <= 8) {
        uint64_t u = 0;
        for (size_t i = 0; i < le.size(); ++i)
            u |= static_cast<uint64_t>(static_cast<unsigned char>(le[i])) << (8 * i);
        if (!le.empty() && le.size() < 8 && (static_cast<unsigned char>(le.back()) & 0x80))
            u |= ~uint64_t{0} << (8 * le.size());
        const auto s = static_cast<int64_t>(u);
        if (PValue::fitsInline(s)) return PValue::makeInt(s);
    }
    PValue v = newString(PType::Bytes, le);
    return PValue::make(PType::BigInt, v.payload());
}

// ---- PickleReader -------------------------------------------------------------------------

class PickleVm
{
public:
    PickleVm(ByteReader& r, PickleDoc& d, const PickleOptions& o) : r_(r), d_(d), opts_(o)
    {
        // Most objects in a snapshot are memoized; reserve (virtually) so the memo never copies.
        memo_.reserve(
            static_cast<size_t>(std::min<uint64_t>(r.fileSize() / 6 + 1024, uint64_t{1} << 30)));
        if (r.fileSize() >= o.touchAheadFrom)
            ahead_ = std::make_unique<PickleDoc::ParseAhead>(d, memo_);
    }

    void run();

private:
    [[noreturn]] void fail(const std::string& what) const
    {
        r_.failAt(opOff_, fmt::format("{} ({}): {}", opName(), hexOp(), what));
    }
    std::string opName() const
    {
        const std::string_view n = pickleOpcodeName(op_);
        return n.empty() ? std::string("unknown opcode") : std::string("opcode ") + std::string(n);
    }
    std::string hexOp() const { return fmt::format("byte 0x{:02x}", op_); }
    void need(void* out, size_t n)
    {
        if (!r_.read(out, n))
            r_.fail(fmt::format("truncated: the input ends inside {} that started at offset {}",
                                opName(), opOff_));
    }
    template <typename T> T le()
    {
        unsigned char b[sizeof(T)];
        need(b, sizeof(T));
        uint64_t v = 0;
        for (size_t i = 0; i < sizeof(T); ++i)
            v |= static_cast<uint64_t>(b[i]) << (8 * i);
        return static_cast<T>(v);
    }
    std::string_view bytes(uint64_t n)
    {
        if (!r_.readString(tmp_, n))
            r_.fail(fmt::format("truncated: {} declares {} bytes but the input ends first",
                                opName(), n));
        return tmp_;
    }
    std::string line()
    {
        std::string s;
        while (true) {
            const int c = r_.get();
            if (c < 0) r_.fail(fmt::format("truncated: the input ends inside {}", opName()));
            if (c == '\n') return s;
            s.push_back(static_cast<char>(c));
            if (s.size() > 4096) fail("text argument longer than 4096 bytes");
        }
    }
    void push(PValue v) { stack_.push_back(v); }
    PValue pop()
    {
        if (stack_.size() <= markFloor()) fail("stack underflow (no value to take)");
        PValue v = stack_.back();
        stack_.pop_back();
        return v;
    }
    PValue& top()
    {
        if (stack_.size() <= markFloor()) fail("stack underflow (no value on the stack)");
        return stack_.back();
    }
    size_t markFloor() const { return marks_.empty() ? 0 : marks_.back(); }
    size_t popMark()
    {
        if (marks_.empty()) fail("no MARK before this opcode");
        const size_t m = marks_.back();
        marks_.pop_back();
        return m;
    }
    PValue containerAt(size_t idx, PType want1, PType want2 = PType::Invalid)
    {
        if (idx >= stack_.size()) fail("stack underflow (no container)");
        const PValue c = stack_[idx];
        if (c.type() != want1 && c.type() != want2)
            fail(fmt::format("expected a {} on the stack, found a {}", ptypeName(want1),
                             ptypeName(c.type())));
        return c;
    }
    void memoPut(uint64_t idx, PValue v)
    {
        if (!memoHas(idx)) ++memoCount_;
        if (idx < memo_.size() || idx < memo_.size() + (1u << 20)) {
            if (idx >= memo_.size()) {
                d_.grow(memo_, PickleDoc::ParseAhead::Memo, idx + 1);
                memo_.resize(idx + 1);
            }
            memo_[idx] = v;
        } else {
            sparseMemo_[idx] = v;
        }
    }
    bool memoHas(uint64_t idx) const
    {
        return (idx < memo_.size() && memo_[idx].valid()) || sparseMemo_.count(idx) != 0;
    }
    PValue memoGet(uint64_t idx)
    {
        if (idx < memo_.size() && memo_[idx].valid()) return memo_[idx];
        auto it = sparseMemo_.find(idx);
        if (it == sparseMemo_.end()) fail(fmt::format("memo key {} was never stored", idx));
        return it->second;
    }
    PValue makeTuple(size_t from)
    {
        const PValue t = d_.newContainer(PType::Tuple);
        d_.append(t, stack_.data() + from, stack_.size() - from);
        stack_.resize(from);
        return t;
    }

    ByteReader& r_;
    PickleDoc& d_;
    const PickleOptions& opts_;
    std::vector<PValue> stack_;
    std::vector<size_t> marks_;
    std::vector<PValue> memo_;
    std::map<uint64_t, PValue> sparseMemo_;
    uint64_t memoCount_ = 0;
    std::string tmp_;
    uint64_t opOff_ = 0;
    uint8_t op_ = 0;
    std::unique_ptr<PickleDoc::ParseAhead> ahead_; // last: stopped before memo_ goes
};

void PickleVm::run()
{
    uint64_t nextProgress = 1 << 20;
    while (true) {
        opOff_ = r_.offset();
        if (opts_.progress && opOff_ >= nextProgress) {
            opts_.progress(opOff_);
            nextProgress = opOff_ + (1 << 20);
        }
        const int c = r_.get();
        if (c < 0) {
            if (opOff_ == 0) r_.failAt(0, "empty file: expected a pickle");
            r_.failAt(opOff_, "truncated: the input ends before the pickle's STOP opcode");
        }
        op_ = static_cast<uint8_t>(c);
        switch (op_) {
        case 0x80: { // PROTO
            const uint8_t p = le<uint8_t>();
            if (p > 5) fail(fmt::format("pickle protocol {} is newer than 5", p));
            break;
        }
        case 0x95: // FRAME: length of the next frame; we read sequentially anyway
            (void)le<uint64_t>();
            break;
        case '.': // STOP
            if (!marks_.empty()) fail("STOP inside an unclosed MARK");
            // Like Python, the result is the top of the stack (anything below is ignored).
            if (stack_.empty()) fail("STOP with an empty stack");
            d_.root_ = stack_.back();
            return;
        case '(':
            marks_.push_back(stack_.size());
            break;
        case '0':
            if (!stack_.empty() && stack_.size() > markFloor())
                stack_.pop_back();
            else if (!marks_.empty() && stack_.size() == marks_.back())
                marks_.pop_back(); // POP of a MARK (pickletools allows it)
            else
                fail("stack underflow");
            break;
        case '1':
            stack_.resize(popMark());
            break;
        case '2':
            push(top());
            break;
        case 'N':
            push(PValue::make(PType::None, 0));
            break;
        case 0x88:
            push(PValue::make(PType::Bool, 1));
            break;
        case 0x89:
            push(PValue::make(PType::Bool, 0));
            break;
        case 'J':
            push(PValue::makeInt(static_cast<int32_t>(le<uint32_t>())));
            break;
        case 'K':
            push(PValue::makeInt(le<uint8_t>()));
            break;
        case 'M':
            push(PValue::makeInt(le<uint16_t>()));
            break;
        case 0x8a: { // LONG1
            const uint8_t n = le<uint8_t>();
            push(d_.newBigInt(bytes(n)));
            break;
        }
        case 0x8b: { // LONG4
            const int32_t n = static_cast<int32_t>(le<uint32_t>());
            if (n < 0) fail("negative length");
            push(d_.newBigInt(bytes(static_cast<uint64_t>(n))));
            break;
        }
        case 'I':
        case 'L': { // text INT / LONG (protocol 0)
            std::string s = line();
            if (op_ == 'L' && !s.empty() && s.back() == 'L') s.pop_back();
            if (op_ == 'I' && (s == "00" || s == "01")) {
                push(PValue::make(PType::Bool, s == "01" ? 1 : 0));
                break;
            }
            int64_t v = 0;
            auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
            if (ec != std::errc() || p != s.data() + s.size())
                fail("'" + s + "' is not a decimal integer that fits in 64 bits");
            if (PValue::fitsInline(v)) {
                push(PValue::makeInt(v));
            } else {
                std::string leb(8, '\0');
                for (int i = 0; i < 8; ++i)
                    leb[static_cast<size_t>(i)] =
                        static_cast<char>(static_cast<uint64_t>(v) >> (8 * i));
                push(d_.newBigInt(leb));
            }
            break;
        }
        case 'F': {
            const std::string s = line();
            double v = 0;
            auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
            if (ec != std::errc() || p != s.data() + s.size()) fail("'" + s + "' is not a float");
            push(d_.newFloat(v));
            break;
        }
        case 'G': {
            const uint64_t bits = [&] {
                unsigned char b[8];
                need(b, 8);
                uint64_t u = 0;
                for (int i = 0; i < 8; ++i)
                    u = (u << 8) | b[i]; // big-endian
                return u;
            }();
            double v;
            std::memcpy(&v, &bits, sizeof v);
            push(d_.newFloat(v));
            break;
        }
        case 'X':
            push(d_.newString(PType::Str, bytes(le<uint32_t>())));
            break;
        case 0x8c:
            push(d_.newString(PType::Str, bytes(le<uint8_t>())));
            break;
        case 0x8d:
            push(d_.newString(PType::Str, bytes(le<uint64_t>())));
            break;
        case 'T': { // BINSTRING: py2 str, decoded as str like pickle's default encoding
            const int32_t n = static_cast<int32_t>(le<uint32_t>());
            if (n < 0) fail("negative length");
            push(d_.newString(PType::Str, bytes(static_cast<uint64_t>(n))));
            break;
        }
        case 'U':
            push(d_.newString(PType::Str, bytes(le<uint8_t>())));
            break;
        case 'B':
            push(d_.newString(PType::Bytes, bytes(le<uint32_t>())));
            break;
        case 'C':
            push(d_.newString(PType::Bytes, bytes(le<uint8_t>())));
            break;
        case 0x8e:
            push(d_.newString(PType::Bytes, bytes(le<uint64_t>())));
            break;
        case 0x96:
            push(d_.newString(PType::Bytes, bytes(le<uint64_t>())));
            break; // BYTEARRAY8
        case ')':
            push(d_.newContainer(PType::Tuple));
            break;
        case ']':
            push(d_.newContainer(PType::List));
            break;
        case '}':
            push(d_.newContainer(PType::Dict));
            break;
        case 0x8f:
            push(d_.newContainer(PType::Set));
            break;
        case 't': {
            const size_t m = popMark();
            push(makeTuple(m));
            break;
        }
        case 0x85:
        case 0x86:
        case 0x87: {
            const size_t n = static_cast<size_t>(op_ - 0x84);
            if (stack_.size() < markFloor() + n)
                fail("stack underflow (not enough values for the tuple)");
            push(makeTuple(stack_.size() - n));
            break;
        }
        case 'l':
        case 'd':
        case 0x91: { // LIST, DICT, FROZENSET from a MARK
            const size_t m = popMark();
            const PType t = op_ == 'l' ? PType::List : op_ == 'd' ? PType::Dict : PType::FrozenSet;
            if (t == PType::Dict && (stack_.size() - m) % 2 != 0)
                fail("odd number of values for a dict's keys and values");
            const PValue c2 = d_.newContainer(t);
            if (t != PType::Dict || !d_.tryCompact(c2, stack_.data() + m, stack_.size() - m))
                d_.append(c2, stack_.data() + m, stack_.size() - m);
            stack_.resize(m);
            push(c2);
            break;
        }
        case 'a': { // APPEND
            if (stack_.size() < markFloor() + 2)
                fail("stack underflow (APPEND needs a list and a value)");
            const PValue v = stack_.back();
            stack_.pop_back();
            d_.append(containerAt(stack_.size() - 1, PType::List), &v, 1);
            break;
        }
        case 'e':
        case 0x90: { // APPENDS, ADDITEMS
            const size_t m = popMark();
            if (m == 0) fail("no list below the MARK");
            const PValue l =
                op_ == 'e' ? containerAt(m - 1, PType::List) : containerAt(m - 1, PType::Set);
            d_.append(l, stack_.data() + m, stack_.size() - m);
            stack_.resize(m);
            break;
        }
        case 's': { // SETITEM
            if (stack_.size() < markFloor() + 3)
                fail("stack underflow (SETITEM needs a dict, a key and a value)");
            const PValue dct = containerAt(stack_.size() - 3, PType::Dict);
            d_.append(dct, stack_.data() + stack_.size() - 2, 2);
            stack_.resize(stack_.size() - 2);
            break;
        }
        case 'u': { // SETITEMS
            const size_t m = popMark();
            if (m == 0) fail("no dict below the MARK");
            if ((stack_.size() - m) % 2 != 0)
                fail("odd number of values for a dict's keys and values");
            const PValue dct = containerAt(m - 1, PType::Dict);
            if (!d_.tryCompact(dct, stack_.data() + m, stack_.size() - m))
                d_.append(dct, stack_.data() + m, stack_.size() - m);
            stack_.resize(m);
            break;
        }
        case 0x94:
            memoPut(memoCount_, top());
            break; // MEMOIZE
        case 'q':
            memoPut(le<uint8_t>(), top());
            break;
        case 'r':
            memoPut(le<uint32_t>(), top());
            break;
        case 'h':
            push(memoGet(le<uint8_t>()));
            break;
        case 'j':
            push(memoGet(le<uint32_t>()));
            break;
        case 'p':
        case 'g': {
            const std::string s = line();
            uint64_t idx = 0;
            auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), idx);
            if (ec != std::errc() || p != s.data() + s.size())
                fail("'" + s + "' is not a memo index");
            if (op_ == 'p')
                memoPut(idx, top());
            else
                push(memoGet(idx));
            break;
        }
        // Everything that would import a name, call it, or hand us out-of-band objects.
        case 'c':
        case 0x93:
        case 'R':
        case 'b':
        case 'i':
        case 'o':
        case 0x81:
        case 0x92:
        case 0x82:
        case 0x83:
        case 0x84:
        case 'P':
        case 'Q':
        case 0x97:
        case 0x98:
            r_.failAt(
                opOff_,
                fmt::format("refused opcode {} ({}): this pickle asks to import or call code, "
                            "which a trace reader never does; only plain data is accepted",
                            pickleOpcodeName(op_), hexOp()));
        case 'S':
        case 'V':
            fail("protocol-0 text strings are not supported (PyTorch writes protocol 2 or newer)");
        default:
            r_.failAt(
                opOff_,
                fmt::format("unknown opcode (byte 0x{:02x}): not a pickle, or a corrupt one", op_));
        }
    }
}

std::unique_ptr<PickleDoc> PickleReader::read(ByteReader& r, const PickleOptions& opts)
{
    auto doc = std::make_unique<PickleDoc>();
    if (opts.compactKeys.size() > 32)
        throw std::invalid_argument("PickleOptions::compactKeys: at most 32 keys");
    doc->compactKeys_ = opts.compactKeys;
    for (const auto& k : opts.compactKeys)
        doc->compactKeyValues_.push_back(doc->newString(PType::Str, k));
    doc->reserveFor(r.compressed() ? r.fileSize() * 4 : r.fileSize());
    PickleVm vm(r, *doc, opts);
    vm.run();
    return doc;
}

} // namespace fs::import
