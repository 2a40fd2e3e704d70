// What the GUI's first look needs, built by the engine and stored in the session file by the
// store (docs/analysis.md "Caching"): the engine's index and allocation records, the per-frame
// figures, each track's timeline at the GUI's sampling and its summary, and the default track's
// level-of-detail grid (from a million allocations: smaller tracks are drawn exactly at once). The
// GUI then opens the file as a reopen, reading no allocation row. The writers of a session
// (`fragscope simulate`, `import`, `record`, `attach`) call it when they finish, without the
// drawing library.
#pragma once

#include "engine.h"

#include <cstdint>
#include <functional>
#include <string>

namespace fs::analysis {

// Only a session of at least this many allocations is indexed by its writer: a smaller one is
// indexed by its first open in well under the second a reopen may take (and the GUI then stores
// it in the background), so the writer would pay for nothing.
inline constexpr int64_t kIndexAtWriteAllocations = 2'000'000;

struct ViewingIndexOptions
{
    // The analysis settings the GUI opens with (the user's settings file); progress, summary and
    // cancel are replaced by those below.
    LoadOptions load;
    // Timeline samples per track: the GUI's (render::loadScene's default), so that it finds them.
    int samples = 1200;
    bool always = false; // store it whatever the session's size
    // The default track's level-of-detail grid is stored from this many allocations: the heatmap
    // previews a track that large (a smaller one is drawn exactly at once).
    int64_t previewFrom = kPreviewFromAllocations;
    std::function<void(int percent)> progress;
    const std::atomic<bool>* cancel = nullptr; // raised -> throws Cancelled
};

// Returns whether the index was stored (false: a smaller session, a read-only or unfinished
// file; nothing changed). Throws fs::SessionError for a bad file, Cancelled on cancel.
bool storeViewingIndex(const std::string& path, const ViewingIndexOptions& o = {});

} // namespace fs::analysis
