// Plot redraws, one per turn of the GUI thread's event loop.
//
// QCustomPlot's own queued replot posts an event, and Qt delivers every posted event of a turn
// before it looks at input or timers: a scene hand-off that queued the timeline's, the
// histogram's and the graphs panel's replots (15-25 ms each on a long run) kept the loop from
// input for their sum. Plots queued here are redrawn one at a time from a zero-length timer,
// each on a turn of its own, so the longest wait for input is one plot's redraw.
#pragma once

class QCustomPlot;

namespace fs::views {

// Redraws `plot` (all its layers) on a later turn of the event loop; a plot already waiting
// keeps its place. A plot deleted meanwhile is skipped.
void queueReplot(QCustomPlot* plot);
// Redraws every waiting plot now (before a screenshot: grab() paints the last redraw).
void flushReplots();
// Whether `plot` waits for its redraw.
bool replotPending(const QCustomPlot* plot);
// Plots waiting.
int pendingReplots();

} // namespace fs::views
