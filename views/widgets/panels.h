// Side panels: collapse inspector (precursors + state diff), allocation details, rules editor.
#pragma once

#include "core/settings/settings.h"
#include "panel.h"
#include "precursor_model.h"
#include "selection.h"

#include <QDialog>
#include <QWidget>
#include <memory>

class QCheckBox;
class QLabel;
class QSplitter;
class QTableView;
class QTableWidget;
class QTreeWidget;

namespace fs::views {

class CollapseInspector : public QWidget, public Panel
{
    Q_OBJECT
public:
    explicit CollapseInspector(QWidget* parent = nullptr);
    void setScene(std::shared_ptr<const render::Scene> scene, int track);
    void showScene(std::shared_ptr<const render::Scene> scene, int track) override
    {
        setScene(std::move(scene), track);
    }
    Follows follows() const override { return Follows::Track; }
    bool needsCompleteScene() const override { return true; }
    void setSelection(const Selection& s);
    PrecursorModel* model() const { return model_; }
    QTableView* table() const { return table_; }
    QString headline() const;
    // Adds a panel (the video frames) above the state diff, in the inspector's splitter.
    void insertPanel(QWidget* w);
    // The engine's verdict on the shown frame and its evidence rows (empty when none is shown).
    QString verdict() const;

signals:
    // A precursor row was activated: its time and allocation (-1 when none).
    void precursorActivated(int row, int64_t time, int64_t allocId);

private:
    void showVerdict(const analysis::CollapseReport& rep);

    std::shared_ptr<const render::Scene> scene_;
    int track_ = -1;
    int64_t shownFrame_ = -2;
    QLabel* head_ = nullptr;
    QLabel* verdict_ = nullptr; // first: allocator-related or not, then the evidence rows
    QTableWidget* diff_ = nullptr;
    QTableView* table_ = nullptr;
    QLabel* detail_ = nullptr; // fields of the current precursor (the top one until one is picked)
    QSplitter* split_ = nullptr;
    PrecursorModel* model_ = nullptr;
};

class AllocationDetails : public QWidget, public Panel
{
    Q_OBJECT
public:
    explicit AllocationDetails(QWidget* parent = nullptr);
    void setScene(std::shared_ptr<const render::Scene> scene, int track);
    void showScene(std::shared_ptr<const render::Scene> scene, int track) override
    {
        setScene(std::move(scene), track);
    }
    Follows follows() const override { return Follows::Track; }
    bool needsCompleteScene() const override { return true; }
    void setSelection(const Selection& s);
    QTreeWidget* tree() const { return tree_; }
    // The stack filter (analysis::viewStack): off shows every frame as recorded.
    void setAllFrames(bool on);

private:
    std::shared_ptr<const render::Scene> scene_;
    int track_ = -1;
    QTreeWidget* tree_ = nullptr;
    QCheckBox* allFrames_ = nullptr;
    Selection sel_;
};

// A rule as the editor keeps it: the engine's rule, switched on or off (the settings file's own
// rule type, so the editor writes what `fragscope report` reads).
using EditableRule = settings::Rule;

// Collapse rules: metric, comparison, threshold; saved in the settings file the CLI reads too
// (core/settings, docs/settings.md), so the GUI and `fragscope report` show the same collapses.
class RulesEditor : public QDialog
{
    Q_OBJECT
public:
    explicit RulesEditor(const std::vector<EditableRule>& rules, QWidget* parent = nullptr);
    std::vector<EditableRule> rules() const;
    static std::vector<EditableRule> load();
    static void save(const std::vector<EditableRule>& rules);
    // The enabled ones, as the engine evaluates them.
    static std::vector<analysis::CollapseRule> enabled(const std::vector<EditableRule>& rules);

signals:
    void rulesChanged(const std::vector<fs::analysis::CollapseRule>& rules);

private:
    void addRow(const EditableRule& r);
    QTableWidget* table_ = nullptr;
};

} // namespace fs::views
