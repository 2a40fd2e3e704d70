// `fragscope report --ranks A B C…` (report_ranks.cpp): several ranks of one job as one run.
#pragma once

#include "command.h"

namespace fs::cli {

int runReportRanks(Args& a);

} // namespace fs::cli
