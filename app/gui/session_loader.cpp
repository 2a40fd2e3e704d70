#include "session_loader.h"

#include "core/import/open_input.h"
#include "core/settings/settings.h"

namespace fs::gui {

SessionLoader::SessionLoader(QObject* parent) : QObject(parent)
{
    pool_.setMaxThreadCount(2);
    views::keepThreads(pool_);
    jobs_ = new views::JobTracker(this, views::JobTracker::Mode::Replace, &pool_);
    connect(jobs_, &views::JobTracker::progress, this, &SessionLoader::progress);
}

SessionLoader::~SessionLoader()
{
    jobs_->cancel();
    pool_.waitForDone();
}

void SessionLoader::wait()
{
    pool_.waitForDone();
}

void SessionLoader::cancel()
{
    if (!busy_) return;
    jobs_->cancel(); // whatever the job still delivers is dropped
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
std::string importForView(const std::string& input, const views::Job& job, SessionLoader* loader,
                          const QString& path)
{
    import::ViewImportOptions vo;
    vo.cancel = job.cancelFlag();
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
        job.progress(pct, QStringLiteral("importing"));
    };
    const import::ViewImportResult r = import::importForViewing(input, vo);
    job.post([loader, path, session = QString::fromStdString(r.session), reused = r.reused] {
        emit loader->imported(path, session, reused);
    });
    return r.session;
}

} // namespace

void SessionLoader::start(const QString& path, std::shared_ptr<render::LiveScene> liveScene)
{
    busy_ = true;
    live_ = liveScene != nullptr;
    path_ = path;
    emit started(path);
    // The tracker cancels a job still running; what it posts from now on is dropped. Posts run
    // on the GUI thread while the job is the newest, so `this` is alive in them.
    SessionLoader* const l = this;
    jobs_->start([l, path, liveScene, rules = rules_,
                  previewFrom = previewFrom_](const views::Job& job) {
        const std::atomic<bool>& cancel = *job.cancelFlag();
        render::LoadProgress lp;
        lp.cancel = &cancel;
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
            job.progress(pct, QString::fromStdString(stage));
        };
        SessionSummary summary; // for the preview's axes
        lp.summary = [&](const SessionSummary& sum) {
            summary = sum;
            job.post([l, path, sum] { emit l->summaryRead(path, sum); });
        };
        try {
            std::string session = path.toStdString();
            if (!liveScene && import::needsImportForViewing(session)) {
                session = importForView(session, job, l, path);
                if (cancel.load()) return;
            }
            const QString sessionPath = QString::fromStdString(session);
            if (liveScene) {
                auto scene = liveScene->refresh(rules);
                job.post([l, sessionPath, scene] {
                    l->busy_ = false;
                    emit l->loaded(sessionPath, scene);
                });
                if (!cancel.load()) scene->warmUp();
                return;
            }
            // Staged: the first look as soon as the engine is open (a reopen reads no
            // allocation record for it), then the records and the OOM diagnoses here, off the
            // GUI thread, then the complete scene.
            lp.loadRows = false;
            lp.options.storeIndexAtOpen = false; // stored below, after the first look
            // Without a stored index: a first picture as soon as the records are read.
            lp.options.previewFrom = previewFrom;
            lp.options.preview = [&](std::shared_ptr<const analysis::HeatmapPreview> p) {
                auto scene = render::previewScene(session, summary, std::move(p));
                job.post([l, sessionPath, scene] { emit l->previewed(sessionPath, scene); });
            };
            const auto base = render::loadScene(session, lp);
            auto first = std::make_shared<render::Scene>(*base);
            first->firstLook = true;
            job.post([l, sessionPath, first] { emit l->loaded(sessionPath, first); });
            if (cancel.load()) return;
            base->engine->loadRows();
            auto complete = std::make_shared<render::Scene>(*base);
            render::addPoolTracks(*complete); // private pools' entries read the records
            complete->ooms =
                std::make_shared<const std::vector<analysis::OomDiagnosis>>(base->engine->ooms());
            job.post([l, sessionPath, complete] {
                l->busy_ = false;
                emit l->completed(sessionPath, complete);
            });
            // A first open: the index it built, so that the next one reads no allocation row.
            base->engine->storeIndex();
            if (!cancel.load()) complete->warmUp();
        } catch (const import::ImportCancelled&) {
            // cancel() already told the window; the import left nothing behind.
        } catch (const render::LoadCancelled&) {
            // cancel() already told the window.
        } catch (const std::exception& e) {
            const QString msg = QString::fromStdString(e.what());
            job.post([l, path, msg] {
                l->busy_ = false;
                emit l->failed(path, msg);
            });
        }
    });
}

} // namespace fs::gui
