// Versions of the libraries fragscope runs with, for --version and Help › About.
#pragma once

#include <string>

namespace fs {

std::string fragscopeVersion();
std::string sqliteVersion();
std::string fmtVersion();
// CUPTI is looked up at run time (the user's CUDA installation); "not found" when absent.
std::string cuptiVersion();
// Search order for libcupti, documented in the user guide.
std::string findCupti();

} // namespace fs
