// The real `edgetrain` CLI in child processes, for tests of what happens from outside a run (signals,
// limits, faults): start it with arguments, environment and rlimits, wait for it with a deadline, read what
// it printed; and a fixture with a temp folder, a small corpus and a quick `train` command line.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace edgetrain::test {

// The CLI's exit status per error kind (tools/main.cpp, README).
constexpr int kExitMisuse = 1, kExitUnsupported = 2, kExitDevice = 3, kExitIo = 4, kExitNumeric = 5;

struct ChildOptions {
  std::vector<std::pair<std::string, std::string>> env;  // set in the child (empty value: unset)
  rlim_t fsize_limit = RLIM_INFINITY;                       // RLIMIT_FSIZE in bytes
  rlim_t as_limit = RLIM_INFINITY;                          // RLIMIT_AS in bytes (caps lavapipe's "VRAM")
  std::string log;                                          // stdout+stderr go here
};

// The CLI binary: $EDGETRAIN_TEST_CLI where set (the build carried to another machine, where the path it
// was built at does not exist), else that path.
std::string cli_path();

// Starts the CLI with `args`; returns its pid.
pid_t spawn_cli(const std::vector<std::string>& args, const ChildOptions& o);

struct Outcome {
  int status = 0;  // raw waitpid status
  bool timed_out = false;
  std::string output;  // stdout + stderr
  bool exited() const { return WIFEXITED(status); }
  int code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
  std::string describe() const;
};

std::string slurp(const std::string& path);

// Waits for `pid` at most `limit_s` seconds (then SIGKILLs it: a hang is a failure).
Outcome wait_child(pid_t pid, const std::string& log, double limit_s);

// How often `what` occurs in `text`.
size_t count_of(const std::string& text, const std::string& what);

// Loads a checkpoint into a fresh CPU model (throws on any problem); returns its step.
int64_t load_ok(const std::string& path);
// Whether `dir` holds a checkpoint temp file (checkpoint.safetensors.tmp.<pid>): a save under way or killed.
bool has_temp_file(const std::string& dir);

// A temp folder with corpus.txt (60 lines), removed afterwards; run() starts the CLI and waits for it.
class CliTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  Outcome run(const std::vector<std::string>& args, double limit_s = 60, ChildOptions o = {});
  // `train` on the tiny preset with small batches; `extra` adds flags not listed here (none may repeat).
  std::vector<std::string> tiny_train(const std::string& out, std::vector<std::string> extra = {});

  std::string dir_, corpus_;
  int runs_ = 0;
};

}  // namespace edgetrain::test
