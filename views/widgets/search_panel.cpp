#include "search_panel.h"

#include "block_list.h"
#include "render/scene_explore.h"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QTableView>
#include <QVBoxLayout>

#include <stdexcept>

namespace fs::views {

SearchPanel::SearchPanel(QWidget* parent) : QWidget(parent)
{
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(4, 4, 4, 4);
    auto* top = new QHBoxLayout;
    edit_ = new QLineEdit(this);
    edit_->setPlaceholderText(
        tr("0x7f… address · 1MiB-4MiB, >=2MiB size · model.py:412 or a function · tag:NAME"));
    edit_->setClearButtonEnabled(true);
    edit_->setToolTip(
        tr("<b>Search the blocks of this track</b><br>"
           "<b>0x…</b>: the block, free fragment or region that held the address at the cursor<br>"
           "<b>1MiB-4MiB</b>, <b>&gt;=2MiB</b>, <b>&lt;4KiB</b>, <b>512B</b>: sizes<br>"
           "<b>tag:NAME</b>: the tag contains NAME<br>"
           "<b>meta:TEXT</b>: the allocation's user_metadata (PyTorch) contains TEXT<br>"
           "anything else: a frame of the call stack contains it (file.py:123, a function)"));
    auto* go = new QPushButton(tr("Search"), this);
    highlight_ = new QCheckBox(tr("highlight on heatmap"), this);
    highlight_->setChecked(true);
    top->addWidget(edit_, 1);
    top->addWidget(go);
    top->addWidget(highlight_);
    lay->addLayout(top);
    message_ = new QLabel(tr("Type a search and press Enter."), this);
    message_->setWordWrap(true);
    message_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    lay->addWidget(message_);
    model_ = new BlockListModel(this);
    table_ = blockTable(model_, this);
    lay->addWidget(table_, 1);
    connect(edit_, &QLineEdit::returnPressed, this, [this] { search(edit_->text()); });
    connect(go, &QPushButton::clicked, this, [this] { search(edit_->text()); });
    connect(highlight_, &QCheckBox::toggled, this, [this](bool on) {
        emit highlightChanged(on && model_->rowCount() > 0 ? query_ : QString());
    });
    connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex& cur) {
                if (!cur.isValid()) return;
                const analysis::BlockRow& b = model_->row(cur.row());
                if (b.free)
                    emit fragmentFound(b.address, b.size);
                else
                    emit blockSelected(b.id, b.since);
            });
}

bool SearchPanel::highlighting() const
{
    return highlight_->isChecked();
}

QString SearchPanel::message() const
{
    return message_->text();
}

void SearchPanel::setScene(std::shared_ptr<const render::Scene> scene, int track)
{
    scene_ = std::move(scene);
    track_ = track;
    model_->resetData({}, 0, 0, TimeAxis::Nanoseconds, Level::Framework);
    if (!query_.isEmpty()) run();
}

void SearchPanel::setCursor(int64_t t)
{
    cursor_ = t;
}

void SearchPanel::search(const QString& query)
{
    edit_->setText(query);
    query_ = query.trimmed();
    if (query_.isEmpty()) {
        model_->resetData({}, 0, 0, TimeAxis::Nanoseconds, Level::Framework);
        message_->setText(tr("Type a search and press Enter."));
        emit highlightChanged({});
        return;
    }
    run();
}

void SearchPanel::run()
{
    if (!scene_ || track_ < 0 || !render::canExplore(*scene_)) {
        jobs_->cancel();
        message_->setText(scene_ ? tr("Reading the session…") : tr("No session to search."));
        return;
    }
    message_->setText(tr("Searching…"));
    const auto scene = scene_;
    const int track = track_;
    const int64_t t = cursor_ == kNoTime ? scene->timeEnd() : cursor_;
    jobs_->start(
        [scene, track, t, q = query_.toStdString()](const Job&) {
            return render::search(*scene, track, q, t); // invalid_argument: a bad query
        },
        [this, scene, track, t](std::optional<analysis::SearchResult> r) {
            if (scene_ != scene) return;
            if (!r) {
                message_->setText(tr("nothing found: the session could not be read"));
                return;
            }
            std::vector<analysis::BlockRow> rows = std::move(r->rows);
            if (r->holder) rows.insert(rows.begin(), *r->holder);
            QString text = QString::fromStdString(r->message);
            if (r->matches > static_cast<int64_t>(rows.size()) && !r->holder)
                text += tr(" (the first %1 listed)").arg(rows.size());
            message_->setText(text);
            const auto& ld = scene->tracks[static_cast<size_t>(track)];
            model_->resetData(std::move(rows), t, scene->timeBegin(), scene->summary.timeAxis,
                              ld.level);
            table_->resizeColumnsToContents();
            if (r->holder && r->holder->free)
                emit fragmentFound(r->holder->address, r->holder->size);
            else if (r->holder) // found at the cursor: the cursor stays
                emit blockSelected(r->holder->id, kNoTime);
            emit highlightChanged(highlight_->isChecked() && r->matches > 0 ? query_ : QString());
        },
        [this](const QString& error) {
            message_->setText(tr("Cannot search: %1").arg(error));
            model_->resetData({}, 0, 0, TimeAxis::Nanoseconds, Level::Framework);
            emit highlightChanged({});
        });
}

} // namespace fs::views
