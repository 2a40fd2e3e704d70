// Text and JSON of a Report (report.h): what `fragscope report` prints and the GUI's report
// window shows, byte for byte. JSON field names: docs/json.md.
#pragma once

#include "report.h"

#include <string>

namespace fs::analysis {

std::string reportText(const Report& r);
std::string reportJson(const Report& r); // one object, with schema_version, and a final newline

} // namespace fs::analysis
