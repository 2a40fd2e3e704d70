// Search (Explorer::search): by address (what held it at the cursor), size range, stack text or
// file:line, or tag; the matches listed, counted over the run and at the cursor, and
// highlighted on the heatmap. A search that finds nothing says so. Runs on a worker.
#pragma once

#include "jobs.h"
#include "render/scene.h"

#include <QWidget>

#include <memory>

class QCheckBox;
class QLabel;
class QLineEdit;
class QTableView;

namespace fs::views {

class BlockListModel;

class SearchPanel : public QWidget
{
    Q_OBJECT
public:
    explicit SearchPanel(QWidget* parent = nullptr);
    void setScene(std::shared_ptr<const render::Scene> scene, int track);
    void setCursor(int64_t t); // an address search answers at the cursor
    void search(const QString& query);
    QString message() const;
    BlockListModel* results() const { return model_; }
    QLineEdit* edit() const { return edit_; }
    bool busy() const { return jobs_->busy(); }
    bool highlighting() const;

signals:
    // The heatmap highlights the matches of this query (empty: none).
    void highlightChanged(const QString& query);
    // A match was picked: select it, and move the cursor to its allocation (kNoTime: stay).
    void blockSelected(qint64 allocId, qint64 allocatedAt);
    // An address search found a free fragment (or only a region) at the cursor.
    void fragmentFound(quint64 address, quint64 size);

private:
    void run();
    std::shared_ptr<const render::Scene> scene_;
    int track_ = -1;
    int64_t cursor_ = kNoTime;
    QString query_;
    QLineEdit* edit_ = nullptr;
    QCheckBox* highlight_ = nullptr;
    QLabel* message_ = nullptr;
    QTableView* table_ = nullptr;
    BlockListModel* model_ = nullptr;
    // One search at a time; the newest waits, and an older waiting one is dropped.
    JobTracker* jobs_ = new JobTracker(this, JobTracker::Mode::Serial);
};

} // namespace fs::views
