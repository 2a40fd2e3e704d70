#include "oom_list.h"

#include "views/render/scene.h"

#include "core/analysis/engine.h"

#include <QHeaderView>
#include <QLabel>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <vector>

namespace fs::views {

// The engine's results, kept whole; the widget only formats them.
struct OomList::Rows
{
    std::vector<analysis::OomDiagnosis> ooms;
};

namespace {
QString bytes(uint64_t b)
{
    return QString::fromStdString(render::formatBytes(static_cast<double>(b)));
}
} // namespace

OomList::OomList(QWidget* parent) : QWidget(parent), rows_(std::make_shared<Rows>())
{
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(2, 2, 2, 2);
    tree_ = new QTreeWidget(this);
    tree_->setColumnCount(5);
    tree_->setHeaderLabels({tr("time"), tr("device"), tr("stream"), tr("requested"), tr("cause")});
    tree_->setRootIsDecorated(false);
    tree_->header()->setStretchLastSection(true);
    lay->addWidget(tree_, 2);
    details_ = new QLabel(this);
    details_->setWordWrap(true);
    details_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
    details_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    lay->addWidget(details_, 1);
    connect(tree_, &QTreeWidget::currentItemChanged, this, [this](QTreeWidgetItem* cur) {
        showDetails(cur ? tree_->indexOfTopLevelItem(cur) : -1);
    });
    connect(tree_, &QTreeWidget::itemActivated, this, [this](QTreeWidgetItem* it) {
        const int row = tree_->indexOfTopLevelItem(it);
        if (row >= 0 && row < static_cast<int>(rows_->ooms.size()))
            emit oomActivated(rows_->ooms[static_cast<size_t>(row)].time);
    });
    setScene(nullptr);
}

int OomList::count() const
{
    return tree_->topLevelItemCount();
}

void OomList::setScene(std::shared_ptr<const render::Scene> scene)
{
    scene_ = std::move(scene);
    tree_->clear();
    rows_ = std::make_shared<Rows>();
    if (scene_ && scene_->ooms)
        rows_->ooms = *scene_->ooms; // diagnosed by the loader, off this thread
    else if (scene_ && scene_->engine && !scene_->firstLook)
        rows_->ooms = scene_->engine->ooms();
    const TimeAxis ax = scene_ ? scene_->summary.timeAxis : TimeAxis::Nanoseconds;
    for (const auto& o : rows_->ooms) {
        auto* it = new QTreeWidgetItem(
            tree_, {QString::fromStdString(render::formatTime(o.time - scene_->timeBegin(), ax)),
                    QString::number(o.device), QString::number(o.stream), bytes(o.requestedBytes),
                    QString::fromStdString(o.cause)});
        it->setToolTip(4, QString::fromStdString(o.reason));
    }
    if (tree_->topLevelItemCount() > 0)
        tree_->setCurrentItem(tree_->topLevelItem(0));
    else if (scene_ && scene_->firstLook && !scene_->ooms)
        details_->setText(tr("Diagnosing OOMs…")); // the loader's complete scene follows
    else
        details_->setText(scene_ && scene_->engine ? tr("No OOM in this session.")
                                                   : tr("(no session analysed)"));
}

void OomList::showDetails(int row)
{
    if (row < 0 || row >= static_cast<int>(rows_->ooms.size())) {
        details_->clear();
        return;
    }
    const auto& o = rows_->ooms[static_cast<size_t>(row)];
    QString t = tr("<b>%1</b>: %2<br>")
                    .arg(QString::fromStdString(o.cause).toHtmlEscaped(),
                         QString::fromStdString(o.reason).toHtmlEscaped());
    t += tr("requested %1, device free %2, reserved %3, allocated %4<br>")
             .arg(bytes(o.requestedBytes),
                  o.deviceFreeKnown ? bytes(o.deviceFreeBytes) : tr("unknown"),
                  bytes(o.reservedBytes), bytes(o.allocatedBytes));
    t += tr("free in the request's pool and stream %1 (largest block %2), cached free %3<br>")
             .arg(bytes(o.poolStreamFreeBytes), bytes(o.poolStreamLargestFreeBytes),
                  bytes(o.cachedFreeBytes));
    if (o.pendingFreeFits > 0)
        t += tr("pending frees that would have fitted: %1 (%2)<br>")
                 .arg(o.pendingFreeFits)
                 .arg(bytes(o.pendingFreeFitBytes));
    t += tr("<i>suggestion:</i> %1").arg(QString::fromStdString(o.suggestion).toHtmlEscaped());
    details_->setText(t);
}

} // namespace fs::views
