// Skeleton: the API compiles and returns empty values; the replay index lands next.
#include "engine.h"

#include "core/session.h"

namespace fs::analysis {

struct Engine::Impl {
    std::string path;
    SessionSummary summary;
    Caveats caveats;
    std::vector<FrameInfo> frames;
    std::vector<CollapseRule> rules;
    std::vector<Collapse> collapses;
};

Engine::Engine() : d_(std::make_unique<Impl>()) {}
Engine::~Engine() = default;

std::shared_ptr<const Engine> Engine::open(const std::string& path, LoadOptions opts)
{
    std::shared_ptr<Engine> e(new Engine());
    Session s = Session::open(path);
    e->d_->path = path;
    e->d_->summary = s.summary();
    e->d_->rules = opts.rules;
    return e;
}

const std::string& Engine::path() const { return d_->path; }
const SessionSummary& Engine::summary() const { return d_->summary; }
const Caveats& Engine::caveats() const { return d_->caveats; }
int64_t Engine::timeBegin() const { return d_->summary.timeBegin; }
int64_t Engine::timeEnd() const { return d_->summary.timeEnd; }
std::vector<Track> Engine::tracks() const { return {}; }
std::optional<Track> Engine::defaultTrack(uint32_t) const { return std::nullopt; }
std::vector<RegionInfo> Engine::regions(uint32_t, Level) const { return {}; }
State Engine::stateAt(uint32_t device, Level level, int64_t t) const
{
    State s;
    s.device = device;
    s.level = level;
    s.time = t;
    return s;
}
State Engine::stateAtFullReplay(uint32_t device, Level level, int64_t t) const
{
    return stateAt(device, level, t);
}
std::vector<Fragment> Engine::fragmentsAt(uint32_t, Level, int64_t) const { return {}; }
std::vector<AllocationInfo> Engine::liveAllocationsAt(uint32_t, Level, int64_t) const { return {}; }
std::optional<AllocationInfo> Engine::allocationAt(uint32_t, Level, int64_t, uint64_t) const
{
    return std::nullopt;
}
std::optional<AllocationInfo> Engine::allocation(int64_t) const { return std::nullopt; }
Histogram Engine::histogramOver(uint32_t, Level, int64_t, int64_t, int) const { return {}; }
Timeline Engine::timeline(const TimelineOptions&) const { return {}; }
std::vector<Burst> Engine::bursts(uint32_t, Level, int64_t, int64_t, int64_t) const { return {}; }
Trend Engine::trend(const Timeline&, const std::string&, int64_t, int64_t) const { return {}; }
const std::vector<FrameInfo>& Engine::frames() const { return d_->frames; }
const std::vector<CollapseRule>& Engine::rules() const { return d_->rules; }
const std::vector<Collapse>& Engine::collapses() const { return d_->collapses; }
std::vector<Collapse> Engine::collapsesWith(const std::vector<CollapseRule>&) const { return {}; }
std::optional<CollapseReport> Engine::collapseReport(int64_t) const { return std::nullopt; }
CollapseReport Engine::frameReport(int64_t) const { return {}; }
std::vector<AddressJump> Engine::addressJumps(uint32_t, Level, int64_t) const { return {}; }
std::vector<KernelSummary> Engine::kernelsInFrame(int64_t) const { return {}; }
std::vector<std::string> Engine::frameAllocatorMetrics() { return {}; }
std::vector<double> Engine::frameSeries(uint32_t, Level, const std::string&) const { return {}; }
std::vector<Correlation> Engine::correlations() const { return {}; }
Correlation Engine::correlation(uint32_t, Level, const std::string&, const std::string&) const
{
    return {};
}
AddressLayout Engine::layout(uint32_t, Level) const { return {}; }
HeatmapRaster Engine::heatmap(const HeatmapRequest&) const { return {}; }
MemmapRaster Engine::memmap(const MemmapRequest&) const { return {}; }

int64_t parseTime(const Engine&, const std::string&) { return 0; }

} // namespace fs::analysis
