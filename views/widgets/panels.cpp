#include "panels.h"

#include "core/analysis/engine.h"
#include "core/analysis/stacks.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QScrollArea>
#include <QSettings>
#include <QSplitter>
#include <QTableView>
#include <QTableWidget>
#include <QTreeWidget>
#include <QVBoxLayout>

namespace fs::views {

using render::formatBytes;

// ---- collapse inspector ----------------------------------------------------------------------

CollapseInspector::CollapseInspector(QWidget* parent) : QWidget(parent)
{
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(4, 4, 4, 4);
    // The verdict comes first: whether to look at memory at all, before any ranked row.
    verdict_ = new QLabel(this);
    verdict_->setWordWrap(true);
    verdict_->setTextFormat(Qt::RichText);
    verdict_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    verdict_->hide();
    lay->addWidget(verdict_);
    head_ = new QLabel(tr("Select a frame (collapsed frames are red in the frames table)."), this);
    head_->setWordWrap(true);
    head_->setTextFormat(Qt::RichText);
    lay->addWidget(head_);
    auto* split = new QSplitter(Qt::Vertical, this);
    diff_ = new QTableWidget(0, 4, split);
    diff_->setHorizontalHeaderLabels({tr("state"), tr("end of f−1"), tr("end of f"), tr("change")});
    diff_->horizontalHeader()->setStretchLastSection(true);
    diff_->verticalHeader()->hide();
    diff_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    // Rows as tall as the font needs (the inspector shares a column with the histogram: every
    // pixel of it is an answer row at 1080p).
    const int row = fontMetrics().height() + 4;
    diff_->verticalHeader()->setDefaultSectionSize(row);
    // The whole f-1 -> f diff (7 rows) without scrolling, under a header of its real height.
    diff_->setMinimumHeight(7 * row + diff_->horizontalHeader()->sizeHint().height() +
                            2 * diff_->frameWidth() + 2);
    model_ = new PrecursorModel(this);
    table_ = new QTableView(split);
    table_->setModel(model_);
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setSelectionMode(QAbstractItemView::SingleSelection);
    table_->horizontalHeader()->setStretchLastSection(false);
    table_->horizontalHeader()->setSectionResizeMode(PrecursorModel::What, QHeaderView::Stretch);
    table_->verticalHeader()->hide();
    table_->verticalHeader()->setDefaultSectionSize(row); // as the diff: more of the answer shows
    // The current precursor's fields, below the list; the splitter decides its height and the
    // rest scrolls (a clipped label hid the lines below the first at 1080p).
    auto* detailScroll = new QScrollArea(split);
    detailScroll->setWidgetResizable(true);
    detailScroll->setFrameShape(QFrame::NoFrame);
    detailScroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);        // the text wraps
    detailScroll->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Ignored); // room: the list's
    detail_ = new QLabel;
    detail_->setWordWrap(true);
    detail_->setAlignment(Qt::AlignLeft | Qt::AlignTop);
    detail_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    detailScroll->setWidget(detail_);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 3);
    split->setStretchFactor(2, 1);
    split->setSizes({diff_->minimumHeight(), 320, 110}); // the ranked answer gets the room
    lay->addWidget(split, 1);
    split_ = split;
    connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex& i) {
                detail_->setText(model_->data(i, PrecursorModel::DetailRole).toString());
            });
    connect(table_, &QTableView::activated, this, [this](const QModelIndex& i) {
        emit precursorActivated(i.row(), model_->data(i, PrecursorModel::TimeRole).toLongLong(),
                                model_->data(i, PrecursorModel::AllocIdRole).toLongLong());
    });
    connect(table_, &QTableView::clicked, this, [this](const QModelIndex& i) {
        emit precursorActivated(i.row(), model_->data(i, PrecursorModel::TimeRole).toLongLong(),
                                model_->data(i, PrecursorModel::AllocIdRole).toLongLong());
    });
}

void CollapseInspector::insertPanel(QWidget* w)
{
    split_->insertWidget(0, w);
    split_->setStretchFactor(0, 2);
    // The ranked answer keeps the room it had (the constructor's sizes) below the new panel.
    split_->setSizes({w->sizeHint().height(), diff_->minimumHeight(), 320, 110});
}

QString CollapseInspector::headline() const
{
    return head_->text();
}

QString CollapseInspector::verdict() const
{
    return verdict_->isHidden() ? QString() : verdict_->text();
}

void CollapseInspector::showVerdict(const analysis::CollapseReport& rep)
{
    // The engine's sentence and its evidence rows, as `collapse` prints them (one truth); the
    // numbers are the rows' ranks in the table below.
    const analysis::Verdict& v = rep.verdict;
    if (v.headline.empty()) {
        verdict_->clear();
        verdict_->hide();
        return;
    }
    QString text = tr("<b>Verdict:</b> <span style='color:%1'>%2</span>")
                       .arg(v.allocatorRelated ? "#d02020" : "#207020")
                       .arg(QString::fromStdString(v.headline).toHtmlEscaped());
    for (size_t i : v.evidence)
        if (i < rep.precursors.size())
            text += tr("<br>&nbsp;&nbsp;evidence #%1: %2")
                        .arg(i + 1)
                        .arg(QString::fromStdString(rep.precursors[i].description).toHtmlEscaped());
    verdict_->setText(text);
    verdict_->show();
}

void CollapseInspector::setScene(std::shared_ptr<const render::Scene> scene, int track)
{
    scene_ = std::move(scene);
    track_ = track;
    shownFrame_ = -2;
    setSelection({});
}

void CollapseInspector::setSelection(const Selection& s)
{
    if (s.frame == shownFrame_) return; // a precursor click keeps the list
    shownFrame_ = s.frame;
    diff_->setRowCount(0);
    if (!scene_ || track_ < 0 || !scene_->frame(s.frame)) {
        QString common; // video rules that fire on most frames: said, never silently dropped
        if (scene_)
            for (const analysis::CommonRule& c : scene_->commonRules)
                common +=
                    QStringLiteral("<br>") + QString::fromStdString(c.explain()).toHtmlEscaped();
        head_->setText(
            ((scene_ && !scene_->collapses.empty())
                 ? tr("%1 collapse(s). First: frames %2–%3 (%4). Click a red frame in the frames "
                      "table.")
                       .arg(scene_->collapses.size())
                       .arg(scene_->collapses.front().firstFrame)
                       .arg(scene_->collapses.front().lastFrame)
                       .arg(QString::fromStdString(render::Scene::reason(scene_->collapses.front()))
                                .toHtmlEscaped())
             : scene_ && scene_->frames.empty()
                 ? tr("This session has no frames ('frame N' markers), so no collapses: use the "
                      "heatmap, "
                      "timelines and histogram.")
                 : tr("Select a frame (collapsed frames are red in the frames table).")) +
            common);
        model_->resetData({}, 0, TimeAxis::Nanoseconds);
        detail_->clear();
        verdict_->clear();
        verdict_->hide();
        return;
    }
    const analysis::Collapse* c = scene_->collapseOf(s.frame);
    head_->setText(
        c ? tr("<b>Frame %1</b> is in collapse %2–%3: <span style='color:#d02020'>%4</span>. "
               "Precursors: events from two frames before to the end of the frame, ranked.")
                .arg(s.frame)
                .arg(c->firstFrame)
                .arg(c->lastFrame)
                .arg(QString::fromStdString(render::Scene::reason(*c)).toHtmlEscaped())
          : tr("<b>Frame %1</b> breaks no collapse rule; its precursor window is shown for "
               "comparison.")
                .arg(s.frame));
    // The engine's report for the frame: its ranked precursors and the f-1 -> f state diff.
    const analysis::CollapseReport rep = scene_->frameReport(s.frame);
    showVerdict(rep);
    model_->resetData(rep.precursors, scene_->timeBegin(), scene_->summary.timeAxis);
    detail_->setText(model_->data(model_->index(0, 0), PrecursorModel::DetailRole).toString());
    table_->resizeColumnsToContents();
    const auto& ld = scene_->tracks[static_cast<size_t>(track_)];
    analysis::StateDiff d;
    for (const auto& x : rep.diff)
        if (x.device == ld.device && x.level == ld.level) d = x;
    struct Row
    {
        QString name;
        double a, b;
        bool bytes;
    };
    auto D = [](uint64_t v) { return static_cast<double>(v); };
    std::vector<Row> rows = {
        {tr("reserved"), D(d.before.reservedBytes), D(d.after.reservedBytes), true},
        {tr("allocated"), D(d.before.allocatedBytes), D(d.after.allocatedBytes), true},
        {tr("free in regions"), D(d.before.freeBytes), D(d.after.freeBytes), true},
        {tr("pending free"), D(d.before.pendingFreeBytes), D(d.after.pendingFreeBytes), true},
        {tr("fragments"), static_cast<double>(d.before.fragmentCount),
         static_cast<double>(d.after.fragmentCount), false},
        {tr("largest fragment"), D(d.before.largestFreeFragmentBytes),
         D(d.after.largestFreeFragmentBytes), true},
        {tr("F"), d.before.fragmentationRatio, d.after.fragmentationRatio, false},
        {tr("fragment entropy (bits)"), d.before.fragmentEntropyBits, d.after.fragmentEntropyBits,
         false}};
    // Pending frees (neither allocated nor free) only where there are some.
    if (d.before.pendingFreeBlocks == 0 && d.after.pendingFreeBlocks == 0)
        rows.erase(rows.begin() + 3);
    diff_->setRowCount(static_cast<int>(rows.size()));
    int r = 0;
    for (const auto& row : rows) {
        auto fmt = [&](double v) {
            return row.bytes ? QString::fromStdString(formatBytes(v)) : QString::number(v, 'g', 4);
        };
        diff_->setItem(r, 0, new QTableWidgetItem(row.name));
        diff_->setItem(r, 1, new QTableWidgetItem(fmt(row.a)));
        diff_->setItem(r, 2, new QTableWidgetItem(fmt(row.b)));
        const double delta = row.b - row.a;
        diff_->setItem(
            r, 3, new QTableWidgetItem((delta > 0 ? QStringLiteral("+") : QString()) + fmt(delta)));
        ++r;
    }
    diff_->resizeColumnsToContents();
}

// ---- allocation details ----------------------------------------------------------------------

AllocationDetails::AllocationDetails(QWidget* parent) : QWidget(parent)
{
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(4, 4, 4, 4);
    tree_ = new QTreeWidget(this);
    tree_->setColumnCount(2);
    tree_->setHeaderLabels({tr("field"), tr("value")});
    lay->addWidget(tree_);
    allFrames_ = new QCheckBox(tr("Show every stack frame (allocator, dispatch, torch::unwind, "
                                  "interpreter)"),
                               this);
    allFrames_->setToolTip(tr("Off: the user's own file:line first, then library frames; the "
                              "frames that only say how the allocation reached the allocator "
                              "are folded"));
    lay->addWidget(allFrames_);
    connect(allFrames_, &QCheckBox::toggled, this, [this] { setSelection(sel_); });
}

void AllocationDetails::setAllFrames(bool on)
{
    allFrames_->setChecked(on);
}

void AllocationDetails::setScene(std::shared_ptr<const render::Scene> scene, int track)
{
    scene_ = std::move(scene);
    track_ = track;
    setSelection({});
}

void AllocationDetails::setSelection(const Selection& s)
{
    sel_ = s;
    tree_->clear();
    if (!scene_ || track_ < 0 || s.allocId < 0) {
        new QTreeWidgetItem(
            tree_, {tr("(none)"), tr("click an allocation on the heatmap or a precursor")});
        return;
    }
    const auto& ld = scene_->tracks[static_cast<size_t>(track_)];
    const auto a = scene_->allocation(s.allocId);
    if (!a || a->device != ld.device || a->level != ld.level) {
        new QTreeWidgetItem(tree_,
                            {tr("allocation"), tr("#%1 is not on this level").arg(s.allocId)});
        return;
    }
    const TimeAxis ax = scene_->summary.timeAxis;
    auto add = [&](const QString& k, const QString& v) { new QTreeWidgetItem(tree_, {k, v}); };
    add(tr("id"), QString::number(a->id));
    add(tr("address"), QString::fromStdString(render::formatAddress(a->address)));
    add(tr("size"), QStringLiteral("%1 (%2 B)")
                        .arg(QString::fromStdString(formatBytes(static_cast<double>(a->size))))
                        .arg(a->size));
    add(tr("requested"), a->requestedSize ? QString::fromStdString(
                                                formatBytes(static_cast<double>(a->requestedSize)))
                                          : tr("unknown"));
    add(tr("level"), QString::fromUtf8(levelName(ld.level).data(),
                                       static_cast<int>(levelName(ld.level).size())));
    QString region = tr("outside any region");
    for (const auto& r : scene_->regions(track_))
        if (r.id == a->regionId && r.address <= a->address && a->address < r.address + r.size)
            region = QStringLiteral("#%1 %2 at %3, %4")
                         .arg(r.id)
                         .arg(QString::fromUtf8(regionKindName(r.kind).data(),
                                                static_cast<int>(regionKindName(r.kind).size())),
                              QString::fromStdString(render::formatAddress(r.address)),
                              QString::fromStdString(formatBytes(static_cast<double>(r.size))));
    add(tr("region"), region);
    add(tr("stream"), QString::number(a->stream));
    add(tr("tag"), a->tag.empty() ? tr("(none)") : QString::fromStdString(a->tag));
    // PyTorch's user_metadata and compile_context, when the source recorded them.
    if (!a->userMetadata.empty()) add(tr("user metadata"), QString::fromStdString(a->userMetadata));
    if (!a->compileContext.empty())
        add(tr("compile context"), QString::fromStdString(a->compileContext));
    add(tr("allocated at"),
        QString::fromStdString(render::formatTime(a->allocNs - scene_->timeBegin(), ax)));
    add(tr("freed at"),
        a->freeNs != analysis::kAlive
            ? QString::fromStdString(render::formatTime(a->freeNs - scene_->timeBegin(), ax))
            : tr("never (alive at the end)"));
    if (a->stack.empty()) {
        add(tr("stack"), tr("(not recorded by this source)"));
    } else {
        // The engine's stack filter: the call site (the user's innermost frame) first, its
        // file and line before the function (a long path would cut them off); the full text
        // in the tooltip.
        const analysis::StackView v = analysis::viewStack(a->stack);
        const auto& cs = v.frames[static_cast<size_t>(v.callSite)];
        auto* site =
            new QTreeWidgetItem(tree_, {tr("call site"), QString::fromStdString(cs.label())});
        site->setToolTip(1, QString::fromStdString(cs.text));
        QFont bold = site->font(1);
        bold.setBold(true);
        site->setFont(1, bold);
        const bool all = allFrames_->isChecked();
        std::vector<size_t> order = v.shown;
        if (all) {
            order.clear();
            for (size_t i = 0; i < v.frames.size(); ++i)
                order.push_back(i);
        }
        auto* st = new QTreeWidgetItem(
            tree_,
            {tr("stack"), all ? tr("all %n frame(s), innermost first", "", int(v.frames.size()))
                              : tr("%1 of %2 frames shown, the user's own first; %3 folded "
                                   "(allocator, dispatch, unwind, interpreter)")
                                    .arg(v.shown.size())
                                    .arg(v.frames.size())
                                    .arg(v.hiddenCount())});
        for (size_t i : order) {
            const analysis::StackFrame& f = v.frames[i];
            auto* item =
                new QTreeWidgetItem(st, {QStringLiteral("#%1 %2").arg(i).arg(
                                             QString::fromUtf8(analysis::frameKindName(f.kind))),
                                         QString::fromStdString(f.label())});
            item->setToolTip(1, QString::fromStdString(f.text));
            if (f.hidden() || f.kind == analysis::FrameKind::Library)
                item->setForeground(1, palette().color(QPalette::PlaceholderText));
        }
        st->setExpanded(true);
    }
    tree_->resizeColumnToContents(0);
}

// ---- rules editor ----------------------------------------------------------------------------

RulesEditor::RulesEditor(const std::vector<EditableRule>& initial, QWidget* parent)
    : QDialog(parent)
{
    setWindowTitle(tr("Collapse rules"));
    auto* lay = new QVBoxLayout(this);
    lay->addWidget(
        new QLabel(tr("A frame collapses when any enabled rule is broken; following broken frames "
                      "belong to the same collapse. Rules are saved for your user."),
                   this));
    table_ = new QTableWidget(0, 4, this);
    table_->setHorizontalHeaderLabels(
        {tr("metric"), tr("collapse when"), tr("threshold"), tr("enabled")});
    table_->horizontalHeader()->setStretchLastSection(true);
    lay->addWidget(table_);
    for (const auto& r : initial)
        addRow(r);
    auto* add = new QPushButton(tr("Add rule"), this);
    auto* reset = new QPushButton(tr("Defaults"), this);
    auto* bb = new QDialogButtonBox(
        QDialogButtonBox::Ok | QDialogButtonBox::Apply | QDialogButtonBox::Cancel, this);
    bb->addButton(add, QDialogButtonBox::ActionRole);
    bb->addButton(reset, QDialogButtonBox::ResetRole);
    lay->addWidget(bb);
    connect(add, &QPushButton::clicked, this, [this] {
        addRow({{"metric_name", analysis::Compare::Less, 0.0}, true});
    });
    connect(reset, &QPushButton::clicked, this, [this] {
        table_->setRowCount(0);
        for (const auto& r : analysis::defaultCollapseRules())
            addRow({r, true});
    });
    connect(bb, &QDialogButtonBox::accepted, this, [this] {
        save(rules());
        emit rulesChanged(enabled(rules()));
        accept();
    });
    connect(bb->button(QDialogButtonBox::Apply), &QPushButton::clicked, this, [this] {
        save(rules());
        emit rulesChanged(enabled(rules()));
    });
    connect(bb, &QDialogButtonBox::rejected, this, &QDialog::reject);
    resize(560, 300);
}

void RulesEditor::addRow(const EditableRule& e)
{
    const analysis::CollapseRule& r = e.rule;
    const int row = table_->rowCount();
    table_->insertRow(row);
    table_->setItem(row, 0, new QTableWidgetItem(QString::fromStdString(r.metric)));
    auto* cmp = new QComboBox(table_);
    cmp->addItems({QStringLiteral("<"), QStringLiteral(">")});
    cmp->setCurrentIndex(r.compare == analysis::Compare::Less ? 0 : 1);
    table_->setCellWidget(row, 1, cmp);
    auto* thr = new QDoubleSpinBox(table_);
    thr->setDecimals(4);
    thr->setRange(-1e9, 1e9);
    thr->setValue(r.threshold);
    table_->setCellWidget(row, 2, thr);
    auto* en = new QTableWidgetItem;
    en->setCheckState(e.enabled ? Qt::Checked : Qt::Unchecked);
    table_->setItem(row, 3, en);
}

std::vector<analysis::CollapseRule> RulesEditor::enabled(const std::vector<EditableRule>& rules)
{
    std::vector<analysis::CollapseRule> out;
    for (const auto& r : rules)
        if (r.enabled) out.push_back(r.rule);
    return out;
}

std::vector<EditableRule> RulesEditor::rules() const
{
    std::vector<EditableRule> out;
    for (int r = 0; r < table_->rowCount(); ++r) {
        EditableRule e;
        analysis::CollapseRule& rule = e.rule;
        rule.metric =
            table_->item(r, 0) ? table_->item(r, 0)->text().trimmed().toStdString() : std::string();
        if (rule.metric.empty()) continue;
        rule.compare = qobject_cast<QComboBox*>(table_->cellWidget(r, 1))->currentIndex() == 0
                           ? analysis::Compare::Less
                           : analysis::Compare::Greater;
        rule.threshold = qobject_cast<QDoubleSpinBox*>(table_->cellWidget(r, 2))->value();
        e.enabled = table_->item(r, 3) && table_->item(r, 3)->checkState() == Qt::Checked;
        out.push_back(e);
    }
    return out;
}

std::vector<EditableRule> RulesEditor::load()
{
    // The rules live in the settings file the CLI reads too (docs/settings.md).
    const std::string path = settings::defaultPath();
    try {
        if (QFileInfo::exists(QString::fromStdString(path))) return settings::read(path).rules;
    } catch (const std::exception& e) {
        qWarning("fragscope: %s; using the default collapse rules", e.what());
        return settings::Settings{}.rules;
    }
    // Rules saved by an earlier version (QSettings) until the editor writes the file.
    QSettings s;
    const int n = s.beginReadArray(QStringLiteral("collapseRules"));
    std::vector<EditableRule> out;
    for (int i = 0; i < n; ++i) {
        s.setArrayIndex(i);
        EditableRule e;
        e.rule.metric = s.value(QStringLiteral("metric")).toString().toStdString();
        e.rule.compare = s.value(QStringLiteral("below"), true).toBool()
                             ? analysis::Compare::Less
                             : analysis::Compare::Greater;
        e.rule.threshold = s.value(QStringLiteral("threshold")).toDouble();
        e.enabled = s.value(QStringLiteral("enabled"), true).toBool();
        if (!e.rule.metric.empty()) out.push_back(e);
    }
    s.endArray();
    if (n > 0) return out;
    for (const auto& r : analysis::defaultCollapseRules())
        out.push_back({r, true});
    return out;
}

void RulesEditor::save(const std::vector<EditableRule>& rules)
{
    // Keep the file's other settings; a file that does not parse is replaced.
    const std::string path = settings::defaultPath();
    settings::Settings st;
    try {
        st = settings::loadUser(path);
    } catch (const std::exception& e) {
        qWarning("fragscope: %s; rewriting it", e.what());
    }
    st.rules = rules;
    try {
        settings::write(st, path);
    } catch (const std::exception& e) {
        qWarning("fragscope: %s", e.what());
    }
}

} // namespace fs::views
