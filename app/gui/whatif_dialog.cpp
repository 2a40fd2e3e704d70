#include "whatif_dialog.h"

#include "core/alloc/whatif_rank.h"
#include "core/format.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>

namespace fs::gui {

namespace {

// Presets: settings users reach for when a run fragments (docs/whatif.md). Empty text: the
// recorded settings. The last one is the experimental policy on the recorded settings.
struct Preset
{
    const char* name;
    const char* conf;
    bool tiered;
};
constexpr Preset kPresets[] = {
    {"Recorded settings (check the model)", "", false},
    {"Expandable segments", "expandable_segments:True", false},
    {"Cap block splitting at 128 MiB", "max_split_size_mb:128", false},
    {"Garbage collection at 60 %", "garbage_collection_threshold:0.6", false},
    {"Round up to quarter powers of two", "roundup_power2_divisions:4", false},
    {"Lifetime-tiered pools (experimental)", "", true},
};

QString bytes(uint64_t b)
{
    return QString::fromStdString(humanBytes(b));
}

// The ranking's columns.
enum Column { Rank, Settings, Peak, Final, Segments, Mallocs, Ooms, MeanF, MaxF, DeltaPeak, Count };

// Mean or max F of a run replayed in full, per device (the engine's summary of its session); "–"
// for a run replayed through the model only.
QString fragmentation(const alloc::WhatIfResult& r, const alloc::RankedRun& row, bool mean)
{
    if (row.run < 0 || static_cast<size_t>(row.run) >= r.runs.size()) return QStringLiteral("–");
    const std::vector<alloc::DeviceFigures>& devices = r.runs[static_cast<size_t>(row.run)].devices;
    QStringList parts;
    for (const alloc::DeviceFigures& d : devices) {
        const double f = mean ? d.summary.meanFragmentationRatio : d.summary.maxFragmentationRatio;
        const QString v = QString::number(f, 'f', 4);
        parts << (devices.size() > 1 ? QStringLiteral("%1: %2").arg(d.device).arg(v) : v);
    }
    return parts.join(QStringLiteral(", "));
}

// A word-wrapped label whose text can be selected, hidden until it has something to say.
QLabel* textLabel(QVBoxLayout* into)
{
    auto* l = new QLabel;
    l->setWordWrap(true);
    l->setTextInteractionFlags(Qt::TextSelectableByMouse);
    l->setVisible(false);
    into->addWidget(l);
    return l;
}

} // namespace

WhatIfDialog::WhatIfDialog(const QString& session, const alloc::RecordedSettings& recorded,
                           QWidget* parent)
    : QDialog(parent)
{
    setWindowTitle(tr("What-if replay — %1").arg(QFileInfo(session).fileName()));
    const std::string rec = recorded.config.describe();
    recordedConf_ = QString::fromStdString(rec);
    auto* lay = new QVBoxLayout(this);
    auto* intro = new QLabel(
        tr("Replays this session's allocator requests through fragscope's model of PyTorch's "
           "caching allocator under other settings. The figures are computed, not measured: "
           "the recorded settings are replayed first to check that the model reproduces the "
           "real run."));
    intro->setWordWrap(true);
    lay->addWidget(intro);

    // The ranking: the recorded settings and the default alternatives (docs/whatif.md).
    auto* ranked = new QGroupBox(tr("Which setting would have helped?"));
    auto* rl = new QVBoxLayout(ranked);
    recommendation_ = textLabel(rl);
    recommendation_->setTextFormat(Qt::PlainText);
    QFont big = recommendation_->font();
    big.setBold(true);
    big.setPointSizeF(big.pointSizeF() * 1.1);
    recommendation_->setFont(big);
    fidelity_ = textLabel(rl);
    auto* prog = new QHBoxLayout;
    stage_ = new QLabel(tr("Ranking the recorded settings and the default alternatives…"));
    stage_->setWordWrap(true);
    prog->addWidget(stage_, 1);
    progress_ = new QProgressBar;
    progress_->setRange(0, 100);
    progress_->setValue(0);
    prog->addWidget(progress_);
    rl->addLayout(prog);
    table_ = new QTableWidget(0, Count);
    table_->setHorizontalHeaderLabels({tr("#"), tr("settings"), tr("peak reserved"),
                                       tr("final reserved"), tr("segments"), tr("cudaMalloc calls"),
                                       tr("OOMs"), tr("mean F"), tr("max F"), tr("Δ peak")});
    table_->horizontalHeaderItem(DeltaPeak)->setToolTip(
        tr("This run's peak reserved minus the recorded settings' (model against model)"));
    table_->verticalHeader()->setVisible(false);
    table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setSelectionMode(QAbstractItemView::SingleSelection);
    table_->setSizeAdjustPolicy(QAbstractScrollArea::AdjustToContents);
    table_->setVisible(false);
    rl->addWidget(table_);
    notes_ = textLabel(rl);
    compare_ = new QPushButton(tr("&Compare the selected setting…"));
    compare_->setToolTip(tr("Replay the session under the selected row's settings in full and "
                            "open it beside the replay under the recorded settings"));
    compare_->setEnabled(false);
    compare_->setAutoDefault(false);
    rl->addWidget(compare_, 0, Qt::AlignRight);
    lay->addWidget(ranked, 1);
    connect(compare_, &QPushButton::clicked, this, &WhatIfDialog::compareSelected);
    connect(table_, &QTableWidget::itemSelectionChanged, this,
            [this] { compare_->setEnabled(!table_->selectedItems().isEmpty()); });
    connect(table_, &QTableWidget::cellDoubleClicked, this, &WhatIfDialog::compareSelected);

    auto* own = new QGroupBox(tr("Or replay settings of your own"));
    auto* ol = new QVBoxLayout(own);
    auto* form = new QFormLayout;
    auto* recLabel =
        new QLabel(QStringLiteral("<b>%1</b><br><small>%2</small>")
                       .arg(rec.empty() ? tr("PyTorch defaults") : recordedConf_.toHtmlEscaped(),
                            QString::fromStdString(recorded.note).toHtmlEscaped()));
    recLabel->setWordWrap(true);
    recLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    form->addRow(tr("Recorded settings:"), recLabel);
    presets_ = new QComboBox;
    for (const Preset& p : kPresets)
        presets_->addItem(p.conf[0] ? QStringLiteral("%1 (%2)").arg(tr(p.name), p.conf)
                                    : tr(p.name));
    form->addRow(tr("Preset:"), presets_);
    conf_ = new QLineEdit;
    conf_->setPlaceholderText(tr("recorded settings, e.g. expandable_segments:True,"
                                 "max_split_size_mb:128"));
    conf_->setClearButtonEnabled(true);
    conf_->setMinimumWidth(420);
    conf_->setToolTip(tr("The allocator settings to replay, as PYTORCH_ALLOC_CONF (PyTorch 2.6 "
                         "and later) or PYTORCH_CUDA_ALLOC_CONF take them"));
    form->addRow(tr("Allocator settings:"), conf_);
    tiered_ = new QCheckBox(tr("Lifetime-tiered pools (experimental policy, not PyTorch's)"));
    form->addRow(QString(), tiered_);
    ol->addLayout(form);
    error_ = new QLabel;
    error_->setWordWrap(true);
    error_->setStyleSheet(QStringLiteral("color: #b00020;"));
    ol->addWidget(error_);
    run_ = new QPushButton(tr("&Replay"));
    run_->setDefault(true);
    ol->addWidget(run_, 0, Qt::AlignRight);
    lay->addWidget(own);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close);
    lay->addWidget(buttons);
    connect(run_, &QPushButton::clicked, this, &WhatIfDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(presets_, &QComboBox::activated, this, &WhatIfDialog::applyPreset);
    connect(conf_, &QLineEdit::textChanged, this, &WhatIfDialog::validate);
    // The first preset that changes something is the likely question.
    presets_->setCurrentIndex(1);
    applyPreset(1);
}

void WhatIfDialog::applyPreset(int index)
{
    if (index < 0 || index >= static_cast<int>(std::size(kPresets))) return;
    const Preset& p = kPresets[index];
    conf_->setText(QString::fromLatin1(p.conf));
    tiered_->setChecked(p.tiered);
}

bool WhatIfDialog::runSpec(alloc::RunSpec& out, QString* error) const
{
    out = {};
    const QString text = conf_->text().trimmed();
    try {
        if (text.isEmpty())
            out.recordedConfig = true;
        else
            out.config = alloc::Config::parse(text.toStdString());
    } catch (const std::invalid_argument& e) {
        if (error) *error = QString::fromStdString(e.what());
        return false;
    }
    out.label = text.toStdString();
    out.policy = tiered_->isChecked() ? alloc::Policy::Tiered : alloc::Policy::PyTorch;
    return true;
}

void WhatIfDialog::validate()
{
    alloc::RunSpec s;
    QString err;
    const bool ok = runSpec(s, &err);
    error_->setText(ok ? QString() : tr("Cannot read the settings: %1").arg(err));
    run_->setEnabled(ok);
}

void WhatIfDialog::accept()
{
    validate();
    if (!run_->isEnabled()) return;
    chosenRow_ = -1;
    QDialog::accept();
}

bool WhatIfDialog::chosenSpec(alloc::RunSpec& out) const
{
    return chosenRow_ >= 0 ? rankedSpec(chosenRow_, out) : runSpec(out, nullptr);
}

bool WhatIfDialog::rankedSpec(int row, alloc::RunSpec& out) const
{
    out = {};
    if (!ranking_ || row < 0 || static_cast<size_t>(row) >= ranking_->ranking.size()) return false;
    const alloc::RankedRun& r = ranking_->ranking[static_cast<size_t>(row)];
    out.policy = r.policy;
    if (r.recorded) {
        out.recordedConfig = true;
        return true;
    }
    try {
        out.config = alloc::Config::parse(r.allocConf);
    } catch (const std::invalid_argument&) {
        return false;
    }
    out.label = r.label;
    return true;
}

void WhatIfDialog::compareSelected()
{
    const QList<QTableWidgetItem*> sel = table_->selectedItems();
    alloc::RunSpec spec;
    if (sel.isEmpty() || !rankedSpec(sel.front()->row(), spec)) return;
    chosenRow_ = sel.front()->row();
    QDialog::accept();
}

void WhatIfDialog::setRankingProgress(int percent, const QString& stage)
{
    progress_->setValue(percent);
    stage_->setText(stage);
}

void WhatIfDialog::setRankingFailed(const QString& error)
{
    rankingDone_ = true;
    progress_->setVisible(false);
    stage_->setText(tr("Cannot rank the alternatives: %1").arg(error));
}

void WhatIfDialog::setRanking(std::shared_ptr<const alloc::WhatIfResult> r)
{
    ranking_ = std::move(r);
    rankingDone_ = true;
    if (!ranking_) return;
    const alloc::WhatIfResult& w = *ranking_;
    progress_->setVisible(false);
    stage_->setVisible(false);
    // The answer and the one statement about fidelity, both as core words them.
    recommendation_->setText(QString::fromStdString(w.recommendation));
    recommendation_->setVisible(true);
    fidelity_->setText(
        tr("<b>Fidelity:</b> %1").arg(QString::fromStdString(w.fidelity.summary).toHtmlEscaped()));
    fidelity_->setVisible(true);

    table_->setRowCount(static_cast<int>(w.ranking.size()));
    QFont bold = table_->font();
    bold.setBold(true);
    for (size_t i = 0; i < w.ranking.size(); ++i) {
        const alloc::RankedRun& row = w.ranking[i];
        const bool best = static_cast<int>(i) == w.recommended;
        QString name = QString::fromStdString(alloc::rankedName(row));
        if (best) name += tr("  (recommended)");
        // A setting the model cannot replay is named, never silently ignored.
        if (!row.unmodelled.empty()) name += tr("  (not all replayed)");
        const QStringList cells = {
            QString::number(i + 1),
            name,
            bytes(row.peakReserved),
            bytes(row.finalReserved),
            QString::number(row.segments),
            QString::number(row.cudaMallocs),
            QString::number(row.ooms),
            fragmentation(w, row, true),
            fragmentation(w, row, false),
            row.recorded ? QStringLiteral("–")
                         : QString::fromStdString(signedHumanBytes(row.vsRecordedPeak))};
        QString tip = QString::fromStdString(row.why);
        if (row.run < 0)
            tip += (tip.isEmpty() ? QString() : QStringLiteral("; ")) +
                   tr("replayed through the allocator model only (no session written)");
        for (int k = 0; k < Count; ++k) {
            auto* item = new QTableWidgetItem(cells[k]);
            if (k != Settings) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            if (best) {
                item->setBackground(QColor(0xd8, 0xee, 0xd0));
                item->setForeground(QColor(0x1e, 0x1e, 0x1e));
                item->setFont(bold);
            }
            if (!tip.isEmpty()) item->setToolTip(tip);
            table_->setItem(static_cast<int>(i), k, item);
        }
    }
    table_->resizeColumnsToContents();
    table_->setVisible(true);
    if (w.recommended >= 0) table_->selectRow(w.recommended);

    QStringList notes;
    notes << tr("Ranked best first: fewest OOMs, then lowest peak reserved (summed over devices); "
                "model figures. Δ peak: the run minus the replay under the recorded settings. "
                "“–” under F: replayed through the allocator model only; F is computed for the "
                "runs replayed in full.");
    for (const alloc::SkippedAlternative& s : w.skipped)
        notes << tr("Not tried: %1 — %2.")
                     .arg(QString::fromStdString(s.label), QString::fromStdString(s.reason));
    for (const alloc::RankedRun& row : w.ranking)
        for (const alloc::UnmodelledSetting& u : row.unmodelled)
            notes << tr("Not replayed under %1: %2 — %3.")
                         .arg(QString::fromStdString(alloc::rankedName(row)),
                              QString::fromStdString(u.setting), QString::fromStdString(u.reason));
    for (QString& n : notes)
        n = n.toHtmlEscaped();
    notes_->setText(QStringLiteral("<small>%1</small>").arg(notes.join(QStringLiteral("<br>"))));
    notes_->setVisible(true);

    // Room for every row and column, and for the wrapped lines of the labels: the dialog grows.
    const int tableWidth = 2 * table_->frameWidth() + table_->horizontalHeader()->length();
    int tableHeight = 2 * table_->frameWidth();
    tableHeight += table_->horizontalHeader()->sizeHint().height();
    for (int i = 0; i < table_->rowCount(); ++i)
        tableHeight += table_->rowHeight(i);
    table_->setMinimumSize(std::min(tableWidth, 1600), std::min(tableHeight, 480));
    // The whole dialog at the width it needs, as tall as its wrapped labels are at that width.
    QLayout* l = layout();
    l->activate();
    const int fitW = std::max({width(), l->totalSizeHint().width(), l->totalMinimumSize().width()});
    const int fitH =
        l->hasHeightForWidth() ? l->totalHeightForWidth(fitW) : l->totalSizeHint().height();
    resize(fitW, std::max(height(), fitH));
}

} // namespace fs::gui
