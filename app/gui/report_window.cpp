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
#include <QPointer>
#include <QPushButton>
#include <QThread>
#include <QVBoxLayout>

namespace fs::gui {

void computeReport(std::shared_ptr<const render::Scene> scene, analysis::ReportOptions options,
                   std::shared_ptr<std::atomic<bool>> cancel, QObject* context,
                   std::function<void(std::shared_ptr<const analysis::Report>, QString)> done)
{
    QPointer<QObject> ctx(context);
    options.rules = scene->rules;
    options.cancel = cancel.get();
    QThread* worker = QThread::create([scene, options, cancel, ctx, done] {
        std::shared_ptr<const analysis::Report> report;
        QString error;
        try {
            if (!scene->engine) throw std::runtime_error("no analysis engine for this session");
            const auto lock = scene->engine->readLock();
            auto r = std::make_shared<analysis::Report>(
                analysis::buildReport(*scene->engine, scene->path, options));
            alloc::addGraphsSummary(*r, *scene->engine, cancel.get());
            report = std::move(r);
        } catch (const analysis::Cancelled&) {
            return;
        } catch (const std::exception& e) {
            error = QString::fromStdString(e.what());
        }
        QMetaObject::invokeMethod(
            qApp,
            [ctx, cancel, done, report, error] {
                if (ctx && !cancel->load()) done(report, error);
            },
            Qt::QueuedConnection);
    });
    QObject::connect(worker, &QThread::finished, worker, &QObject::deleteLater);
    worker->start(QThread::LowPriority);
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

    computeReport(std::move(scene), std::move(options), cancel_, this,
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

ReportWindow::~ReportWindow()
{
    *cancel_ = true; // the worker stops at its next stage and drops its result
}

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
