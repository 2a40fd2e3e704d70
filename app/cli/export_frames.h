// `fragscope export frames SESSION --frame N [--around K] -o OUT.png|.svg|.pdf`: the video frames
// around frame N with their metrics and collapse marks (render/frame_strip.h).
#pragma once

#include "command.h"

namespace fs::cli {

int exportFrames(Args& a);

} // namespace fs::cli
