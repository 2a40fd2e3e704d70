#include "selection.h"

#include "render/scene.h"

namespace fs::views {

void SelectionModel::select(const Selection& s)
{
    if (s == cur_) return;
    back_.push_back(cur_);
    if (back_.size() > 200) back_.erase(back_.begin());
    forward_.clear();
    cur_ = s;
    emit changed(cur_);
}

void SelectionModel::selectFrame(const render::Scene& scene, int64_t frame)
{
    const analysis::FrameInfo* f = scene.frame(frame);
    if (!f) return;
    Selection s;
    s.frame = frame;
    if (f->start != kNoTime) { // a frame without a time range selects no time
        s.from = f->start;
        s.to = f->end;
    }
    select(s);
}

void SelectionModel::clear()
{
    back_.clear();
    forward_.clear();
    cur_ = {};
    emit changed(cur_);
}

void SelectionModel::back()
{
    if (back_.empty()) return;
    forward_.push_back(cur_);
    cur_ = back_.back();
    back_.pop_back();
    emit changed(cur_);
}

void SelectionModel::forward()
{
    if (forward_.empty()) return;
    back_.push_back(cur_);
    cur_ = forward_.back();
    forward_.pop_back();
    emit changed(cur_);
}

} // namespace fs::views
