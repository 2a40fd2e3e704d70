// `fragscope export timeline FILE -o OUT.csv|OUT.json`: the timeline samples as data, from the
// analysis engine (the image forms stay in cmd_export.cpp).
#pragma once

#include "command.h"

#include <string>

namespace fs::cli {

// OUT's extension, lower case, with its dot (".png"); empty when it has none.
std::string extensionOf(const std::string& path);
// True when OUT names a data format (.csv or .json) rather than an image.
bool isTimelineDataOutput(const std::string& out);
int exportTimelineData(Args& a);

} // namespace fs::cli
