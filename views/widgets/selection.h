// One selection drives every view: a frame, a time range, an allocation, a precursor. Views
// listen to changed() and highlight or scroll to it; Alt+Left/Right walk the history.
#pragma once

#include "core/events.h"

#include <QObject>
#include <vector>

namespace fs::render {
struct Scene;
}

namespace fs::views {

struct Selection
{
    int64_t frame = -1;
    int64_t from = kNoTime; // selected time range
    int64_t to = kNoTime;
    int64_t allocId = -1;
    int precursor = -1;       // row in the collapse inspector
    int64_t marker = kNoTime; // the selected precursor's instant, marked on the heatmap
    bool operator==(const Selection&) const = default;
};

class SelectionModel : public QObject
{
    Q_OBJECT
public:
    explicit SelectionModel(QObject* parent = nullptr) : QObject(parent) {}
    const Selection& current() const { return cur_; }
    // Records the previous selection in the history (back) unless it is the same.
    void select(const Selection& s);
    // Selects a frame and its time range.
    void selectFrame(const render::Scene& scene, int64_t frame);
    void clear();
    bool canGoBack() const { return !back_.empty(); }
    bool canGoForward() const { return !forward_.empty(); }
    void back();
    void forward();

signals:
    void changed(const fs::views::Selection& s);

private:
    Selection cur_;
    std::vector<Selection> back_, forward_;
};

} // namespace fs::views
