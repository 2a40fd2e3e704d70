// Output of the OOM diagnosis (Engine::ooms()) for the CLI and reports: one JSON object per OOM
// and a text block, shared by `report` and `collapse`.
#pragma once

#include "types.h"

#include <string>

namespace fs {
class JsonWriter;
}

namespace fs::analysis {

void writeOom(JsonWriter& j, const OomDiagnosis& o); // {...}
std::string oomText(const OomDiagnosis& o, int64_t begin, bool ordinal);

} // namespace fs::analysis
