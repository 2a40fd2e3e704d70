// The video metrics as a module loaded on first use (libfragscope-video.so, docs/video.md
// "The video module"): `fragscope` and `fragscope-gui` do not link OpenCV, whose 240 shared
// libraries took 0.2 s of every start of every command. The module holds the one implementation
// (add_video.h); tests and benchmarks link it directly (fragscope_video).
#pragma once

#include "add_video.h"

#include <string>

namespace fs::video {

// What the module exports (fragscope_video_module()); kModuleVersion changes with its layout.
struct ModuleApi
{
    int version;
    AddVideoResult (*addVideo)(const AddVideoOptions&);
    std::string (*opencvVersion)();
};
constexpr int kModuleVersion = 1;

// The module, loaded once. Throws std::runtime_error naming the paths tried and the loader's
// message when it is missing or unusable.
const ModuleApi& module();

} // namespace fs::video
