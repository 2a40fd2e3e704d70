// The what-if dialog. On top, the answer to "which setting would have helped": the ranking of
// the recorded settings and the default alternatives (fs::alloc::whatIf with rankAlternatives,
// what `fragscope whatif SESSION` prints), computed on a worker by WhatIfController and handed
// here as one immutable result: the recommendation sentence and the one-line fidelity statement
// (both computed in core), then the ranked rows, the recommended one highlighted. A row can be
// chosen to replay that setting in full and compare. Below, any other setting: the settings the
// recorded run used (fs::alloc::recordedSettings), presets, and PYTORCH_CUDA_ALLOC_CONF text
// parsed by fs::alloc::Config::parse (the same parser as `fragscope whatif --alloc-conf`), so a
// typo is reported before anything runs.
#pragma once

#include "core/alloc/trace.h"
#include "core/alloc/whatif.h"

#include <QDialog>

#include <memory>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QTableWidget;

namespace fs::gui {

class WhatIfDialog : public QDialog
{
    Q_OBJECT
public:
    WhatIfDialog(const QString& session, const alloc::RecordedSettings& recorded,
                 QWidget* parent = nullptr);
    // The run the settings below the ranking describe; false with a message when the text does
    // not parse.
    bool runSpec(alloc::RunSpec& out, QString* error) const;
    // The run the dialog was accepted for: the chosen ranked row's (Compare), else runSpec's
    // (Replay).
    bool chosenSpec(alloc::RunSpec& out) const;
    QComboBox* presets() const { return presets_; }
    QLineEdit* confEdit() const { return conf_; }
    QCheckBox* tieredBox() const { return tiered_; }
    QPushButton* runButton() const { return run_; }
    QLabel* errorLabel() const { return error_; }

    // The ranking: its progress while it runs, then its result (or why there is none).
    void setRankingProgress(int percent, const QString& stage);
    void setRanking(std::shared_ptr<const alloc::WhatIfResult> r);
    void setRankingFailed(const QString& error);
    const alloc::WhatIfResult* ranking() const { return ranking_.get(); }
    // A result or an error is shown.
    bool rankingDone() const { return rankingDone_; }
    QProgressBar* rankingProgress() const { return progress_; }
    QLabel* recommendationLabel() const { return recommendation_; }
    QLabel* fidelityLabel() const { return fidelity_; }
    QTableWidget* rankingTable() const { return table_; }
    QPushButton* compareButton() const { return compare_; }
    // The run of ranking row `row` (false when out of range).
    bool rankedSpec(int row, alloc::RunSpec& out) const;

    void accept() override;

private:
    void applyPreset(int index);
    void validate();
    void compareSelected();

    QString recordedConf_;
    QComboBox* presets_ = nullptr;
    QLineEdit* conf_ = nullptr;
    QCheckBox* tiered_ = nullptr;
    QLabel* error_ = nullptr;
    QPushButton* run_ = nullptr;
    std::shared_ptr<const alloc::WhatIfResult> ranking_;
    bool rankingDone_ = false;
    int chosenRow_ = -1; // the ranked row Compare was pressed for; -1: Replay
    QProgressBar* progress_ = nullptr;
    QLabel* stage_ = nullptr;
    QLabel* recommendation_ = nullptr;
    QLabel* fidelity_ = nullptr;
    QTableWidget* table_ = nullptr;
    QLabel* notes_ = nullptr;
    QPushButton* compare_ = nullptr;
};

} // namespace fs::gui
