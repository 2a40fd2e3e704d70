#include "json_reader.h"

#include <charconv>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace fs::import {

namespace {
constexpr int kMaxDepth = 128;
constexpr size_t kMaxString = 64u << 20;

std::string describe(int c)
{
    if (c < 0) return "the end of the input";
    if (c >= 0x20 && c < 0x7f) return fmt::format("'{}'", static_cast<char>(c));
    return fmt::format("byte 0x{:02x}", c);
}
} // namespace

uint32_t JsonDoc::member(uint32_t obj, std::string_view key) const
{
    if (obj == kNone || nodes_[obj].type != JType::Object) return kNone;
    uint32_t found = kNone;
    for (uint32_t c = nodes_[obj].first; c != kNone; c = nodes_[c].next)
        if (nodes_[c].key == key) found = c;
    return found;
}

uint32_t JsonDoc::child(uint32_t arr, size_t index) const
{
    if (arr == kNone || nodes_[arr].type != JType::Array) return kNone;
    for (uint32_t c = nodes_[arr].first; c != kNone; c = nodes_[c].next, --index)
        if (index == 0) return c;
    return kNone;
}

bool JsonDoc::toInt(uint32_t n, int64_t& out) const
{
    if (n == kNone || nodes_[n].type != JType::Number) return false;
    const std::string& t = nodes_[n].text;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
    if (ec == std::errc() && p == t.data() + t.size()) return true;
    double d = 0;
    if (!toDouble(n, d) || d != static_cast<double>(static_cast<int64_t>(d))) return false;
    out = static_cast<int64_t>(d);
    return true;
}

bool JsonDoc::toDouble(uint32_t n, double& out) const
{
    if (n == kNone || nodes_[n].type != JType::Number) return false;
    const std::string& t = nodes_[n].text;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
    return ec == std::errc() && p == t.data() + t.size();
}

bool nanosFromMicros(std::string_view t, int64_t& out)
{
    if (t.find_first_of("eE") != std::string_view::npos) {
        double d = 0;
        auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), d);
        if (ec != std::errc() || p != t.data() + t.size() || !(std::abs(d) < 9.0e15)) return false;
        out = static_cast<int64_t>(d * 1000.0 + (d >= 0 ? 0.5 : -0.5));
        return true;
    }
    // Integer part and up to three fraction digits, exactly (doubles lose ns at epoch scale).
    const size_t dot = t.find('.');
    int64_t whole = 0;
    const std::string_view w = t.substr(0, dot);
    auto [p, ec] = std::from_chars(w.data(), w.data() + w.size(), whole);
    if (ec != std::errc() || p != w.data() + w.size()) return false;
    // Beyond ~292 years in ns the value cannot be a timestamp (and would overflow).
    if (whole > std::numeric_limits<int64_t>::max() / 1000 - 1 ||
        whole < std::numeric_limits<int64_t>::min() / 1000 + 1)
        return false;
    int64_t frac = 0;
    if (dot != std::string_view::npos) {
        int digits = 0;
        for (size_t i = dot + 1; i < t.size() && digits < 3; ++i, ++digits)
            frac = frac * 10 + (t[i] - '0');
        while (digits++ < 3)
            frac *= 10;
    }
    out = whole * 1000 + (t.starts_with('-') ? -frac : frac);
    return true;
}

bool JsonDoc::toNanosFromMicros(uint32_t n, int64_t& out) const
{
    return n != kNone && nodes_[n].type == JType::Number && nanosFromMicros(nodes_[n].text, out);
}

std::string_view JsonDoc::str(uint32_t n) const
{
    if (n == kNone || nodes_[n].type != JType::String) return {};
    return nodes_[n].text;
}

int JsonReader::next()
{
    return r_.get();
}

int JsonReader::peekToken()
{
    while (true) {
        const int c = r_.peek();
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
            r_.get();
            continue;
        }
        return c;
    }
}

void JsonReader::expect(char c, const char* what)
{
    const int got = peekToken();
    if (got != c) {
        if (got < 0) fail(fmt::format("truncated: the input ends where {} was expected", what));
        fail(fmt::format("expected {}, found {}", what, describe(got)));
    }
    r_.get();
}

bool JsonReader::accept(char c)
{
    if (peekToken() == c) {
        r_.get();
        return true;
    }
    return false;
}

void JsonReader::expectEnd()
{
    const int c = peekToken();
    if (c >= 0) fail(fmt::format("unexpected {} after the end of the JSON document", describe(c)));
}

std::string JsonReader::readString()
{
    std::string s;
    expect('"', "a string");
    readStringInto(s);
    return s;
}

void JsonReader::readStringInto(std::string& out)
{
    // The opening quote has been consumed.
    out.clear();
    while (true) {
        int c = next();
        if (c < 0) fail("truncated: the input ends inside a string");
        if (c == '"') return;
        if (c < 0x20) fail(fmt::format("control character {} inside a string", describe(c)));
        if (c == '\\') {
            c = next();
            switch (c) {
            case '"':
                out.push_back('"');
                break;
            case '\\':
                out.push_back('\\');
                break;
            case '/':
                out.push_back('/');
                break;
            case 'b':
                out.push_back('\b');
                break;
            case 'f':
                out.push_back('\f');
                break;
            case 'n':
                out.push_back('\n');
                break;
            case 'r':
                out.push_back('\r');
                break;
            case 't':
                out.push_back('\t');
                break;
            case 'u': {
                uint32_t cp = 0;
                for (int i = 0; i < 4; ++i) {
                    const int h = next();
                    cp <<= 4;
                    if (h >= '0' && h <= '9')
                        cp |= static_cast<uint32_t>(h - '0');
                    else if (h >= 'a' && h <= 'f')
                        cp |= static_cast<uint32_t>(h - 'a' + 10);
                    else if (h >= 'A' && h <= 'F')
                        cp |= static_cast<uint32_t>(h - 'A' + 10);
                    else
                        fail(fmt::format("bad \\u escape: {} is not a hex digit", describe(h)));
                }
                // UTF-8 encode (surrogate pairs are kept as two code points: names only).
                if (cp < 0x80) {
                    out.push_back(static_cast<char>(cp));
                } else if (cp < 0x800) {
                    out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
                    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
                } else {
                    out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
                    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
                    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
                }
                break;
            }
            default:
                fail(fmt::format("bad escape \\{} in a string",
                                 c < 0 ? std::string("<end>") : describe(c)));
            }
        } else {
            out.push_back(static_cast<char>(c));
        }
        if (out.size() > kMaxString) fail("string longer than 64 MiB");
    }
}

void JsonReader::readLiteral(std::string& out)
{
    out.clear();
    while (true) {
        const int c = r_.peek();
        if ((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' ||
            (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
            out.push_back(static_cast<char>(r_.get()));
            if (out.size() > 64) fail("number or literal longer than 64 characters");
        } else {
            return;
        }
    }
}

void JsonReader::readValue(JsonDoc& doc)
{
    doc.nodes_.clear();
    parse(doc, 0);
}

uint32_t JsonReader::parse(JsonDoc& doc, int depth)
{
    if (depth > kMaxDepth) fail("JSON nested deeper than 128 levels");
    const int c = peekToken();
    const auto idx = static_cast<uint32_t>(doc.nodes_.size());
    doc.nodes_.emplace_back();
    switch (c) {
    case '{': {
        r_.get();
        doc.nodes_[idx].type = JType::Object;
        uint32_t last = JsonDoc::kNone;
        if (accept('}')) return idx;
        while (true) {
            std::string key = readString();
            expect(':', "':' after an object key");
            const uint32_t child = parse(doc, depth + 1);
            doc.nodes_[child].key = std::move(key);
            if (last == JsonDoc::kNone)
                doc.nodes_[idx].first = child;
            else
                doc.nodes_[last].next = child;
            last = child;
            if (accept(',')) continue;
            expect('}', "',' or '}' in an object");
            return idx;
        }
    }
    case '[': {
        r_.get();
        doc.nodes_[idx].type = JType::Array;
        uint32_t last = JsonDoc::kNone;
        if (accept(']')) return idx;
        while (true) {
            const uint32_t child = parse(doc, depth + 1);
            if (last == JsonDoc::kNone)
                doc.nodes_[idx].first = child;
            else
                doc.nodes_[last].next = child;
            last = child;
            if (accept(',')) continue;
            expect(']', "',' or ']' in an array");
            return idx;
        }
    }
    case '"': {
        r_.get();
        std::string s;
        readStringInto(s);
        doc.nodes_[idx].type = JType::String;
        doc.nodes_[idx].text = std::move(s);
        return idx;
    }
    default: {
        if (c < 0) fail("truncated: the input ends where a value was expected");
        std::string lit;
        readLiteral(lit);
        if (lit == "true" || lit == "false") {
            doc.nodes_[idx].type = JType::Bool;
            doc.nodes_[idx].boolean = lit == "true";
        } else if (lit == "null") {
            doc.nodes_[idx].type = JType::Null;
        } else if (!lit.empty() && (lit[0] == '-' || (lit[0] >= '0' && lit[0] <= '9'))) {
            double d = 0;
            auto [p, ec] = std::from_chars(lit.data(), lit.data() + lit.size(), d);
            if (p != lit.data() + lit.size() ||
                (ec != std::errc() && ec != std::errc::result_out_of_range))
                fail(fmt::format("'{}' is not a number", lit));
            doc.nodes_[idx].type = JType::Number;
            doc.nodes_[idx].text = std::move(lit);
        } else if (lit == "NaN" || lit == "Infinity") {
            doc.nodes_[idx].type = JType::Null;
        } else {
            fail(fmt::format("expected a value, found {}",
                             lit.empty() ? describe(c) : "'" + lit + "'"));
        }
        return idx;
    }
    }
}

void JsonReader::skipValue()
{
    JsonDoc tmp;
    // Values we skip are small top-level metadata; a huge one still parses in bounded depth.
    parse(tmp, 0);
}

} // namespace fs::import
