// Locating installed dependencies (see paths.h).
#include "edgetrain/paths.h"

#include <cstdlib>
#include <filesystem>

namespace edgetrain {

std::vector<std::string> deps_candidates(const std::string& rel) {
  std::vector<std::string> c;
  if (const char* env = std::getenv("EDGETRAIN_DEPS"); env && *env) c.push_back(std::string(env) + "/" + rel);
#ifdef EDGETRAIN_DEPS_DIR
  c.push_back(std::string(EDGETRAIN_DEPS_DIR) + "/" + rel);
#endif
  return c;
}

std::string deps_path(const std::string& rel) {
  const std::vector<std::string> c = deps_candidates(rel);
  std::error_code ec;
  for (const std::string& p : c)
    if (std::filesystem::exists(p, ec)) return p;
  return c.empty() ? ".deps/" + rel : c.front();
}

}  // namespace edgetrain
