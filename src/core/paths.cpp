// Locating installed dependencies (see paths.h).
#include "edgetrain/paths.h"

#include <cstdlib>
#include <filesystem>
#include <vector>

namespace edgetrain {

std::string deps_path(const std::string& rel) {
  std::vector<std::string> roots;
  if (const char* env = std::getenv("EDGETRAIN_DEPS"); env && *env) roots.push_back(env);
#ifdef EDGETRAIN_DEPS_DIR
  roots.push_back(EDGETRAIN_DEPS_DIR);
#endif
  for (const std::string& r : roots)
    if (std::filesystem::exists(r + "/" + rel)) return r + "/" + rel;
  return roots.empty() ? rel : roots.front() + "/" + rel;
}

}  // namespace edgetrain
