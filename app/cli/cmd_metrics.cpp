// fragscope metrics import FILE METRICS.csv|.json: attach per-frame metrics computed elsewhere
// (optical flow, tracking, CLIP) to a session. Every row is checked first; any bad row is
// reported with its line number and nothing is written.
#include "command.h"
#include "core/store/frames.h"
#include "core/store/session.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

using namespace fs;
using namespace fs::cli;

namespace {

struct Row
{
    int64_t frame;
    std::string name;
    double value;
};

std::string trim(std::string s)
{
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
        s.pop_back();
    size_t i = 0;
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])))
        ++i;
    s.erase(0, i);
    if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
    return s;
}

std::vector<std::string> splitCsv(const std::string& line)
{
    std::vector<std::string> out;
    std::string cur;
    bool quoted = false;
    for (char c : line) {
        if (c == '"') quoted = !quoted;
        if (c == ',' && !quoted) {
            out.push_back(trim(cur));
            cur.clear();
        } else {
            cur += c;
        }
    }
    out.push_back(trim(cur));
    return out;
}

bool parseFrame(const std::string& s, int64_t& out)
{
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec == std::errc() && p == s.data() + s.size() && out >= 0) return true;
    double d = 0; // "17.0" from spreadsheets
    auto [q, ec2] = std::from_chars(s.data(), s.data() + s.size(), d);
    if (ec2 == std::errc() && q == s.data() + s.size() && d >= 0 && d == std::floor(d) &&
        d < 9e15) {
        out = static_cast<int64_t>(d);
        return true;
    }
    return false;
}

bool parseValue(const std::string& s, double& out)
{
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size() && !s.empty() && std::isfinite(out);
}

bool validName(const std::string& n)
{
    if (n.empty() || n.size() > 200) return false;
    for (char c : n)
        if (std::iscntrl(static_cast<unsigned char>(c))) return false;
    return true;
}

void readCsv(const std::string& text, std::vector<Row>& rows, std::vector<std::string>& errors)
{
    std::istringstream in(text);
    std::string line;
    int lineNo = 0;
    std::vector<std::string> header;
    int frameCol = -1, metricCol = -1, valueCol = -1;
    bool longForm = false;
    while (std::getline(in, line)) {
        ++lineNo;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (lineNo == 1 && line.starts_with("\xEF\xBB\xBF")) line.erase(0, 3);
        if (trim(line).empty() || line.starts_with("#")) continue;
        const auto cells = splitCsv(line);
        if (header.empty()) {
            header = cells;
            for (size_t i = 0; i < header.size(); ++i) {
                std::string h = header[i];
                for (char& c : h)
                    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
                if (h == "frame")
                    frameCol = static_cast<int>(i);
                else if (h == "metric" || h == "name")
                    metricCol = static_cast<int>(i);
                else if (h == "value")
                    valueCol = static_cast<int>(i);
            }
            if (frameCol < 0) {
                errors.push_back(fmt::format("line {}: header has no 'frame' column", lineNo));
                return;
            }
            longForm = metricCol >= 0 && valueCol >= 0;
            if (!longForm && header.size() < 2) {
                errors.push_back(
                    fmt::format("line {}: header needs frame,metric,value or frame plus "
                                "one column per metric",
                                lineNo));
                return;
            }
            continue;
        }
        if (cells.size() != header.size()) {
            errors.push_back(fmt::format("line {}: {} fields, the header has {}", lineNo,
                                         cells.size(), header.size()));
            continue;
        }
        int64_t frame = 0;
        if (!parseFrame(cells[static_cast<size_t>(frameCol)], frame)) {
            errors.push_back(fmt::format("line {}: invalid frame '{}'", lineNo,
                                         cells[static_cast<size_t>(frameCol)]));
            continue;
        }
        if (longForm) {
            const std::string& name = cells[static_cast<size_t>(metricCol)];
            double v = 0;
            if (!validName(name))
                errors.push_back(fmt::format("line {}: invalid metric name '{}'", lineNo, name));
            else if (!parseValue(cells[static_cast<size_t>(valueCol)], v))
                errors.push_back(fmt::format("line {}: invalid value '{}'", lineNo,
                                             cells[static_cast<size_t>(valueCol)]));
            else
                rows.push_back({frame, name, v});
            continue;
        }
        for (size_t i = 0; i < cells.size(); ++i) {
            if (static_cast<int>(i) == frameCol || cells[i].empty())
                continue; // an empty cell: that metric was not measured for this frame
            double v = 0;
            if (!validName(header[i]))
                errors.push_back(fmt::format("line {}: invalid metric name '{}' in the header",
                                             lineNo, header[i]));
            else if (!parseValue(cells[i], v))
                errors.push_back(fmt::format("line {}: column '{}': invalid value '{}'", lineNo,
                                             header[i], cells[i]));
            else
                rows.push_back({frame, header[i], v});
        }
    }
    if (header.empty())
        errors.push_back(
            "no header line (expected frame,metric,value or frame plus one column per metric)");
}

// A small JSON reader for the two accepted shapes; it tracks lines for error messages.
class JsonReader
{
public:
    explicit JsonReader(const std::string& s) : s_(s) {}

    struct Value
    {
        enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
        double number = 0;
        std::string text;
        std::vector<Value> items;
        std::vector<std::pair<std::string, Value>> fields;
        int line = 0;
    };

    Value parse()
    {
        Value v = value(0);
        ws();
        if (i_ != s_.size()) fail("unexpected text after the JSON value");
        return v;
    }
    int line() const { return line_; }

private:
    [[noreturn]] void fail(const std::string& what)
    {
        throw std::runtime_error(fmt::format("line {}: {}", line_, what));
    }
    void ws()
    {
        while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) {
            if (s_[i_] == '\n') ++line_;
            ++i_;
        }
    }
    Value value(int depth)
    {
        if (depth > 64) fail("nesting too deep");
        ws();
        if (i_ >= s_.size()) fail("unexpected end of file");
        Value v;
        v.line = line_;
        const char c = s_[i_];
        if (c == '{') {
            v.kind = Value::Object;
            ++i_;
            ws();
            if (i_ < s_.size() && s_[i_] == '}') {
                ++i_;
                return v;
            }
            while (true) {
                ws();
                if (i_ >= s_.size() || s_[i_] != '"') fail("expected a string key");
                std::string k = str();
                ws();
                if (i_ >= s_.size() || s_[i_] != ':') fail("expected ':'");
                ++i_;
                v.fields.emplace_back(std::move(k), value(depth + 1));
                ws();
                if (i_ < s_.size() && s_[i_] == ',') {
                    ++i_;
                    continue;
                }
                if (i_ < s_.size() && s_[i_] == '}') {
                    ++i_;
                    return v;
                }
                fail("expected ',' or '}'");
            }
        }
        if (c == '[') {
            v.kind = Value::Array;
            ++i_;
            ws();
            if (i_ < s_.size() && s_[i_] == ']') {
                ++i_;
                return v;
            }
            while (true) {
                v.items.push_back(value(depth + 1));
                ws();
                if (i_ < s_.size() && s_[i_] == ',') {
                    ++i_;
                    continue;
                }
                if (i_ < s_.size() && s_[i_] == ']') {
                    ++i_;
                    return v;
                }
                fail("expected ',' or ']'");
            }
        }
        if (c == '"') {
            v.kind = Value::String;
            v.text = str();
            return v;
        }
        for (const char* lit : {"true", "false", "null"}) {
            const std::string l(lit);
            if (s_.compare(i_, l.size(), l) == 0) {
                i_ += l.size();
                v.kind = l == "null" ? Value::Null : Value::Bool;
                v.number = l == "true";
                return v;
            }
        }
        size_t j = i_;
        while (j < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[j])) || s_[j] == '-' ||
                                 s_[j] == '+' || s_[j] == '.' || s_[j] == 'e' || s_[j] == 'E'))
            ++j;
        auto [p, ec] = std::from_chars(s_.data() + i_, s_.data() + j, v.number);
        if (j == i_ || ec != std::errc() || p != s_.data() + j) fail("invalid value");
        v.kind = Value::Number;
        i_ = j;
        return v;
    }
    std::string str()
    {
        ++i_; // opening quote
        std::string out;
        while (i_ < s_.size() && s_[i_] != '"') {
            char c = s_[i_++];
            if (c == '\n') fail("newline inside a string");
            if (c == '\\') {
                if (i_ >= s_.size()) break;
                const char e = s_[i_++];
                switch (e) {
                case 'n':
                    c = '\n';
                    break;
                case 't':
                    c = '\t';
                    break;
                case 'u': // keep \uXXXX escapes as '?': metric names are plain ASCII in practice
                    i_ = std::min(s_.size(), i_ + 4);
                    c = '?';
                    break;
                default:
                    c = e;
                    break;
                }
            }
            out += c;
        }
        if (i_ >= s_.size()) fail("unterminated string");
        ++i_;
        return out;
    }
    const std::string& s_;
    size_t i_ = 0;
    int line_ = 1;
};

void readJson(const std::string& text, std::vector<Row>& rows, std::vector<std::string>& errors)
{
    JsonReader::Value root;
    try {
        root = JsonReader(text).parse();
    } catch (const std::runtime_error& e) {
        errors.push_back(e.what());
        return;
    }
    const JsonReader::Value* list = &root;
    if (root.kind == JsonReader::Value::Object) {
        list = nullptr;
        for (const auto& [k, v] : root.fields)
            if (k == "frames") list = &v;
        if (!list) {
            errors.push_back(fmt::format(
                "line {}: expected an array of per-frame objects or {{\"frames\": [...]}}",
                root.line));
            return;
        }
    }
    if (list->kind != JsonReader::Value::Array) {
        errors.push_back(
            fmt::format("line {}: 'frames' must be an array of per-frame objects", list->line));
        return;
    }
    for (size_t i = 0; i < list->items.size(); ++i) {
        const auto& obj = list->items[i];
        if (obj.kind != JsonReader::Value::Object) {
            errors.push_back(fmt::format("line {}: frame entry {} is not an object", obj.line, i));
            continue;
        }
        // The frame is the entry's "frame" (or "index") field, else its position in the array.
        int64_t frame = static_cast<int64_t>(i);
        for (const auto& [k, v] : obj.fields)
            if (k == "frame" || k == "index") {
                if (v.kind != JsonReader::Value::Number || v.number < 0 ||
                    v.number != std::floor(v.number)) {
                    errors.push_back(fmt::format("line {}: invalid frame number", v.line));
                    frame = -1;
                } else {
                    frame = static_cast<int64_t>(v.number);
                }
            }
        if (frame < 0) continue;
        for (const auto& [k, v] : obj.fields) {
            if (k == "frame" || k == "index" || v.kind == JsonReader::Value::Null) continue;
            if (v.kind != JsonReader::Value::Number || !std::isfinite(v.number))
                errors.push_back(fmt::format("line {}: metric '{}' of frame {} is not a number",
                                             v.line, k, frame));
            else if (!validName(k))
                errors.push_back(fmt::format("line {}: invalid metric name '{}'", v.line, k));
            else
                rows.push_back({frame, k, v.number});
        }
    }
}

int runImport(Args& a)
{
    a.expectPositional(2, "FILE METRICS");
    const std::string session = a.positional()[0], metrics = a.positional()[1];
    { // validates the session (magic, version, integrity) before anything else
        Session s = Session::open(session);
        (void)s;
    }
    std::ifstream in(metrics, std::ios::binary);
    if (!in) throw SessionError(metrics, "cannot open the metrics file");
    std::stringstream buf;
    buf << in.rdbuf();
    const std::string text = buf.str();
    if (text.size() > (1u << 30)) throw SessionError(metrics, "metrics file larger than 1 GiB");
    std::vector<Row> rows;
    std::vector<std::string> errors;
    size_t first = text.find_first_not_of(" \t\r\n");
    if (text.starts_with("\xEF\xBB\xBF")) first = text.find_first_not_of(" \t\r\n", 3);
    const bool json = first != std::string::npos && (text[first] == '[' || text[first] == '{');
    if (json)
        readJson(text, rows, errors);
    else
        readCsv(text, rows, errors);
    if (rows.empty() && errors.empty()) errors.push_back("no metric values found");
    if (!errors.empty()) {
        constexpr size_t kShown = 20;
        for (size_t i = 0; i < errors.size() && i < kShown; ++i)
            fmt::print(stderr, "{}: {}\n", metrics, errors[i]);
        if (errors.size() > kShown)
            fmt::print(stderr, "{}: ... and {} more\n", metrics, errors.size() - kShown);
        fmt::print(stderr, "{}: nothing imported ({} bad {})\n", metrics, errors.size(),
                   errors.size() == 1 ? "entry" : "entries");
        return BadInput;
    }
    const std::string source = std::filesystem::path(metrics).filename().string();
    std::vector<store::FrameMetricRow> values;
    values.reserve(rows.size());
    for (const Row& r : rows)
        values.push_back({r.frame, r.name, r.value, source});
    store::writeFrameMetrics(session, values);
    std::set<int64_t> frames;
    std::set<std::string> names;
    for (const Row& r : rows) {
        frames.insert(r.frame);
        names.insert(r.name);
    }
    fmt::print("{}: imported {} values ({} metrics over {} frames) from {}\n", session, rows.size(),
               names.size(), frames.size(), source);
    return Ok;
}

} // namespace

FRAGSCOPE_COMMAND({
    .name = "metrics import",
    .synopsis = "FILE METRICS.csv|METRICS.json",
    .summary = "Attach per-frame quality metrics computed elsewhere (CSV or JSON) to a session",
    .options = {},
    .details =
        "CSV: a header 'frame,metric,value' (one value per line), or 'frame' plus one column per\n"
        "metric (empty cells are skipped). JSON: an array of per-frame objects, or\n"
        "{\"frames\": [...]}; each object's 'frame' field (else its position) is the frame.\n"
        "Every row is checked first: bad rows are listed with their line numbers and nothing\n"
        "is written (exit status 2). Values replace earlier ones of the same frame and metric;\n"
        "the source column records the file name.",
    .run = runImport,
    .order = 43,
});
