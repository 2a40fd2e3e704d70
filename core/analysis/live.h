// fs::analysis::LiveEngine: the analysis engine over a session a recording is still writing,
// brought up to date in increments. Each refresh() reads only what the recorder committed since
// the previous one (allocation rows with a larger id, the frees of allocations that were live,
// the few regions and frames), appends them to the engine's sorted streams and carries its
// checkpoint walk on from where it stopped: the replay never restarts and no allocation record
// is copied. The finished file opened with Engine::open gives the same figures and the same
// precursor ranking (docs/analysis.md "Live sessions").
#pragma once

#include "engine.h"

#include <memory>
#include <string>

namespace fs::analysis {

class LiveEngine
{
public:
    // opts.useCache and opts.integrityCheck are ignored: a file being written is neither checked
    // nor written to.
    explicit LiveEngine(std::string path, LoadOptions opts = {});
    ~LiveEngine();
    LiveEngine(const LiveEngine&) = delete;
    LiveEngine& operator=(const LiveEngine&) = delete;

    // Brings the engine up to the recorder's last commit and returns it: the same object on every
    // call, changed in place under its exclusive lock (other threads query it under
    // Engine::readLock). Throws SessionError while the file is not a session yet. Calls are
    // serialized. Events that land before ones already read (a late commit of an earlier time),
    // a new track or a changed expandable segment make it index the file again
    // (LoadInfo::liveRebuilds); otherwise a refresh costs the new rows.
    std::shared_ptr<const Engine> refresh();
    // Collapse rules of the next refreshes (the GUI's rule editor).
    void setRules(std::vector<CollapseRule> rules);

private:
    struct Impl;
    std::unique_ptr<Impl> d_;
};

} // namespace fs::analysis
