#include "session_loader.h"

#include "core/import/open_input.h"
#include "core/settings/settings.h"
#include "widgets/worker_priority.h"

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

namespace {

// Imports a trace for viewing on the loader's worker, reporting progress as "importing".
template <typename Post>
std::string importForView(const std::string& input, const std::atomic<bool>* cancel,
                          const Post& post, const QString& path)
{
    import::ViewImportOptions vo;
    vo.cancel = cancel;
    try {
        vo.framePattern = settings::loadUser().framePattern; // as `fragscope import` finds frames
    } catch (const std::exception&) {
        // A broken settings file: the default pattern (the rules editor reports the file).
    }
    int last = -1;
    vo.progress = [&](uint64_t done, uint64_t total) {
        const int pct = total ? static_cast<int>(std::min<uint64_t>(100, done * 100 / total)) : 0;
        if (pct == last) return;
        last = pct;
        post([pct](SessionLoader* l) { emit l->progress(pct, QStringLiteral("importing")); });
    };
    const import::ViewImportResult r = import::importForViewing(input, vo);
    post([path, session = QString::fromStdString(r.session), reused = r.reused](SessionLoader* l) {
        emit l->imported(path, session, reused);
    });
    return r.session;
}

} // namespace

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
        views::lowerWorkerPriority();
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
        try { // lookback and entropy window from the settings file the CLI reads too
            lp.options = settings::loadUser().loadOptions();
        } catch (const std::exception&) {
            // A broken settings file: the defaults (the rules editor reports the file).
        }
        if (!rules.empty()) lp.options.rules = rules;
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
            std::string session = path.toStdString();
            if (!liveScene && import::needsImportForViewing(session)) {
                session = importForView(session, cancel.get(), post, path);
                if (cancel->load()) return;
            }
            const QString sessionPath = QString::fromStdString(session);
            if (liveScene) {
                auto scene = liveScene->refresh(rules);
                post([sessionPath, scene](SessionLoader* l) {
                    l->busy_ = false;
                    emit l->loaded(sessionPath, scene);
                });
                if (!cancel->load()) scene->warmUp();
                return;
            }
            // Staged: the first look as soon as the engine is open (a reopen reads no
            // allocation record for it), then the records and the OOM diagnoses here, off the
            // GUI thread, then the complete scene.
            lp.loadRows = false;
            lp.options.storeIndexAtOpen = false; // stored below, after the first look
            const auto base = render::loadScene(session, lp);
            auto first = std::make_shared<render::Scene>(*base);
            first->firstLook = true;
            post([sessionPath, first](SessionLoader* l) { emit l->loaded(sessionPath, first); });
            if (cancel->load()) return;
            base->engine->loadRows();
            auto complete = std::make_shared<render::Scene>(*base);
            render::addPoolTracks(*complete); // private pools' entries read the records
            complete->ooms =
                std::make_shared<const std::vector<analysis::OomDiagnosis>>(base->engine->ooms());
            post([sessionPath, complete](SessionLoader* l) {
                l->busy_ = false;
                emit l->completed(sessionPath, complete);
            });
            // A first open: the index it built, so that the next one reads no allocation row.
            base->engine->storeIndex();
            if (!cancel->load()) complete->warmUp();
        } catch (const import::ImportCancelled&) {
            // cancel() already told the window; the import left nothing behind.
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
