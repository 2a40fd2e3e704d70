#include "live_scene.h"

namespace fs::render {

LiveScene::LiveScene(std::string path, int samples)
    : path_(path), samples_(samples), engine_(std::move(path))
{
}

std::shared_ptr<const Scene> LiveScene::refresh(const std::vector<analysis::CollapseRule>& rules)
{
    std::lock_guard lock(mu_);
    engine_.setRules(rules.empty() ? analysis::defaultCollapseRules() : rules);
    auto s = sceneFromEngine(engine_.refresh(), samples_);
    addPoolTracks(*s, samples_);
    s->live = true;
    return s;
}

} // namespace fs::render
