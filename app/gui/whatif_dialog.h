// The what-if dialog: which allocator settings to replay the open session under. It shows the
// settings the recorded run used (fs::alloc::recordedSettings) and offers presets; the text is
// PYTORCH_CUDA_ALLOC_CONF syntax, parsed by fs::alloc::Config::parse (the same parser as
// `fragscope whatif --alloc-conf`), so a typo is reported before anything runs.
#pragma once

#include "core/alloc/trace.h"
#include "core/alloc/whatif.h"

#include <QDialog>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;

namespace fs::gui {

class WhatIfDialog : public QDialog
{
    Q_OBJECT
public:
    WhatIfDialog(const QString& session, const alloc::RecordedSettings& recorded,
                 QWidget* parent = nullptr);
    // The run the dialog describes; false with a message when the text does not parse.
    bool runSpec(alloc::RunSpec& out, QString* error) const;
    QComboBox* presets() const { return presets_; }
    QLineEdit* confEdit() const { return conf_; }
    QCheckBox* tieredBox() const { return tiered_; }
    QPushButton* runButton() const { return run_; }
    QLabel* errorLabel() const { return error_; }

    void accept() override;

private:
    void applyPreset(int index);
    void validate();

    QString recordedConf_;
    QComboBox* presets_ = nullptr;
    QLineEdit* conf_ = nullptr;
    QCheckBox* tiered_ = nullptr;
    QLabel* error_ = nullptr;
    QPushButton* run_ = nullptr;
};

} // namespace fs::gui
