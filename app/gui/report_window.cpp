#include "report_window.h"

#include "core/alloc/graph_sharing.h"
#include "core/analysis/engine.h"
#include "core/analysis/report_format.h"

#include <QApplication>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QVBoxLayout>

namespace fs::gui {

void computeReport(views::JobTracker& jobs, std::shared_ptr<const render::Scene> scene,
                   analysis::ReportOptions options,
                   std::function<void(std::shared_ptr<const analysis::Report>, QString)> done)
{
    options.rules = scene->rules;
    jobs.start(
        [scene, options](const views::Job& job) mutable {
            if (!scene->engine) throw std::runtime_error("no analysis engine for this session");
            options.cancel = job.cancelFlag();
            const auto lock = scene->engine->readLock();
            auto r = std::make_shared<analysis::Report>(
                analysis::buildReport(*scene->engine, scene->path, options));
            alloc::addGraphsSummary(*r, *scene->engine, job.cancelFlag());
            return std::shared_ptr<const analysis::Report>(std::move(r));
        },
        [done](std::shared_ptr<const analysis::Report> r) { done(std::move(r), {}); },
        [done](const QString& error) { done(nullptr, error); });
}

ReportWindow::ReportWindow(std::shared_ptr<const render::Scene> scene,
                           analysis::ReportOptions options, QWidget* parent)
    : QWidget(parent, Qt::Window)
{
    setWindowTitle(
        tr("Report — %1").arg(QFileInfo(QString::fromStdString(scene->path)).fileName()));
    auto* lay = new QVBoxLayout(this);
    auto* top = new QHBoxLayout;
    status_ = new QLabel(tr("Computing the report…"));
    top->addWidget(status_, 1);
    saveText_ = new QPushButton(tr("Save as text…"));
    saveJson_ = new QPushButton(tr("Save as JSON…"));
    for (QPushButton* b : {saveText_, saveJson_}) {
        b->setEnabled(false);
        top->addWidget(b);
    }
    connect(saveText_, &QPushButton::clicked, this, [this] { save(false); });
    connect(saveJson_, &QPushButton::clicked, this, [this] { save(true); });
    lay->addLayout(top);
    text_ = new QPlainTextEdit;
    text_->setReadOnly(true);
    text_->setLineWrapMode(QPlainTextEdit::NoWrap);
    text_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    lay->addWidget(text_, 1);
    resize(1000, 760);

    computeReport(*jobs_, std::move(scene), std::move(options),
                  [this](std::shared_ptr<const analysis::Report> r, const QString& error) {
                      report_ = std::move(r);
                      if (!report_) {
                          status_->setText(tr("Cannot compute the report: %1").arg(error));
                          emit computed(false, error);
                          return;
                      }
                      status_->setText(tr("The text `fragscope report` prints for this session "
                                          "(figures: docs/analysis.md)."));
                      shown_ = QString::fromStdString(analysis::reportText(*report_));
                      text_->setPlainText(shown_);
                      saveText_->setEnabled(true);
                      saveJson_->setEnabled(true);
                      emit computed(true, {});
                  });
}

ReportWindow::~ReportWindow() = default; // the tracker stops the job and drops its result

QString ReportWindow::text() const
{
    return shown_;
}

void ReportWindow::save(bool json)
{
    if (!report_) return;
    const QString path = QFileDialog::getSaveFileName(
        this, json ? tr("Save report as JSON") : tr("Save report as text"), {},
        json ? tr("JSON (*.json)") : tr("Text (*.txt)"));
    if (path.isEmpty()) return;
    QFile f(path);
    const std::string body = json ? analysis::reportJson(*report_) : analysis::reportText(*report_);
    if (!f.open(QIODevice::WriteOnly) || f.write(body.data(), static_cast<qint64>(body.size())) < 0)
        status_->setText(tr("Cannot write %1").arg(path));
    else
        status_->setText(tr("Wrote %1").arg(path));
}

} // namespace fs::gui
