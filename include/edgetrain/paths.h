// Where the files scripts/setup.sh installs (Dawn, GPT-2 BPE files, the KJV corpus) are found.
#pragma once

#include <string>

namespace edgetrain {

// The first existing of: $EDGETRAIN_DEPS/<rel>, <deps dir configured at build time>/<rel>. Returns the
// first candidate (for error messages) when none exists.
std::string deps_path(const std::string& rel);

}  // namespace edgetrain
