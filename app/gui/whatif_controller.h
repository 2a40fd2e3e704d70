// File › What-if replay… (Ctrl+Shift+W): opens WhatIfDialog and ranks, on a worker, the recorded
// settings and the default alternatives (fs::alloc::whatIf with rankAlternatives: what `fragscope
// whatif SESSION` prints), handed to the dialog as one immutable result, with progress; the
// ranking is kept while the session is unchanged. The ranked row or the settings the user then
// chooses are replayed in full on a worker thread with fs::alloc::whatIf (the same code as
// `fragscope whatif`), with progress and cancel, and the result opens as B in a CompareWindow:
// against the replay under the recorded settings (A, model against model) with the real run as a
// third thin curve, or, for the recorded settings alone, against the real run (A). The action is
// disabled, with the reason as its tooltip, when the open session has no framework-level requests
// to replay, while a recording is live, or while a replay runs.
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
    // The open session's ranking (null until computed).
    std::shared_ptr<const alloc::WhatIfResult> ranking() const { return ranked_; }
    bool rankingRunning() const { return rankJobs_->busy(); }

signals:
    void progress(int percent, const QString& stage);
    // The comparison window of a finished replay (shown; it deletes itself when closed).
    void compareOpened(fs::gui::CompareWindow* w);
    void failed(const QString& message);
    void cancelled();
    // The ranking reached the dialog (or could not be computed: rankingFailed).
    void rankingReady();
    void rankingFailed(const QString& message);

private:
    void update();
    void rank();
    // The session as the ranking is of it: its path and modification time.
    QString rankKey() const;
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
    // The ranking, on the long-job pool too; a newer one (or closing the dialog) cancels it.
    views::JobTracker* rankJobs_ =
        new views::JobTracker(this, views::JobTracker::Mode::Replace, &views::longJobPool());
    std::shared_ptr<const alloc::WhatIfResult> ranked_;
    QString rankedKey_;
    QTemporaryDir out_; // the replays' sessions, kept while the window lives
    int runs_ = 0;
};

} // namespace fs::gui
