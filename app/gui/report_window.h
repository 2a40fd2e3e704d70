// The report of the open session in the GUI (View › Report…): analysis::buildReport over the
// engine the main window already holds, computed on a worker thread, shown as the text
// `fragscope report` prints (report_format.h) and saved as text or JSON. No child process, no
// wait on the GUI thread; closing the window cancels the computation.
#pragma once

#include "core/analysis/report.h"
#include "render/render.h"
#include "widgets/jobs.h"

#include <QWidget>
#include <functional>
#include <memory>

class QLabel;
class QPlainTextEdit;
class QPushButton;

namespace fs::gui {

// Computes the report of scene's engine as a job of `jobs` (under the engine's read lock: a live
// engine may refresh) and calls done on the GUI thread with the report, or null and the error;
// never when the job was cancelled or superseded (the tracker's rules). Rules: the scene's (the
// GUI's rules editor).
void computeReport(views::JobTracker& jobs, std::shared_ptr<const render::Scene> scene,
                   analysis::ReportOptions options,
                   std::function<void(std::shared_ptr<const analysis::Report>, QString)> done);

class ReportWindow : public QWidget
{
    Q_OBJECT
public:
    ReportWindow(std::shared_ptr<const render::Scene> scene, analysis::ReportOptions options,
                 QWidget* parent = nullptr);
    ~ReportWindow() override;
    // Null until computed (or when it failed).
    std::shared_ptr<const analysis::Report> report() const { return report_; }
    QString text() const; // what is shown: reportText of the report ("" until computed)
    QPlainTextEdit* textView() const { return text_; }

signals:
    // Emitted once: ok, or the error.
    void computed(bool ok, const QString& error);

private:
    void save(bool json);

    views::JobTracker* jobs_ =
        new views::JobTracker(this, views::JobTracker::Mode::Replace, &views::longJobPool());
    std::shared_ptr<const analysis::Report> report_;
    QString shown_;
    QLabel* status_ = nullptr;
    QPlainTextEdit* text_ = nullptr;
    QPushButton* saveText_ = nullptr;
    QPushButton* saveJson_ = nullptr;
};

} // namespace fs::gui
