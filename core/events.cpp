#include "events.h"

namespace fs {

std::string_view levelName(Level l)
{
    switch (l) {
    case Level::Driver:
        return "driver";
    case Level::Pool:
        return "pool";
    case Level::Framework:
        return "framework";
    }
    return "unknown";
}

bool parseLevel(std::string_view s, Level& out)
{
    for (int i = 0; i < kLevelCount; ++i) {
        if (levelName(static_cast<Level>(i)) == s) {
            out = static_cast<Level>(i);
            return true;
        }
    }
    return false;
}

std::string_view regionKindName(RegionKind k)
{
    switch (k) {
    case RegionKind::Segment:
        return "segment";
    case RegionKind::Pool:
        return "pool";
    case RegionKind::Vmm:
        return "vmm";
    case RegionKind::Driver:
        return "driver";
    }
    return "unknown";
}

} // namespace fs
