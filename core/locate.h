// Finding a library the program loads at run time (the capture agent, the video module) in the
// build tree or the installed layout (packaging/: bin/fragscope beside lib/fragscope/).
#pragma once

#include <string>
#include <vector>

namespace fs {

// The first that exists of: $envVar; FILE beside the running executable; ../lib/fragscope/FILE
// and ../lib/FILE from its folder; then `more` (build-tree paths). Absolute; empty when none.
// `tried`, when given, receives the candidates in order (for an error message).
std::string findRuntimeLibrary(const std::string& file, const char* envVar,
                               const std::vector<std::string>& more,
                               std::vector<std::string>* tried = nullptr);

} // namespace fs
