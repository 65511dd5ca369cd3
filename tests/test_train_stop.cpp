// How a run stops and continues, against the real CLI in child processes: SIGINT and SIGTERM stop it after
// the step under way with a checkpoint of that step, a message naming the --resume command and exit status
// 128 + signal, and --resume then reaches the same losses and weights as an uninterrupted run; a second
// SIGINT during that save ends the process at once and leaves the previous checkpoint whole. Skipped steps
// (--skip-nan-steps) are steps taken: a checkpoint written after them holds them, and --resume goes on after.
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

// Waits until the run's metrics file has at least `n` step lines (or `limit_s` passes); returns the count.
size_t wait_for_steps(const std::string& out, size_t n, double limit_s) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(limit_s);
  size_t have = 0;
  while ((have = losses(out + "/metrics.jsonl").size()) < n && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return have;
}

TEST_F(TrainStop, SigintAndSigtermStopAfterAStepWithACheckpointAndResumeMatches) {
  const std::vector<std::string> common = {"--steps", "1000", "--checkpoint-every", "100000", "--eval-every", "100"};
  const std::string full = dir_ + "/full";
  std::vector<std::string> args = tiny_train(full, common);
  Outcome whole = run(args);
  ASSERT_EQ(whole.code(), 0) << whole.describe();
  const auto want = losses(full + "/metrics.jsonl");
  ASSERT_EQ(want.size(), 1000u);

  for (int sig : {SIGINT, SIGTERM}) {
    const std::string name = sig == SIGINT ? "SIGINT" : "SIGTERM", out = dir_ + "/" + name;
    SCOPED_TRACE(name);
    ChildOptions o;
    o.log = dir_ + "/" + name + ".txt";
    const pid_t pid = spawn_cli(tiny_train(out, common), o);
    ASSERT_GE(wait_for_steps(out, 10, 30), 10u) << slurp(o.log);
    ::kill(pid, sig);
    Outcome r = wait_child(pid, o.log, 30);
    ASSERT_TRUE(r.exited()) << r.describe();
    EXPECT_EQ(r.code(), 128 + sig) << r.describe();
    // The checkpoint holds the last step the run took, which is the last line of its metrics.
    const auto got = losses(out + "/metrics.jsonl");
    ASSERT_FALSE(got.empty());
    const int64_t last = got.rbegin()->first;
    ASSERT_LT(last, 1000) << "the run ended before the signal: nothing tested";
    EXPECT_EQ(static_cast<int64_t>(got.size()), last);
    EXPECT_EQ(load_ok(out + "/checkpoint.safetensors"), last);
    EXPECT_NE(r.output.find("stopped by " + name + " after step " + std::to_string(last) + " of 1000: checkpoint " +
                            out + "/checkpoint.safetensors holds step " + std::to_string(last)),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("edgetrain train --resume --out " + out + " --steps 1000 --backend cpu"), std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("Sample"), std::string::npos) << "a stopped run writes no sample:\n" << r.output;
    EXPECT_FALSE(has_temp_file(out));

    Outcome resumed = run({"train", "--resume", "--out", out, "--steps", "1000", "--backend", "cpu", "--threads", "1",
                           "--no-progress", "--sample-tokens", "0", "--checkpoint-every", "100000", "--eval-every",
                           "100"});
    ASSERT_EQ(resumed.code(), 0) << resumed.describe();
    EXPECT_NE(resumed.output.find("steps " + std::to_string(last + 1) + "..1000"), std::string::npos)
        << resumed.output;
    EXPECT_EQ(losses(out + "/metrics.jsonl"), want) << "the resumed run's losses differ from the uninterrupted run's";
    expect_same_checkpoint(out + "/checkpoint.safetensors", full + "/checkpoint.safetensors");
  }
}

// A second SIGINT once the stop's checkpoint save has begun (its temp file exists): the process ends at once
// (killed by SIGINT, as a shell expects), and the checkpoint from before is byte-identical and loads. The
// save is short, so the second signal is tried on a few runs until one lands in it.
TEST_F(TrainStop, SecondSigintDuringTheSaveQuitsAtOnceAndKeepsThePreviousCheckpoint) {
  const std::string out = dir_ + "/run", ckpt = out + "/checkpoint.safetensors";
  // A wider model than tiny: a checkpoint of ~13 MB takes a while to write and sync.
  const std::string cfg = dir_ + "/wide.json";
  std::ofstream(cfg) << R"({"preset": "tiny", "dim": 256, "ffn_dim": 512, "n_heads": 4})";
  std::vector<std::string> first = tiny_train(out, {"--steps", "2", "--eval-every", "1000"});
  first[1] = "--config", first[2] = cfg;
  Outcome r0 = run(first);
  ASSERT_EQ(r0.code(), 0) << r0.describe();
  int landed = 0;
  for (int attempt = 0; attempt < 6 && landed == 0; ++attempt) {
    const std::string before = slurp(ckpt);
    const int64_t before_step = load_ok(ckpt);
    ChildOptions o;
    o.log = dir_ + "/second.txt";
    const pid_t pid = spawn_cli({"train", "--resume", "--out", out, "--steps", "100000", "--checkpoint-every",
                                 "100000", "--eval-every", "100000", "--backend", "cpu", "--threads", "1",
                                 "--no-progress", "--sample-tokens", "0"},
                                o);
    ASSERT_GE(wait_for_steps(out, 5, 60), 5u) << slurp(o.log);
    ::kill(pid, SIGINT);
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    bool saving = false;
    auto running = [pid] {  // without reaping it: wait_child does that
      siginfo_t info{};
      return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == 0;
    };
    while (!(saving = has_temp_file(out)) && Clock::now() < deadline && running())
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    if (saving) ::kill(pid, SIGINT);
    Outcome r = wait_child(pid, o.log, 30);
    if (!saving) {  // the save was over before it was seen: a clean stop; start again from that checkpoint
      ASSERT_EQ(r.code(), 128 + SIGINT) << r.describe();
      continue;
    }
    ++landed;
    ASSERT_TRUE(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGINT) << r.describe();
    EXPECT_NE(r.output.find("Ctrl-C again quits at once"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("stopped by SIGINT"), std::string::npos) << "the save finished:\n" << r.output;
    EXPECT_EQ(slurp(ckpt), before) << "the checkpoint changed";
    EXPECT_EQ(load_ok(ckpt), before_step);
  }
  EXPECT_EQ(landed, 1) << "no second SIGINT landed during a save in 6 runs";
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
