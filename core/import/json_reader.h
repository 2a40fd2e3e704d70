// A streaming JSON reader: the caller walks the top level and large arrays element by element
// and asks for a small DOM of one element at a time, so a multi-GB trace never sits in memory
// as a whole. Depth and string sizes are bounded; errors name the file and the byte offset.
#pragma once

#include "byte_reader.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fs::import {

enum class JType : uint8_t { Null, Bool, Number, String, Array, Object };

// One parsed element: nodes in a flat vector, children linked by index.
class JsonDoc
{
public:
    static constexpr uint32_t kNone = 0xffffffffu;
    struct Node
    {
        JType type = JType::Null;
        bool boolean = false;
        uint32_t first = kNone; // first child (Array/Object)
        uint32_t next = kNone;  // next sibling
        std::string key;        // member name when the parent is an Object
        std::string text;       // String: decoded text; Number: the literal
    };
    uint32_t root() const { return nodes_.empty() ? kNone : 0; }
    const Node& node(uint32_t i) const { return nodes_[i]; }
    // Member of an object by name (kNone when absent).
    uint32_t member(uint32_t obj, std::string_view key) const;
    uint32_t child(uint32_t arr, size_t index) const;
    // Numbers: false when absent or not a number (or not integral for toInt).
    bool toInt(uint32_t n, int64_t& out) const;
    bool toDouble(uint32_t n, double& out) const;
    // A timestamp in microseconds (possibly fractional) as integer nanoseconds, exactly
    // (nanosFromMicros below).
    bool toNanosFromMicros(uint32_t n, int64_t& out) const;
    std::string_view str(uint32_t n) const;
    void clear() { nodes_.clear(); }

private:
    friend class JsonReader;
    std::vector<Node> nodes_;
};

class JsonReader
{
public:
    explicit JsonReader(ByteReader& r) : r_(r) {}
    // Skips whitespace and returns the next significant byte without consuming it (-1 at end).
    int peekToken();
    // Consumes c or fails with "expected <what>".
    void expect(char c, const char* what);
    // Consumes c if it is next.
    bool accept(char c);
    // Reads a string token (the opening quote must be next).
    std::string readString();
    // Parses one value into doc (cleared first).
    void readValue(JsonDoc& doc);
    // Skips one value without building anything (bounded depth).
    void skipValue();
    // At the end of input, only whitespace may remain.
    void expectEnd();
    [[noreturn]] void fail(const std::string& what) { r_.fail(what); }
    ByteReader& bytes() { return r_; }

private:
    uint32_t parse(JsonDoc& doc, int depth);
    void readLiteral(std::string& out);
    void readStringInto(std::string& out);
    int next();
    ByteReader& r_;
};

// A JSON number's text in microseconds (possibly fractional, possibly with an exponent) as integer
// nanoseconds: the integer part and up to three fraction digits exactly (a double loses ns at
// epoch scale); false when it is not a number or lies beyond ~292 years.
bool nanosFromMicros(std::string_view text, int64_t& out);

} // namespace fs::import
