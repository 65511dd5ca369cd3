// How a run stops and continues, against the real CLI in child processes. Skipped steps (--skip-nan-steps)
// are steps taken: a checkpoint written after them holds them, and --resume goes on after them.
#include <signal.h>
#include <unistd.h>

#include <sys/wait.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "edgetrain/safetensors.h"
#include "harness/cli_child.h"

namespace edgetrain::test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using TrainStop = CliTest;

// The "loss" of every line of a metrics file, by step.
std::map<int64_t, double> losses(const std::string& metrics) {
  std::map<int64_t, double> out;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.contains("loss")) out[j["step"].get<int64_t>()] = j["loss"].get<double>();
  }
  return out;
}

// Two checkpoints hold the same tensors, byte for byte, and the same step counts.
void expect_same_checkpoint(const std::string& a, const std::string& b) {
  auto ra = safetensors::Reader::open(a), rb = safetensors::Reader::open(b);
  ASSERT_EQ(ra.tensors().size(), rb.tensors().size());
  for (const auto& t : ra.tensors()) {
    ASSERT_TRUE(rb.contains(t.name)) << t.name;
    ASSERT_EQ(t.nbytes(), rb.info(t.name).nbytes()) << t.name;
    EXPECT_EQ(std::memcmp(ra.data(t.name), rb.data(t.name), t.nbytes()), 0) << t.name << " differs";
  }
  for (const char* k : {"step", "adam_steps"}) EXPECT_EQ(ra.metadata().at(k), rb.metadata().at(k)) << k;
}

// Steps 3 and 4 skipped (EDGETRAIN_TRAIN_FAULT makes their loss NaN): a run of 4 steps ends on them, and its
// checkpoint holds step 4 with the weights and moments of step 2; --resume (without the fault: a repeated
// step 3 or 4 would now train) continues at step 5 and ends where one uninterrupted run of 8 ends, byte for
// byte — which also needs the AdamW update count (2 fewer than the steps) to survive the checkpoint.
TEST_F(TrainStop, SkippedStepsAreStepsTakenAndResumeContinuesAfterThem) {
  const std::vector<std::string> common = {"--skip-nan-steps", "--eval-every", "1000", "--checkpoint-every", "1000"};
  ChildOptions fault;
  fault.env = {{"EDGETRAIN_TRAIN_FAULT", "nan_loss@3,4"}};
  auto with = [&](std::vector<std::string> a, std::vector<std::string> more) {
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  const std::string full = dir_ + "/full", part = dir_ + "/part";
  Outcome whole = run(with(tiny_train(full, common), {"--steps", "8"}), 60, fault);
  ASSERT_EQ(whole.code(), 0) << whole.describe();
  EXPECT_EQ(count_of(whole.output, "step skipped"), 2u) << whole.output;

  Outcome first = run(with(tiny_train(part, common), {"--steps", "4"}), 60, fault);
  ASSERT_EQ(first.code(), 0) << first.describe();
  EXPECT_NE(first.output.find("the last 2 steps were skipped"), std::string::npos) << first.output;
  EXPECT_NE(first.output.find("the checkpoint holds step 4"), std::string::npos) << first.output;
  EXPECT_EQ(load_ok(part + "/checkpoint.safetensors"), 4);
  EXPECT_EQ(safetensors::Reader::open(part + "/checkpoint.safetensors").metadata().at("adam_steps"), "2");

  Outcome resumed = run({"train", "--resume", "--out", part, "--steps", "8", "--backend", "cpu", "--threads", "1",
                         "--no-progress", "--sample-tokens", "0", "--eval-every", "1000", "--skip-nan-steps"});
  ASSERT_EQ(resumed.code(), 0) << resumed.describe();
  EXPECT_NE(resumed.output.find("steps 5..8"), std::string::npos) << resumed.output;
  EXPECT_EQ(count_of(resumed.output, "step skipped"), 0u) << resumed.output;
  EXPECT_EQ(losses(part + "/metrics.jsonl"), losses(full + "/metrics.jsonl"));
  expect_same_checkpoint(part + "/checkpoint.safetensors", full + "/checkpoint.safetensors");

  ChildOptions bad;
  bad.env = {{"EDGETRAIN_TRAIN_FAULT", "nan_loss@0"}};
  Outcome rejected = run(with(tiny_train(dir_ + "/bad", common), {"--steps", "2"}), 60, bad);
  EXPECT_NE(rejected.code(), 0) << rejected.describe();
  EXPECT_NE(rejected.output.find("EDGETRAIN_TRAIN_FAULT='nan_loss@0'"), std::string::npos) << rejected.output;
}

}  // namespace
}  // namespace edgetrain::test
