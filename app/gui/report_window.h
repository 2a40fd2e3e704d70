// The report of the open session in the GUI (View › Report…): analysis::buildReport over the
// engine the main window already holds, computed on a worker thread, shown as the text
// `fragscope report` prints (report_format.h) and saved as text or JSON. No child process, no
// wait on the GUI thread; closing the window cancels the computation.
#pragma once

#include "core/analysis/report.h"
#include "render/render.h"

#include <QWidget>
#include <atomic>
#include <functional>
#include <memory>

class QLabel;
class QPlainTextEdit;
class QPushButton;

namespace fs::gui {

// Computes the report of scene's engine on a worker thread (under the engine's read lock: a live
// engine may refresh) and calls done on context's thread with the report, or null and the error;
// never when context is gone or cancel was raised. Rules: the scene's (the GUI's rules editor).
void computeReport(std::shared_ptr<const render::Scene> scene, analysis::ReportOptions options,
                   std::shared_ptr<std::atomic<bool>> cancel, QObject* context,
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

    std::shared_ptr<std::atomic<bool>> cancel_ = std::make_shared<std::atomic<bool>>(false);
    std::shared_ptr<const analysis::Report> report_;
    QString shown_;
    QLabel* status_ = nullptr;
    QPlainTextEdit* text_ = nullptr;
    QPushButton* saveText_ = nullptr;
    QPushButton* saveJson_ = nullptr;
};

} // namespace fs::gui
