// Where the files scripts/setup.sh installs (Dawn, GPT-2 BPE files, the KJV corpus) are found: the one
// lookup every part of the library uses.
#pragma once

#include <string>
#include <vector>

namespace edgetrain {

// The places <rel> may be, in order: $EDGETRAIN_DEPS/<rel> when that variable is set and not empty, then
// <deps dir configured at build time (EDGETRAIN_DEPS_DIR)>/<rel>. For callers that try each one (Dawn's
// loader dlopens them in turn and reports every failure).
std::vector<std::string> deps_candidates(const std::string& rel);

// The first existing of deps_candidates(rel); the first candidate (for error messages) when none exists.
std::string deps_path(const std::string& rel);

}  // namespace edgetrain
