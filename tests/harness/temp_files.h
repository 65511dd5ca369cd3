// Per-process temporary files and folders for tests: temp_path("interop", "x.gguf") is a path in
// $TMPDIR/edgetrain_interop_<pid>/ (CTest runs test processes in parallel), a folder created on first use and
// removed with everything in it when the process exits.
#pragma once

#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
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

// A folder of its own per test and process ($TMPDIR/edgetrain_<prefix>_<name>_<pid>), empty at the start and
// removed with everything in it at the end of its scope.
struct TempDir {
  std::filesystem::path path;
  TempDir(const std::string& prefix, const std::string& name)
      : path(std::filesystem::temp_directory_path() /
             ("edgetrain_" + prefix + "_" + name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string str() const { return path.string(); }
};

// A fixture with a TempDir of its own per test (prefix: the suite, name: the test), created empty.
class TempDirTest : public ::testing::Test {
 protected:
  std::filesystem::path dir;
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    tmp_ = std::make_unique<TempDir>(info->test_suite_name(), info->name());
    dir = tmp_->path;
    std::filesystem::create_directories(dir);
  }
  void TearDown() override { tmp_.reset(); }
  std::string path(const std::string& name) const { return (dir / name).string(); }

 private:
  std::unique_ptr<TempDir> tmp_;
};

}  // namespace edgetrain::test
