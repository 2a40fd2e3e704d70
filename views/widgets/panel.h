// What every view of the open session in the main window shares (docs/architecture.md "Add a GUI
// panel"): the main window keeps its panels in one list (MainWindow::panels()) and hands each a
// scene through this interface, when it follows it, instead of naming the panel in each place a
// scene changes. tst_gui (everyPanelIsListed) checks that every Panel the main window builds is
// in its list.
#pragma once

#include <memory>
#include <utility> // std::move, in the panels' showScene

namespace fs::render {
struct Scene;
}

namespace fs::views {

class Panel
{
public:
    // When a panel takes a scene.
    enum class Follows {
        Session, // each new scene (a session opened, refreshed or re-ruled); the track is ignored
        Track,   // each new scene and each change of the track
    };
    virtual ~Panel() = default;
    virtual void showScene(std::shared_ptr<const render::Scene> scene, int track) = 0;
    virtual Follows follows() const = 0;
    // Whether it reads the allocation records or the OOM diagnoses, which come with the complete
    // scene after the first look (SessionLoader::completed): then it takes that scene too.
    virtual bool needsCompleteScene() const { return false; }

protected:
    Panel() = default;
    Panel(const Panel&) = default;
    Panel& operator=(const Panel&) = default;
};

} // namespace fs::views
