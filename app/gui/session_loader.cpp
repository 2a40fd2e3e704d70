#include "session_loader.h"

#include <QPointer>

namespace fs::gui {

SessionLoader::SessionLoader(QObject* parent) : QObject(parent)
{
    pool_.setMaxThreadCount(2);
}

SessionLoader::~SessionLoader()
{
    if (cancel_) cancel_->store(true);
    pool_.waitForDone();
}

void SessionLoader::wait()
{
    pool_.waitForDone();
}

void SessionLoader::cancel()
{
    if (!busy_) return;
    if (cancel_) cancel_->store(true);
    ++generation_; // whatever the job still delivers is dropped
    busy_ = false;
    if (!live_) emit cancelled(path_); // a dropped live refresh is not news
}

void SessionLoader::load(const QString& path)
{
    start(path, nullptr);
}

void SessionLoader::refresh(std::shared_ptr<render::LiveScene> live, const QString& path)
{
    start(path, std::move(live));
}

void SessionLoader::start(const QString& path, std::shared_ptr<render::LiveScene> liveScene)
{
    const bool live = liveScene != nullptr;
    if (busy_) {
        if (cancel_) cancel_->store(true);
        ++generation_;
    }
    busy_ = true;
    live_ = live;
    path_ = path;
    const uint64_t gen = ++generation_;
    cancel_ = std::make_shared<std::atomic<bool>>(false);
    emit started(path);
    QPointer<SessionLoader> self(this);
    auto cancel = cancel_;
    pool_.start([self, cancel, path, gen, liveScene, rules = rules_] {
        auto post = [self, gen](auto fn) {
            if (!self) return;
            QMetaObject::invokeMethod(
                self.data(),
                [self, gen, fn] {
                    if (self && self->generation_ == gen) fn(self.data());
                },
                Qt::QueuedConnection);
        };
        render::LoadProgress lp;
        lp.cancel = cancel.get();
        lp.rules = rules;
        int last = -1;
        lp.progress = [&](int pct, const std::string& stage) {
            if (pct == last) return;
            last = pct;
            const QString st = QString::fromStdString(stage);
            post([pct, st](SessionLoader* l) { emit l->progress(pct, st); });
        };
        lp.summary = [&](const SessionSummary& sum) {
            post([path, sum](SessionLoader* l) { emit l->summaryRead(path, sum); });
        };
        try {
            auto scene =
                liveScene ? liveScene->refresh(rules) : render::loadScene(path.toStdString(), lp);
            post([path, scene](SessionLoader* l) {
                l->busy_ = false;
                emit l->loaded(path, scene);
            });
            if (!cancel->load()) scene->warmUp();
        } catch (const render::LoadCancelled&) {
            // cancel() already told the window.
        } catch (const std::exception& e) {
            const QString msg = QString::fromStdString(e.what());
            post([path, msg](SessionLoader* l) {
                l->busy_ = false;
                emit l->failed(path, msg);
            });
        }
    });
}

} // namespace fs::gui
