// storeViewingIndex: what the GUI's loader (views/render/scene.cpp, loadScene) computes at an
// open, computed here in the same order with the same requests, so that the values it stores
// are those the GUI then looks up.
#include "viewing_index.h"

#include "core/store/session.h"

#include <algorithm>
#include <cmath>
#include <exception>

namespace fs::analysis {

bool storeViewingIndex(const std::string& path, const ViewingIndexOptions& vo)
{
    if (!vo.always && Session::open(path, false).allocationCount() < kIndexAtWriteAllocations)
        return false;
    LoadOptions o = vo.load;
    o.integrityCheck = false; // just written by the caller
    o.storeIndexAtOpen = true;
    o.cancel = vo.cancel;
    o.summary = nullptr;
    if (vo.progress) {
        vo.progress(0);
        o.progress = [&](int64_t done, int64_t total) {
            vo.progress(static_cast<int>(90 * done / std::max<int64_t>(1, total)));
        };
    }
    const std::shared_ptr<const Engine> e = Engine::open(path, o);
    if (vo.progress) vo.progress(90);
    // Every track's timeline at the GUI's sampling (its scene asks for them at once), and the
    // track its views default to (the first one when the device has none).
    const SessionSummary summary = e->summary();
    std::optional<Track> byDefault;
    AddressLayout defaultLayout;
    {
        const auto lock = e->readLock();
        const std::vector<Track> tracks = e->tracks();
        for (const Track& t : tracks) {
            TimelineOptions to;
            to.device = t.device;
            to.level = t.level;
            to.step =
                std::max<int64_t>(1, (e->timeEnd() - e->timeBegin()) / std::max(1, vo.samples));
            e->timeline(to);
            e->trackSummary(t.device, t.level); // report, compare, whatif and the GUI's header
        }
        if (!tracks.empty()) {
            byDefault = tracks.front();
            if (const auto d = e->defaultTrack(0))
                for (const Track& t : tracks)
                    if (t.device == d->device && t.level == d->level) {
                        byDefault = t;
                        break;
                    }
            defaultLayout = e->layout(byDefault->device, byDefault->level);
        }
    }
    if (vo.progress) vo.progress(100);
    // The grid the heatmap's first preview reads (Engine::heatmapPreview: 17 MB), for a track
    // large enough that the heatmap previews it (a smaller one is drawn exactly at once).
    if (byDefault && byDefault->allocations >= vo.previewFrom) {
        HeatmapRequest rq;
        rq.device = byDefault->device;
        rq.level = byDefault->level;
        rq.t0 = summary.timeBegin;
        rq.t1 = summary.timeEnd + 1;
        rq.y0 = 0;
        // The GUI's request (render::Scene::heatmapPreview): the track's compact height, a double.
        rq.y1 = static_cast<uint64_t>(
            std::max(0.0, std::ceil(static_cast<double>(defaultLayout.compactSize))));
        if (rq.y1 <= rq.y0) rq.y1 = rq.y0 + 1;
        rq.width = 1;
        rq.height = 1;
        try {
            const auto lock = e->readLock();
            e->heatmapPreview(rq);
        } catch (const std::exception&) {
            // The preview is not needed to store the rest (the GUI builds it on first use).
        }
    }
    return e->loadInfo().indexCacheWritten;
}

} // namespace fs::analysis
