// Minimal streaming JSON writer for the CLI's --json output and reports.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fs {

// Version of the JSON every command prints (docs/json.md): bumped when a field is renamed or
// removed or changes meaning; a new field does not bump it.
constexpr int kJsonSchemaVersion = 2;

class JsonWriter
{
public:
    explicit JsonWriter(bool pretty = true) : pretty_(pretty) {}
    JsonWriter& beginObject();
    // A command's output: beginObject() and its first field, "schema_version".
    JsonWriter& beginDocument();
    JsonWriter& endObject();
    JsonWriter& beginArray();
    JsonWriter& endArray();
    JsonWriter& key(std::string_view k);
    JsonWriter& value(std::string_view v);
    JsonWriter& value(const char* v) { return value(std::string_view(v)); }
    JsonWriter& value(const std::string& v) { return value(std::string_view(v)); }
    JsonWriter& value(int64_t v);
    JsonWriter& value(uint64_t v);
    JsonWriter& value(int v) { return value(static_cast<int64_t>(v)); }
    JsonWriter& value(uint32_t v) { return value(static_cast<uint64_t>(v)); }
    JsonWriter& value(double v);
    JsonWriter& value(bool v);
    JsonWriter& null();
    template <typename T> JsonWriter& field(std::string_view k, const T& v)
    {
        key(k);
        return value(v);
    }
    const std::string& str() const { return out_; }
    static std::string escape(std::string_view s);

private:
    void separator();
    void newline();
    std::string out_;
    std::vector<bool> first_; // per open container: no element written yet
    bool pretty_;
    bool afterKey_ = false;
};

} // namespace fs
