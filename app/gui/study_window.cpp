#include "study_window.h"

#include <QComboBox>
#include <QDir>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPainter>
#include <QScrollArea>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include "render/study_strip.h"

#include <cmath>

namespace fs::gui {

namespace {

// Baseline black, repeat grey, the allocator arms in distinct colours.
QColor runColor(const study::Arm& arm, size_t armIndex, int run)
{
    if (arm.role == study::Role::Baseline)
        return run == 1 ? QColor(20, 20, 20) : QColor(90, 90, 90);
    if (arm.role == study::Role::Repeat) return QColor(150, 150, 150);
    static const QColor colors[] = {QColor(31, 119, 180), QColor(214, 39, 40),
                                    QColor(44, 160, 44),  QColor(148, 103, 189),
                                    QColor(255, 127, 14), QColor(23, 190, 207)};
    return colors[armIndex % (sizeof colors / sizeof colors[0])];
}

QString verdictColor(study::Verdict v)
{
    switch (v) {
    case study::Verdict::FollowsAllocator:
        return QStringLiteral("#b02020");
    case study::Verdict::NotAllocator:
        return QStringLiteral("#206020");
    default:
        return QStringLiteral("#806000");
    }
}

} // namespace

// The selected collapse's frame in every run: render::paintStudyStrip, as `export frames` draws
// it for a report.
class StudyStripWidget : public QWidget
{
public:
    StudyStripWidget(const study::Study& s, const QString& folder, QWidget* parent)
        : QWidget(parent), study_(s), folder_(folder)
    {
    }
    void setFrame(int64_t frame)
    {
        o_.frame = frame;
        o_.report = false;
        setMinimumSize(render::studyStripSize(study_, folder_, o_));
        update();
    }
    // Runs whose thumbnail of the frame exists.
    int frames() const
    {
        int n = 0;
        for (const auto& a : study_.arms)
            for (const auto& r : a.runs)
                n += !r.thumbnails.empty() &&
                     QFileInfo::exists(QStringLiteral("%1/%2/%3.jpg")
                                           .arg(folder_, QString::fromStdString(r.thumbnails))
                                           .arg(o_.frame, 4, 10, QChar('0')));
        return n;
    }

protected:
    void paintEvent(QPaintEvent*) override
    {
        QPainter p(this);
        p.fillRect(rect(), o_.theme.background);
        render::paintStudyStrip(p, QRectF(rect()), study_, folder_, o_);
    }

private:
    const study::Study& study_;
    QString folder_;
    render::StudyStripOptions o_;
};

QString StudyWindow::studyFolder(const QString& path)
{
    const QFileInfo fi(path);
    const QString folder = fi.isDir() ? fi.absoluteFilePath() : fi.absolutePath();
    if (!fi.isDir() && fi.fileName() != QLatin1String(study::kStudyFile)) return {};
    if (!QFileInfo::exists(folder + "/" + study::kStudyFile)) return {};
    return folder;
}

bool StudyWindow::openIfStudy(const QString& path)
{
    const QString folder = studyFolder(path);
    if (folder.isEmpty()) return false;
    auto* w = new StudyWindow(folder);
    w->setAttribute(Qt::WA_DeleteOnClose);
    w->resize(1200, 820);
    w->show();
    return true;
}

StudyWindow::StudyWindow(const QString& folder, QWidget* parent) : QWidget(parent), folder_(folder)
{
    setWindowTitle(tr("%1 — fragscope study").arg(QFileInfo(folder).fileName()));
    try {
        study_ = study::readStudy(folder.toStdString());
    } catch (const std::exception& e) {
        error_ = QString::fromStdString(e.what());
    }
    build();
    if (!ok()) return;
    fillCollapses();
    fillPlot();
    if (!study_.collapses.empty()) selectCollapse(0);
}

void StudyWindow::build()
{
    auto* root = new QVBoxLayout(this);
    headline_ = new QLabel(this);
    headline_->setWordWrap(true);
    headline_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    root->addWidget(headline_);
    if (!ok()) {
        headline_->setText(tr("Cannot open the study: %1").arg(error_));
        return;
    }
    QStringList cmd;
    for (const auto& a : study_.command)
        cmd << QString::fromStdString(a);
    const QString noise = QString::fromStdString(study::noiseFloorText(study_.noise));
    headline_->setText(
        tr("<b>Study of</b> <code>%1</code> — %2 arms, %3%4<br>%5")
            .arg(cmd.join(' ').toHtmlEscaped())
            .arg(study_.arms.size())
            .arg(noise)
            .arg(study_.interrupted ? tr(" — <b>interrupted</b>") : QString())
            .arg(study_.problem.empty()
                     ? QString()
                     : tr("<b>No verdict:</b> %1")
                           .arg(QString::fromStdString(study_.problem).toHtmlEscaped())));

    auto* split = new QSplitter(Qt::Vertical, this);
    root->addWidget(split, 1);

    auto* top = new QWidget(split);
    auto* topLayout = new QHBoxLayout(top);
    topLayout->setContentsMargins(0, 0, 0, 0);
    collapses_ = new QTableWidget(0, 2, top);
    collapses_->setHorizontalHeaderLabels({tr("Frame"), tr("Verdict")});
    collapses_->horizontalHeader()->setStretchLastSection(true);
    collapses_->verticalHeader()->hide();
    collapses_->setSelectionBehavior(QAbstractItemView::SelectRows);
    collapses_->setSelectionMode(QAbstractItemView::SingleSelection);
    collapses_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    collapses_->setMaximumWidth(260);
    connect(collapses_, &QTableWidget::currentCellChanged, this,
            [this](int row, int, int, int) { selectCollapse(row); });
    topLayout->addWidget(collapses_);

    auto* plotBox = new QWidget(top);
    auto* plotLayout = new QVBoxLayout(plotBox);
    plotLayout->setContentsMargins(0, 0, 0, 0);
    metric_ = new QComboBox(plotBox);
    for (const auto& name : analysis::videoMetricNames())
        metric_->addItem(QString::fromStdString(name));
    metric_->addItem(QStringLiteral("psnr_db (to the baseline)"), QStringLiteral("psnr_db"));
    metric_->addItem(QStringLiteral("ssim (to the baseline)"), QStringLiteral("ssim"));
    metric_->setCurrentText(QStringLiteral("warp_error_z"));
    connect(metric_, &QComboBox::currentIndexChanged, this, [this] { fillPlot(); });
    plotLayout->addWidget(metric_, 0, Qt::AlignLeft);
    plot_ = new QCustomPlot(plotBox);
    plot_->setMinimumHeight(260);
    plot_->legend->setVisible(true);
    plot_->xAxis->setLabel(tr("frame"));
    QSharedPointer<QCPAxisTickerFixed> frames(new QCPAxisTickerFixed);
    frames->setTickStep(1);
    frames->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
    plot_->xAxis->setTicker(frames);
    plotLayout->addWidget(plot_, 1);
    topLayout->addWidget(plotBox, 1);
    split->addWidget(top);

    auto* bottom = new QWidget(split);
    auto* bottomLayout = new QVBoxLayout(bottom);
    bottomLayout->setContentsMargins(0, 0, 0, 0);
    verdict_ = new QLabel(bottom);
    verdict_->setWordWrap(true);
    verdict_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    bottomLayout->addWidget(verdict_);
    auto* scroll = new QScrollArea(bottom);
    scroll->setWidgetResizable(true);
    strip_ = new StudyStripWidget(study_, folder_, scroll);
    scroll->setWidget(strip_);
    bottomLayout->addWidget(scroll, 1);
    split->addWidget(bottom);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    split->setSizes({430, 330});
}

void StudyWindow::fillCollapses()
{
    collapses_->setRowCount(static_cast<int>(study_.collapses.size()));
    for (size_t i = 0; i < study_.collapses.size(); ++i) {
        const auto& c = study_.collapses[i];
        const QString frames = c.firstFrame == c.lastFrame
                                   ? QString::number(c.firstFrame)
                                   : QStringLiteral("%1–%2").arg(c.firstFrame).arg(c.lastFrame);
        collapses_->setItem(static_cast<int>(i), 0, new QTableWidgetItem(frames));
        auto* v = new QTableWidgetItem(QString::fromUtf8(study::verdictName(c.verdict)));
        v->setForeground(QColor(verdictColor(c.verdict)));
        collapses_->setItem(static_cast<int>(i), 1, v);
    }
}

void StudyWindow::setMetric(const QString& name)
{
    const int i = metric_->findData(name);
    metric_->setCurrentIndex(i >= 0 ? i : metric_->findText(name));
}

void StudyWindow::fillPlot()
{
    plot_->clearGraphs();
    plot_->clearItems();
    const QString key = metric_->currentData().isValid() ? metric_->currentData().toString()
                                                         : metric_->currentText();
    const std::string name = key.toStdString();
    double lo = INFINITY, hi = -INFINITY, last = 1;
    for (size_t ai = 0; ai < study_.arms.size(); ++ai) {
        const study::Arm& arm = study_.arms[ai];
        for (const study::Run& r : arm.runs) {
            if (!r.usable()) continue;
            QVector<double> x, y;
            if (name == "psnr_db" || name == "ssim") {
                for (const auto& d : r.vsBaseline) {
                    const double v = name == "ssim" ? d.ssim : d.psnrDb;
                    if (!std::isfinite(v)) continue; // identical frames: no finite PSNR
                    x << static_cast<double>(d.frame);
                    y << v;
                }
            } else {
                for (const auto& s : r.scores)
                    if (const auto it = s.values.find(name); it != s.values.end()) {
                        x << static_cast<double>(s.frame);
                        y << it->second;
                    }
            }
            if (x.isEmpty()) continue;
            auto* g = plot_->addGraph();
            g->setName(QString::fromStdString(r.folder));
            const QColor color = runColor(arm, ai, r.index);
            g->setPen(QPen(color, arm.role == study::Role::Baseline ? 2.2 : 1.4,
                           arm.role == study::Role::Repeat ? Qt::DashLine : Qt::SolidLine));
            g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, color, color, 4));
            g->setData(x, y, true);
            for (double v : y) {
                lo = std::min(lo, v);
                hi = std::max(hi, v);
            }
            last = std::max(last, x.back());
        }
    }
    // The baseline's collapses as bands.
    for (size_t i = 0; i < study_.collapses.size(); ++i) {
        const auto& c = study_.collapses[i];
        auto* band = new QCPItemRect(plot_);
        band->topLeft->setTypeX(QCPItemPosition::ptPlotCoords);
        band->topLeft->setTypeY(QCPItemPosition::ptAxisRectRatio);
        band->bottomRight->setTypeX(QCPItemPosition::ptPlotCoords);
        band->bottomRight->setTypeY(QCPItemPosition::ptAxisRectRatio);
        band->topLeft->setCoords(static_cast<double>(c.firstFrame) - 0.5, 0);
        band->bottomRight->setCoords(static_cast<double>(c.lastFrame) + 0.5, 1);
        const bool selected = static_cast<int>(i) == current_;
        band->setPen(Qt::NoPen);
        band->setBrush(QColor(220, 60, 60, selected ? 70 : 30));
        band->setLayer(QStringLiteral("background"));
    }
    plot_->yAxis->setLabel(key);
    plot_->xAxis->setRange(-0.5, last + 0.5);
    if (std::isfinite(lo)) {
        const double pad = std::max(1e-6, (hi - lo) * 0.06);
        plot_->yAxis->setRange(lo - pad, hi + pad);
    }
    plot_->replot();
}

void StudyWindow::fillFrames(int64_t frame)
{
    strip_->setFrame(frame);
    framesShown_ = strip_->frames();
}

void StudyWindow::selectCollapse(int i)
{
    if (i < 0 || i >= static_cast<int>(study_.collapses.size())) return;
    current_ = i;
    if (collapses_->currentRow() != i) collapses_->setCurrentCell(i, 0);
    const auto& c = study_.collapses[static_cast<size_t>(i)];
    QString text = QStringLiteral("<b style='color:%1'>Frame %2: %3</b> — %4")
                       .arg(verdictColor(c.verdict))
                       .arg(c.firstFrame)
                       .arg(QString::fromUtf8(study::verdictName(c.verdict)))
                       .arg(QString::fromStdString(c.reason).toHtmlEscaped());
    if (!c.sessionVerdict.empty())
        text += tr("<br>Recorded session's verdict: %1")
                    .arg(QString::fromStdString(c.sessionVerdict).toHtmlEscaped());
    verdict_->setText(text);
    fillFrames(c.firstFrame);
    fillPlot();
}

QStringList StudyWindow::writeScreenshots(const QString& dir)
{
    QStringList written;
    QDir().mkpath(dir);
    if (!ok()) return written;
    const int n = std::max<int>(1, static_cast<int>(study_.collapses.size()));
    for (int i = 0; i < n; ++i) {
        if (!study_.collapses.empty()) selectCollapse(i);
        plot_->replot();
        const QString p = QStringLiteral("%1/study-%2.png").arg(dir).arg(i + 1);
        if (grab().save(p)) written << p;
    }
    return written;
}

} // namespace fs::gui
