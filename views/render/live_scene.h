// LiveScene: the scene of a session that a recording is still writing, kept up to date in
// increments. Each refresh() reads only what the recorder committed since the previous one (new
// rows by id, the frees of allocations that were live, the few regions and frames), advances a
// replay that never restarts, and hands out a new immutable Scene. A refresh therefore costs the
// new events plus one copy of the scene, not a re-read of the whole file: the GUI's live views
// stay at several refreshes a second on long recordings.
#pragma once

#include "render/scene.h"

#include <memory>
#include <string>
#include <vector>

namespace fs::render {

class LiveScene
{
public:
    // samples: about how many allocator-state samples the timelines get per level (the step
    // doubles as the recording grows, so the count stays between samples and 2 * samples).
    explicit LiveScene(std::string path, int samples = 1200);
    ~LiveScene();
    LiveScene(const LiveScene&) = delete;
    LiveScene& operator=(const LiveScene&) = delete;

    // The whole recording so far (Scene::live set, no analysis engine). Throws SessionError
    // while the file is not a session yet. Calls are serialized; a refresh is never cancelled
    // halfway (that would leave the increments inconsistent).
    std::shared_ptr<const Scene> refresh(const std::vector<CollapseRule>& rules = {});

    struct Stats
    {
        int64_t refreshes = 0;
        int64_t allocationRows = 0; // allocation rows read, over all refreshes
        int64_t liveLookups = 0;    // point lookups of allocations that were live
        int64_t fullCopies = 0;     // refreshes that copied the whole scene (none was free)
    };
    Stats stats() const;

private:
    struct Impl;
    std::unique_ptr<Impl> d_;
};

} // namespace fs::render
