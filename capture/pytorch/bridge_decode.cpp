#include "bridge_decode.h"

#include <cstring>

namespace fs::agent {

namespace {

class Reader
{
public:
    explicit Reader(std::string_view b) : b_(b) {}
    template <class T> bool get(T& v)
    {
        if (b_.size() - pos_ < sizeof v) return false;
        std::memcpy(&v, b_.data() + pos_, sizeof v);
        pos_ += sizeof v;
        return true;
    }
    bool bytes(size_t n, std::string_view& out)
    {
        if (b_.size() - pos_ < n) return false;
        out = b_.substr(pos_, n);
        pos_ += n;
        return true;
    }
    bool atEnd() const { return pos_ == b_.size(); }
    size_t pos() const { return pos_; }

private:
    std::string_view b_;
    size_t pos_ = 0;
};

constexpr uint32_t kMaxStrings = 1u << 24;
constexpr uint32_t kMaxFrames = 4096;

} // namespace

const std::string& BridgeDecoder::text(uint32_t id) const
{
    static const std::string empty;
    return id < strings_.size() ? strings_[id] : empty;
}

bool BridgeDecoder::decode(std::string_view bytes, BridgeBatch& out, std::string& err)
{
    Reader r(bytes);
    char status = 0;
    if (!r.get(status)) {
        err = "empty step result";
        return false;
    }
    out.status = status;
    auto bad = [&](const char* what) {
        err = std::string("bridge record at byte ") + std::to_string(r.pos()) + ": " + what;
        return false;
    };
    while (!r.atEnd()) {
        char tag = 0;
        r.get(tag);
        switch (tag) {
        case 'S': {
            uint32_t id = 0, n = 0;
            std::string_view s;
            if (!r.get(id) || !r.get(n) || !r.bytes(n, s) || id == 0 || id > kMaxStrings)
                return bad("malformed string");
            if (id >= strings_.size()) strings_.resize(id + 1);
            strings_[id] = std::string(s);
            break;
        }
        case 'K': {
            uint32_t id = 0, n = 0;
            if (!r.get(id) || !r.get(n) || n > kMaxFrames) return bad("malformed stack");
            std::vector<uint32_t> ids(n);
            for (auto& f : ids)
                if (!r.get(f)) return bad("truncated stack");
            stacks_[id] = std::move(ids);
            break;
        }
        case 'E': {
            uint8_t type = 0, kind = 0, flags = 0;
            uint16_t device = 0;
            uint32_t stream = 0, name = 0, stack = 0;
            uint64_t addr = 0, size = 0, aux = 0, requested = 0;
            int64_t t = 0, end = 0;
            if (!r.get(type) || !r.get(kind) || !r.get(device) || !r.get(stream) || !r.get(addr) ||
                !r.get(size) || !r.get(aux) || !r.get(requested) || !r.get(t) || !r.get(end) ||
                !r.get(name) || !r.get(stack) || !r.get(flags))
                return bad("truncated event");
            if (type >= proto::ev::Count || kind >= proto::ev::KindCount)
                return bad("event of unknown type or region kind");
            SideEvent s;
            s.e.type = type;
            s.e.regionKind = kind;
            s.e.level = proto::ev::LevelFramework;
            s.e.device = device;
            s.e.stream = stream;
            s.e.address = addr;
            s.e.size = size;
            s.e.aux = aux;
            s.e.requestedSize = requested;
            s.e.time = t - offset_;
            s.e.endTime = end != 0 ? end - offset_ : 0;
            s.e.flags = flags;
            s.text = text(name);
            if (stack != 0) {
                auto it = stacks_.find(stack);
                if (it == stacks_.end()) return bad("event names an undefined stack");
                s.frames.reserve(it->second.size());
                for (uint32_t f : it->second)
                    s.frames.push_back(text(f));
            }
            out.events.push_back(std::move(s));
            break;
        }
        case 'H': {
            int64_t value = 0, t = 0;
            uint32_t kind = 0, detail = 0;
            if (!r.get(value) || !r.get(kind) || !r.get(detail) || !r.get(t))
                return bad("truncated health record");
            out.health.push_back({t - offset_, value, text(kind), text(detail)});
            break;
        }
        case 'M': {
            uint32_t k = 0, v = 0;
            if (!r.get(k) || !r.get(v)) return bad("truncated meta record");
            out.meta.emplace_back(text(k), text(v));
            break;
        }
        case 'L': {
            uint32_t n = 0;
            std::string_view s;
            if (!r.get(n) || !r.bytes(n, s)) return bad("truncated log record");
            out.logs.emplace_back(s);
            break;
        }
        default:
            return bad("unknown record tag");
        }
    }
    return true;
}

} // namespace fs::agent
