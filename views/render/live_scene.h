// LiveScene: the scene of a session that a recording is still writing. Each refresh() brings
// the analysis engine up to the recorder's last commit (analysis::LiveEngine: only the new rows
// are read, the replay never restarts) and hands out a new Scene over it. A live view and the
// finished file therefore show the same figures and the same precursor ranking.
#pragma once

#include "render/scene.h"

#include "core/analysis/live.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace fs::render {

class LiveScene
{
public:
    // samples: about how many timeline samples each track gets.
    explicit LiveScene(std::string path, int samples = 1200);

    // The whole recording so far (Scene::live set). Throws SessionError while the file is not
    // a session yet. Calls are serialized.
    std::shared_ptr<const Scene> refresh(const std::vector<analysis::CollapseRule>& rules = {});

private:
    std::string path_;
    int samples_;
    std::mutex mu_;
    analysis::LiveEngine engine_;
};

} // namespace fs::render
