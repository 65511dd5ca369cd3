#include "core/report_file.h"

#include <cstdio>

namespace edgetrain {

void write_report_file(const std::string& path, const std::string& text, const char* who) {
  if (path == "-") {
    std::fputs(text.c_str(), stderr);
    return;
  }
  const std::string tmp = path + ".tmp";
  if (std::FILE* f = std::fopen(tmp.c_str(), "w")) {
    std::fputs(text.c_str(), f);
    std::fclose(f);
    if (std::rename(tmp.c_str(), path.c_str()) != 0) std::remove(tmp.c_str());
  } else {
    std::fprintf(stderr, "%s: cannot write the profile to %s\n", who, path.c_str());
  }
}

}  // namespace edgetrain
