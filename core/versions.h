// Versions of the libraries fragscope runs with, for --version and Help › About.
#pragma once

#include <string>

namespace fs {

std::string fragscopeVersion();
std::string sqliteVersion();
std::string fmtVersion();
// CUPTI is looked up at run time (the user's CUDA installation); "not found" when absent.
std::string cuptiVersion();
// False when this build has no capture agent (configured with FRAGSCOPE_CAPTURE=OFF, or CUPTI was
// not found): record, launch, attach and ps are then unavailable.
bool captureBuilt();
// Why capture is unavailable in such a build, with what to install.
const char* noCaptureReason();
// False when this build has no video metrics (configured with FRAGSCOPE_VIDEO=OFF, or OpenCV was
// not found): `metrics compute` and the GUI's File › Add video… are then unavailable.
bool videoBuilt();
// Why video metrics are unavailable in such a build, with what to install.
const char* noVideoReason();
// Search order for libcupti, documented in the user guide.
std::string findCupti();

} // namespace fs
