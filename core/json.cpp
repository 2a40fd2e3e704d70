#include "json.h"

#include <cmath>
#include <fmt/format.h>

namespace fs {

std::string JsonWriter::escape(std::string_view s)
{
    std::string r;
    r.reserve(s.size() + 2);
    for (const char c : s) {
        switch (c) {
        case '"':
            r += "\\\"";
            break;
        case '\\':
            r += "\\\\";
            break;
        case '\n':
            r += "\\n";
            break;
        case '\r':
            r += "\\r";
            break;
        case '\t':
            r += "\\t";
            break;
        default:
            if (static_cast<unsigned char>(c) < 0x20)
                r += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
            else
                r += c;
        }
    }
    return r;
}

void JsonWriter::newline()
{
    if (!pretty_) return;
    out_ += '\n';
    out_.append(first_.size() * 2, ' ');
}

void JsonWriter::separator()
{
    if (afterKey_) {
        afterKey_ = false;
        return;
    }
    if (!first_.empty()) {
        if (!first_.back()) out_ += ',';
        first_.back() = false;
        newline();
    }
}

JsonWriter& JsonWriter::beginObject()
{
    separator();
    out_ += '{';
    first_.push_back(true);
    return *this;
}

JsonWriter& JsonWriter::beginDocument()
{
    beginObject();
    return field("schema_version", kJsonSchemaVersion);
}

JsonWriter& JsonWriter::endObject()
{
    const bool empty = first_.back();
    first_.pop_back();
    if (!empty) newline();
    out_ += '}';
    return *this;
}

JsonWriter& JsonWriter::beginArray()
{
    separator();
    out_ += '[';
    first_.push_back(true);
    return *this;
}

JsonWriter& JsonWriter::endArray()
{
    const bool empty = first_.back();
    first_.pop_back();
    if (!empty) newline();
    out_ += ']';
    return *this;
}

JsonWriter& JsonWriter::key(std::string_view k)
{
    separator();
    out_ += '"';
    out_ += escape(k);
    out_ += pretty_ ? "\": " : "\":";
    afterKey_ = true;
    return *this;
}

JsonWriter& JsonWriter::value(std::string_view v)
{
    separator();
    out_ += '"';
    out_ += escape(v);
    out_ += '"';
    return *this;
}

JsonWriter& JsonWriter::value(int64_t v)
{
    separator();
    out_ += std::to_string(v);
    return *this;
}

JsonWriter& JsonWriter::value(uint64_t v)
{
    separator();
    out_ += std::to_string(v);
    return *this;
}

JsonWriter& JsonWriter::value(double v)
{
    separator();
    if (!std::isfinite(v))
        out_ += "null";
    else
        out_ += fmt::format("{}", v);
    return *this;
}

JsonWriter& JsonWriter::value(bool v)
{
    separator();
    out_ += v ? "true" : "false";
    return *this;
}

JsonWriter& JsonWriter::null()
{
    separator();
    out_ += "null";
    return *this;
}

} // namespace fs
