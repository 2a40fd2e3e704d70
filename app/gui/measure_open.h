// fragscope-gui --measure-open FILE: open a session as a user would, draw the first heatmap,
// zoom and pan it, and print one JSON line of timings (docs/gui.md "Measuring").
#pragma once

#include <QString>

namespace fs::gui {

class MainWindow;

// Runs the measurement on w (shown at 1920x1080), prints the JSON line on stdout; returns the
// process exit status (0, or 2 when the file does not open).
int measureOpen(MainWindow& w, const QString& file);

} // namespace fs::gui
