#include "whatif_controller.h"

#include "compare_window.h"
#include "whatif_dialog.h"

#include <QAction>
#include <QApplication>
#include <QDateTime>
#include <QFileInfo>
#include <QProgressDialog>
#include <QWidget>

#include <algorithm>

namespace fs::gui {

WhatIfController::WhatIfController(QWidget* window, ErrorReporter errors)
    : QObject(window), window_(window), errors_(std::move(errors))
{
    action_ = new QAction(tr("&What-if replay…"), this);
    action_->setShortcut(QKeySequence(tr("Ctrl+Shift+W")));
    action_->setStatusTip(tr("Replay the session's allocator requests under other "
                             "allocator settings (PYTORCH_ALLOC_CONF) and compare"));
    connect(action_, &QAction::triggered, this, &WhatIfController::showDialog);
    connect(jobs_, &views::JobTracker::progress, this, [this](int pct, const QString& stage) {
        if (progress_) {
            progress_->setValue(pct);
            progress_->setLabelText(stage);
        }
        emit progress(pct, stage);
    });
    connect(rankJobs_, &views::JobTracker::progress, this, [this](int pct, const QString& stage) {
        if (dialog_) dialog_->setRankingProgress(pct, stage);
    });
    update();
}

WhatIfController::~WhatIfController() = default; // the tracker stops the replay, drops its result

WhatIfDialog* WhatIfController::dialog() const
{
    return dialog_;
}

QProgressDialog* WhatIfController::progressDialog() const
{
    return progress_;
}

void WhatIfController::setSession(const QString& path, std::shared_ptr<const render::Scene> scene)
{
    if (path != path_) {
        rankJobs_->cancel();
        ranked_.reset();
    }
    path_ = path;
    scene_ = std::move(scene);
    update();
}

QString WhatIfController::rankKey() const
{
    return path_ + QLatin1Char('@') +
           QString::number(QFileInfo(path_).lastModified().toMSecsSinceEpoch());
}

void WhatIfController::rank()
{
    const std::string session = path_.toStdString();
    const QString key = rankKey();
    rankJobs_->start(
        [session](const views::Job& job) -> std::shared_ptr<const alloc::WhatIfResult> {
            alloc::WhatIfOptions o;
            o.session = session;
            o.rankAlternatives = true; // no runs of its own: `fragscope whatif SESSION`
            o.cancel = job.cancelFlag();
            o.percent = [&job](int pct, const std::string& stage) {
                job.progress(pct, QString::fromStdString(stage));
            };
            try {
                return std::make_shared<const alloc::WhatIfResult>(alloc::whatIf(o));
            } catch (const alloc::Cancelled&) {
                return nullptr; // a cancelled job delivers nothing
            }
        },
        [this, key](std::shared_ptr<const alloc::WhatIfResult> r) {
            if (!r) return;
            ranked_ = std::move(r);
            rankedKey_ = key;
            if (dialog_) dialog_->setRanking(ranked_);
            emit rankingReady();
        },
        [this](const QString& error) {
            if (dialog_) dialog_->setRankingFailed(error);
            emit rankingFailed(error);
        });
}

void WhatIfController::update()
{
    const bool framework =
        scene_ && std::any_of(scene_->tracks.begin(), scene_->tracks.end(), [](const auto& l) {
            return l.level == Level::Framework && l.allocations > 0;
        });
    if (!scene_)
        reason_ = tr("Open a session first.");
    else if (scene_->live)
        reason_ = tr("A recording is still being written: replay it once it has stopped.");
    else if (!framework)
        reason_ = tr("This session has no framework-level (caching allocator) requests to "
                     "replay: what-if needs a PyTorch snapshot, a capture with PyTorch's "
                     "allocator events, or a simulated run.");
    else if (running())
        reason_ = tr("A what-if replay is running.");
    else
        reason_.clear();
    action_->setEnabled(reason_.isEmpty());
    action_->setToolTip(reason_.isEmpty() ? action_->statusTip() : reason_);
}

void WhatIfController::showDialog()
{
    if (!reason_.isEmpty()) {
        errors_(tr("What-if replay"), reason_);
        return;
    }
    alloc::RecordedSettings rec;
    try {
        rec = alloc::recordedSettings(path_.toStdString());
    } catch (const std::exception& e) {
        errors_(tr("What-if replay"), QString::fromStdString(e.what()));
        return;
    }
    if (dialog_) dialog_->deleteLater();
    dialog_ = new WhatIfDialog(path_, rec, window_);
    dialog_->setAttribute(Qt::WA_DeleteOnClose);
    connect(dialog_, &QDialog::accepted, this, [this] {
        alloc::RunSpec spec;
        if (dialog_ && dialog_->chosenSpec(spec)) start(spec);
    });
    // A ranking still running when the dialog closes is not needed any more.
    connect(dialog_, &QDialog::finished, rankJobs_, &views::JobTracker::cancel);
    if (ranked_ && rankedKey_ == rankKey())
        dialog_->setRanking(ranked_);
    else
        rank();
    dialog_->open();
}

void WhatIfController::start(const alloc::RunSpec& spec)
{
    if (running() || path_.isEmpty()) return;
    if (!out_.isValid()) {
        errors_(tr("What-if replay"), tr("Cannot create a temporary folder for the replay."));
        return;
    }
    alloc::WhatIfOptions o;
    o.session = path_.toStdString();
    // The recorded run is always replayed first (the fidelity check); with the recorded
    // settings and PyTorch's policy that run is the one kept. With other settings it is kept
    // too: the what-if is drawn against it (model against model), the real run beside them.
    const QString base = QFileInfo(path_).completeBaseName();
    ++runs_;
    if (!(spec.recordedConfig && spec.policy == alloc::Policy::PyTorch)) {
        o.runs.push_back(spec);
        o.outputRecorded =
            out_.filePath(QStringLiteral("whatif-%1-recorded-%2.fragscope").arg(runs_).arg(base))
                .toStdString();
    }
    o.output =
        out_.filePath(QStringLiteral("whatif-%1-%2.fragscope").arg(runs_).arg(base)).toStdString();

    progress_ = new QProgressDialog(tr("Replaying %1…").arg(QFileInfo(path_).fileName()),
                                    tr("Cancel"), 0, 100, window_);
    progress_->setWindowTitle(tr("What-if replay"));
    progress_->setAttribute(Qt::WA_DeleteOnClose);
    progress_->setMinimumDuration(0);
    progress_->setAutoClose(false);
    progress_->setAutoReset(false);
    progress_->setValue(0);
    connect(progress_, &QProgressDialog::canceled, this, &WhatIfController::cancel);
    progress_->show();

    struct Outcome
    {
        std::shared_ptr<const alloc::WhatIfResult> result;
        bool cancelled = false;
    };
    jobs_->start(
        [o](const views::Job& job) mutable {
            o.cancel = job.cancelFlag();
            o.percent = [&job](int pct, const std::string& stage) {
                job.progress(pct, QString::fromStdString(stage));
            };
            Outcome out;
            try {
                out.result = std::make_shared<alloc::WhatIfResult>(alloc::whatIf(o));
            } catch (const alloc::Cancelled&) {
                out.cancelled = true;
            }
            return out;
        },
        [this](Outcome out) { finish(std::move(out.result), {}, out.cancelled); },
        [this](const QString& error) { finish(nullptr, error, false); });
    update(); // running() now: the action is disabled until the job ends
}

void WhatIfController::cancel()
{
    jobs_->interrupt(); // the replay stops at its next step and says so (finish)
    if (progress_) progress_->setLabelText(tr("Cancelling…"));
}

void WhatIfController::finish(std::shared_ptr<const alloc::WhatIfResult> r, const QString& error,
                              bool wasCancelled)
{
    if (progress_) progress_->close();
    update();
    if (wasCancelled) {
        emit cancelled();
        return;
    }
    if (!r) {
        emit failed(error);
        errors_(tr("What-if replay failed"), error);
        return;
    }
    // Other settings: A = the replay under the recorded settings, B = the what-if, the real run
    // a third curve. The recorded settings alone: the model (B) against the real run (A).
    const QString real = QString::fromStdString(r->session);
    const QString b = QString::fromStdString(r->runs.back().sessionPath);
    const bool vsRecorded = r->runs.size() > 1;
    auto* w = vsRecorded ? new CompareWindow(QString::fromStdString(r->runs.front().sessionPath), b,
                                             window_, real)
                         : new CompareWindow(real, b, window_);
    w->setAttribute(Qt::WA_DeleteOnClose);
    w->setWhatIf(std::move(r));
    w->show();
    emit compareOpened(w);
}

} // namespace fs::gui
