// File › What-if replay… (Ctrl+Shift+W): asks for allocator settings (WhatIfDialog), replays the
// open session under them on a worker thread with fs::alloc::whatIf (the same code as `fragscope
// whatif`), with progress and cancel, and opens the result as B in a CompareWindow: against the
// replay under the recorded settings (A, model against model) with the real run as a third thin
// curve, or, for the recorded settings alone, against the real run (A). The action is disabled,
// with the reason as its tooltip, when the open session has no framework-level requests to
// replay, while a recording is live, or while a replay runs.
#pragma once

#include "core/alloc/whatif.h"
#include "render/scene.h"
#include "widgets/jobs.h"

#include <QObject>
#include <QPointer>
#include <QString>
#include <QTemporaryDir>

#include <functional>
#include <memory>

class QAction;
class QProgressDialog;
class QWidget;

namespace fs::gui {

class CompareWindow;
class WhatIfDialog;

class WhatIfController : public QObject
{
    Q_OBJECT
public:
    using ErrorReporter = std::function<void(const QString& title, const QString& text)>;
    WhatIfController(QWidget* window, ErrorReporter errors);
    ~WhatIfController() override;
    QAction* action() const { return action_; }
    // The session the window shows (null: none).
    void setSession(const QString& path, std::shared_ptr<const render::Scene> scene);
    // Why the action is disabled ("" when it is enabled).
    QString disabledReason() const { return reason_; }
    // Opens the dialog (the action's slot).
    void showDialog();
    WhatIfDialog* dialog() const;
    // Replays the session under `spec` and opens the comparison (the dialog's Replay button).
    void start(const alloc::RunSpec& spec);
    void cancel();
    bool running() const { return jobs_->busy(); }
    QProgressDialog* progressDialog() const;

signals:
    void progress(int percent, const QString& stage);
    // The comparison window of a finished replay (shown; it deletes itself when closed).
    void compareOpened(fs::gui::CompareWindow* w);
    void failed(const QString& message);
    void cancelled();

private:
    void update();
    void finish(std::shared_ptr<const alloc::WhatIfResult> r, const QString& error,
                bool wasCancelled);

    QWidget* window_;
    ErrorReporter errors_;
    QAction* action_ = nullptr;
    QString path_;
    std::shared_ptr<const render::Scene> scene_;
    QString reason_;
    QPointer<WhatIfDialog> dialog_;
    QPointer<QProgressDialog> progress_;
    // The replay, on the long-job pool; closing the window drops its result.
    views::JobTracker* jobs_ =
        new views::JobTracker(this, views::JobTracker::Mode::Serial, &views::longJobPool());
    QTemporaryDir out_; // the replays' sessions, kept while the window lives
    int runs_ = 0;
};

} // namespace fs::gui
