// Per-process temporary files for tests: temp_path("interop", "x.gguf") is a path in
// $TMPDIR/edgetrain_interop_<pid>/ (CTest runs test processes in parallel), a folder created on first use and
// removed with everything in it when the process exits.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

namespace edgetrain::test {

inline std::string temp_path(const std::string& suite, const std::string& name) {
  struct Folders {
    std::map<std::string, std::filesystem::path> by_suite;
    ~Folders() {
      for (auto& [suite, dir] : by_suite) {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
      }
    }
  };
  static Folders folders;
  auto [it, added] = folders.by_suite.try_emplace(
      suite, std::filesystem::temp_directory_path() / ("edgetrain_" + suite + "_" + std::to_string(::getpid())));
  std::filesystem::create_directories(it->second);
  return (it->second / name).string();
}

}  // namespace edgetrain::test
