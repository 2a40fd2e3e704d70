// A pickle reader that understands plain data only (protocols 0-5: dicts, lists, tuples, sets,
// strings, bytes, ints of any size, floats, bools, None, memo) and runs no code. Every opcode
// that would import or call something (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ,
// NEWOBJ_EX, EXT1/2/4, PERSID, BINPERSID, NEXT_BUFFER, READONLY_BUFFER) is refused with an error
// that names the opcode and its byte offset.
//
// The decoded document is compact (8-byte values, children in a shared arena) so that a 1 GB
// snapshot fits in a few GB: PyTorch writes each trace entry as a small dict whose keys and
// frames are memo references, and those stay shared here as they are in the file.
#pragma once

#include "byte_reader.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace fs::import {

enum class PType : uint8_t {
    Invalid = 0,
    None,
    Bool,
    Int,
    BigInt,
    Float,
    Str,
    Bytes,
    List,
    Tuple,
    Dict,
    Set,
    FrozenSet,
};
std::string_view ptypeName(PType t);

// One decoded value: a 4-bit type and a 60-bit payload (inline int, or an index).
class PValue
{
public:
    PValue() = default;
    static PValue make(PType t, uint64_t payload)
    {
        return PValue((static_cast<uint64_t>(t) << 60) | (payload & kMask));
    }
    static PValue makeInt(int64_t v) { return make(PType::Int, static_cast<uint64_t>(v)); }
    static bool fitsInline(int64_t v) { return v >= -(int64_t{1} << 59) && v < (int64_t{1} << 59); }
    PType type() const { return static_cast<PType>(bits_ >> 60); }
    uint64_t payload() const { return bits_ & kMask; }
    int64_t inlineInt() const { return static_cast<int64_t>(bits_ << 4) >> 4; }
    bool valid() const { return type() != PType::Invalid; }
    bool operator==(const PValue& o) const { return bits_ == o.bits_; }

private:
    static constexpr uint64_t kMask = (uint64_t{1} << 60) - 1;
    explicit PValue(uint64_t b) : bits_(b) {}
    uint64_t bits_ = 0;
};
static_assert(sizeof(PValue) == 8);

class PickleVm;

class PickleDoc
{
public:
    PValue root() const { return root_; }
    PType type(PValue v) const { return v.type(); }
    bool isInt(PValue v) const
    {
        return v.type() == PType::Int || v.type() == PType::BigInt || v.type() == PType::Bool;
    }
    bool isContainer(PValue v) const;
    // Integer value; false when v is not an int or does not fit in 64 bits (signed, or unsigned
    // for toU64).
    bool toI64(PValue v, int64_t& out) const;
    bool toU64(PValue v, uint64_t& out) const;
    // Decimal text of any integer (Int, BigInt of any width, Bool as 0/1); "" for others.
    std::string decimal(PValue v) const;
    bool toDouble(PValue v, double& out) const;
    std::string_view str(PValue v) const; // Str and Bytes; empty otherwise
    size_t size(PValue container) const;
    // Calls f(value) for every item of a list/tuple/set (for a dict: keys and values alternate).
    template <typename F> void forEach(PValue c, F&& f) const
    {
        if (!isContainer(c)) return;
        const Container& k = containers_[c.payload()];
        if (k.compact) {
            forEachItem(c, [&](PValue key, PValue v) {
                f(key);
                f(v);
            });
            return;
        }
        for (uint32_t ch = k.first; ch != kNone; ch = chunks_[ch].next) {
            const PValue* p = &arena_[chunks_[ch].block][chunks_[ch].start];
            for (uint32_t i = 0; i < chunks_[ch].count; ++i)
                f(p[i]);
        }
    }
    // Calls f(key, value) for every item of a dict.
    template <typename F> void forEachItem(PValue d, F&& f) const
    {
        if (d.type() != PType::Dict) return;
        const Container& k = containers_[d.payload()];
        if (k.compact) {
            // Compact dict: values only, in key-list order; keys come from the option's list.
            const PValue* p = &arena_[k.first][k.count];
            uint32_t mask = k.last;
            for (uint32_t i = 0; mask != 0; ++i, mask &= mask - 1)
                f(compactKeyValues_[static_cast<size_t>(__builtin_ctz(mask))], p[i]);
            return;
        }
        for (uint32_t ch = k.first; ch != kNone; ch = chunks_[ch].next) {
            const PValue* p = &arena_[chunks_[ch].block][chunks_[ch].start];
            for (uint32_t i = 0; i + 1 < chunks_[ch].count; i += 2)
                f(p[i], p[i + 1]);
        }
    }
    // Calls f(index, value) for every item of a dict, index being the key's position in
    // PickleOptions::compactKeys or -1: compact dicts know it without looking at the key.
    template <typename F> void forEachKeyed(PValue d, F&& f) const
    {
        if (d.type() != PType::Dict) return;
        const Container& k = containers_[d.payload()];
        if (k.compact) {
            const PValue* p = &arena_[k.first][k.count];
            uint32_t mask = k.last;
            for (uint32_t i = 0; mask != 0; ++i, mask &= mask - 1)
                f(__builtin_ctz(mask), p[i]);
            return;
        }
        forEachItem(d, [&](PValue key, PValue v) { f(keyIndex(key), v); });
    }
    // Index of a str key in PickleOptions::compactKeys, or -1 (cached per string).
    int keyIndex(PValue key) const;
    // Value of a dict's string key (the last one wins, as in Python); Invalid when missing.
    PValue get(PValue dict, std::string_view key) const;
    // Item i of a list/tuple (Invalid when out of range).
    PValue at(PValue c, size_t i) const;
    size_t memoryBytes() const;

private:
    friend class PickleReader;
    friend class PickleVm;
    static constexpr uint32_t kNone = 0xffffffffu;
    static constexpr uint32_t kBlock = 1u << 16; // values per arena block (even: dict pairs)
    struct Container
    {
        uint32_t first = kNone; // chunk index (compact dict: arena block)
        uint32_t last = kNone;  // chunk index (compact dict: bit mask of the keys present)
        uint32_t count = 0; // values stored, dict keys included (compact dict: start in the block)
        PType type = PType::List;
        uint8_t compact = 0; // values of a compact dict (0: normal storage)
    };
    static_assert(sizeof(Container) == 16);
    struct Chunk
    {
        uint32_t block;
        uint32_t start;
        uint32_t count;
        uint32_t next;
    };
    struct StrRef
    {
        uint64_t offset;
        uint64_t length;
    };
    // While a large input is parsed: the thread that touches the arrays' pages ahead of the
    // parse, and the arena blocks it prepared (pickle_reader.cpp).
    struct ParseAhead;
    template <typename T> void grow(std::vector<T>& v, int lane, size_t newSize);
    PValue newContainer(PType t);
    void newBlock();
    void append(PValue c, const PValue* items, size_t n);
    // Stores the items of a still-empty dict compactly when every key is in compactKeys.
    bool tryCompact(PValue dict, const PValue* items, size_t n);
    // Back to normal storage (a compact dict that receives more items).
    void materialize(PValue dict);
    void reserveFor(uint64_t inputBytes);
    PValue newString(PType t, std::string_view s);
    PValue newFloat(double d);
    PValue newBigInt(std::string_view le);

    PValue root_;
    std::vector<Container> containers_;
    std::vector<Chunk> chunks_;
    std::vector<std::vector<PValue>> arena_; // blocks of kBlock values (newBlock)
    uint32_t arenaUsed_ = kBlock;
    std::vector<std::unique_ptr<char[]>> pool_; // string bytes, in blocks
    size_t poolUsed_ = 0;
    size_t poolCap_ = 0;
    std::vector<std::string_view> strs_;
    std::vector<double> floats_;
    std::vector<std::string> compactKeys_;
    std::vector<PValue> compactKeyValues_;
    mutable std::vector<int8_t> keyIndex_; // per string id: -2 unknown, -1 none, else index
    ParseAhead* ahead_ = nullptr;
};

struct PickleOptions
{
    // Dicts whose keys all come from this list (at most 32) are stored without their keys:
    // PyTorch's millions of trace entries then cost their values only. Transparent to readers.
    std::vector<std::string> compactKeys;
    // Called every ~1 MiB of input with the offset reached (progress).
    std::function<void(uint64_t)> progress;
    // From this input size on, a second thread touches the document's fresh pages ahead of the
    // parse (fs::PagesAhead) and prepares its next arena blocks.
    uint64_t touchAheadFrom = uint64_t{16} << 20;
};

class PickleReader
{
public:
    // Reads one pickle from r until STOP; throws ImportError on malformed or refused input.
    static std::unique_ptr<PickleDoc> read(ByteReader& r, const PickleOptions& opts = {});
};

// Name of a pickle opcode byte ("GLOBAL", ...), or "" when unknown.
std::string_view pickleOpcodeName(uint8_t op);

} // namespace fs::import
