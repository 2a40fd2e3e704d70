#include "whatif_dialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QVBoxLayout>

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
           "caching allocator under other settings, and opens the result beside the real run. "
           "The replay is computed, not measured: first the recorded settings are replayed to "
           "check that the model reproduces the real run, and the window says whether it did."));
    intro->setWordWrap(true);
    lay->addWidget(intro);
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
    form->addRow(tr("PYTORCH_CUDA_ALLOC_CONF:"), conf_);
    tiered_ = new QCheckBox(tr("Lifetime-tiered pools (experimental policy, not PyTorch's)"));
    form->addRow(QString(), tiered_);
    lay->addLayout(form);
    error_ = new QLabel;
    error_->setWordWrap(true);
    error_->setStyleSheet(QStringLiteral("color: #b00020;"));
    lay->addWidget(error_);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Cancel);
    run_ = buttons->addButton(tr("&Replay"), QDialogButtonBox::AcceptRole);
    run_->setDefault(true);
    lay->addWidget(buttons);
    connect(buttons, &QDialogButtonBox::accepted, this, &WhatIfDialog::accept);
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
    if (run_->isEnabled()) QDialog::accept();
}

} // namespace fs::gui
