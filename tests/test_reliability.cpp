// Faults from outside, against the real `edgetrain` CLI in child processes: SIGKILL at random moments
// (also mid checkpoint write) and the temp files it leaves, a full disk during a save, NaN losses (also
// steps skipped without end), checkpoints holding NaN/Inf. Each must end in one clear message, the exit
// status of its error kind and a loadable last checkpoint. Bad flags, configs and corpora:
// test_reliability_input.cpp; missing, exhausted and failing devices: test_reliability_devices.cpp.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "edgetrain/backends.h"
#include "edgetrain/checkpoint.h"
#include "edgetrain/safetensors.h"
#include "harness/checkpoint_files.h"
#include "harness/cli_child.h"
#include "io/atomic_file.h"

namespace edgetrain::test {
namespace {

namespace fs = std::filesystem;

using Reliability = CliTest;

using Clock = std::chrono::steady_clock;

// SIGKILL at random moments, half of them the instant a checkpoint temp file appears (mid write, before
// the rename). After every kill the latest checkpoint must load; every 8th also resumes and evaluates (or the
// next one that finds a checkpoint: a slow machine, or a sanitizer build, may have none written by then).
// The runs' total (4000 steps) is one no bare --resume finishes before its kill: with 400, a third of them
// finished first on a fast run, and the kills came to 50-51 of the 50 asked for.
TEST_F(Reliability, SigkillAtRandomMomentsKeepsALoadableCheckpoint) {
  const std::string out = dir_ + "/run";
  std::mt19937 rng(20261129);
  int kills = 0, mid_write = 0, loaded = 0, resumed = 0;
  bool resume_due = false;
  for (int i = 0; i < 56; ++i) {
    const bool have = fs::exists(out + "/checkpoint.safetensors");
    std::vector<std::string> args =
        have && i % 3 == 0 ? std::vector<std::string>{"train", "--resume", "--out", out, "--backend", "cpu", "--threads",
                                                      "1", "--no-progress", "--sample-tokens", "0"}
                           : tiny_train(out, {"--steps", "4000", "--checkpoint-every", "1", "--eval-every", "1000"});
    ChildOptions o;
    o.log = dir_ + "/kill.txt";
    pid_t pid = spawn_cli(args, o);
    if (i % 2 == 0) {  // a random moment: start-up, loading, training or saving
      std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 300)(rng)));
    } else {  // the moment a checkpoint is being written
      auto deadline = Clock::now() + std::chrono::seconds(3);
      while (!has_temp_file(out) && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::microseconds(100));
      if (has_temp_file(out)) ++mid_write;
    }
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) ++kills;
    resume_due |= i % 8 == 7;
    const std::string ckpt = out + "/checkpoint.safetensors";
    if (!fs::exists(ckpt)) continue;
    int64_t step = 0;
    ASSERT_NO_THROW(step = load_ok(ckpt)) << "after kill " << i << "\n" << slurp(o.log);
    ++loaded;
    if (resume_due) {  // resume to completion of a short time slice: the step must advance
      resume_due = false;
      // --steps: a bare --resume goes on to the checkpoint's own total (4000), which a run may have reached.
      Outcome r = run({"train", "--resume", "--out", out, "--steps", "100000", "--backend", "cpu", "--threads", "1",
                       "--no-progress", "--sample-tokens", "0", "--time-limit", "0.2"});
      ASSERT_EQ(r.code(), 0) << r.describe();
      EXPECT_GT(load_ok(ckpt), step) << r.output;
      Outcome e = run({"eval", "--checkpoint", ckpt, "--backend", "cpu", "--corpus", corpus_, "--seq", "16",
                       "--batches", "1"});
      ASSERT_EQ(e.code(), 0) << e.describe();
      EXPECT_NE(e.output.find("perplexity"), std::string::npos) << e.output;
      ++resumed;
    }
  }
  std::printf("[reliability] %d SIGKILLs (%d mid checkpoint write), %d checkpoints loaded, %d resumed\n", kills,
              mid_write, loaded, resumed);
  EXPECT_GE(kills, 50);
  EXPECT_GE(mid_write, 10);
  EXPECT_GE(resumed, 5);
}

// A full disk mid save (RLIMIT_FSIZE below the checkpoint's size, SIGXFSZ left at its default): one clear
// error, non-zero exit, the previous checkpoint byte-identical and loadable, no temp file left behind.
// `--resume` without --steps continues to the checkpoint's own total (not the fresh-run default of 1200), so
// it finishes the schedule the run started; `--time` plans, says so and records its last plan.
TEST_F(Reliability, BareResumeKeepsTheTotalAndTimeRecordsItsPlan) {
  const std::string out = dir_ + "/bare";
  Outcome first = run(tiny_train(out, {"--steps", "6", "--eval-every", "1000", "--time-limit", "1e-9"}));
  ASSERT_EQ(first.code(), 0) << first.describe();
  Outcome resumed = run({"train", "--resume", "--out", out, "--backend", "cpu", "--threads", "1", "--no-progress",
                         "--sample-tokens", "0"});
  ASSERT_EQ(resumed.code(), 0) << resumed.describe();
  EXPECT_NE(resumed.output.find("steps 2..6"), std::string::npos) << resumed.output;
  EXPECT_NE(resumed.output.find("done: 6 steps"), std::string::npos) << resumed.output;

  const std::string timed = dir_ + "/timed";
  Outcome t = run(tiny_train(timed, {"--time", "1.5s", "--warmup", "4", "--eval-every", "1000"}), 120);
  ASSERT_EQ(t.code(), 0) << t.describe();
  EXPECT_NE(t.output.find("time budget 1.5s: after 4 steps"), std::string::npos) << t.output;
  auto meta = read_checkpoint_metadata(timed + "/checkpoint.safetensors");
  const std::string total = std::to_string(nlohmann::json::parse(meta.at("train_options")).at("total_steps").get<int64_t>());
  EXPECT_NE(t.output.find(" steps in all (warmup 4, cosine to step "), std::string::npos) << t.output;
  EXPECT_NE(t.output.find("done: " + total + " steps"), std::string::npos) << t.output;  // the last plan's total
}

TEST_F(Reliability, FullDiskDuringSaveKeepsThePreviousCheckpoint) {
  const std::string out = dir_ + "/run", ckpt = out + "/checkpoint.safetensors";
  Outcome first = run(tiny_train(out, {"--steps", "2", "--eval-every", "1000"}));
  ASSERT_EQ(first.code(), 0) << first.describe();
  const std::string before = slurp(ckpt);
  ASSERT_GT(before.size(), 100000u);
  ChildOptions o;
  o.fsize_limit = 64 * 1024;  // the metrics and token cache fit; the checkpoint does not
  Outcome r = run({"train", "--resume", "--out", out, "--steps", "4", "--backend", "cpu", "--threads", "1",
                   "--no-progress", "--sample-tokens", "0"}, 60, o);
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code(), kExitIo) << r.describe();
  EXPECT_NE(r.output.find("previous checkpoint"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("intact"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("step 4: writing the checkpoint failed"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(step 2)"), std::string::npos) << r.output;
  EXPECT_EQ(slurp(ckpt), before);
  EXPECT_EQ(load_ok(ckpt), 2);
  EXPECT_FALSE(has_temp_file(out));
}

// A learning rate that overflows the weights: the run stops at the first non-finite step, naming it,
// exits non-zero, and the last checkpoint (written before) holds no NaN/Inf and loads.
TEST_F(Reliability, NanLossStopsNamingTheStepAndKeepsTheLastGoodCheckpoint) {
  const std::string out = dir_ + "/run", ckpt = out + "/checkpoint.safetensors";
  Outcome r = run(tiny_train(out, {"--steps", "6", "--checkpoint-every", "1", "--eval-every", "1000", "--lr", "1e30",
                                   "--warmup", "0", "--mode", "fp32"}));
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code(), kExitNumeric) << r.describe();
  EXPECT_NE(r.output.find("error: train: step "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("last good checkpoint"), std::string::npos) << r.output;
  ASSERT_TRUE(fs::exists(ckpt)) << r.output;
  int64_t step = load_ok(ckpt);
  EXPECT_NE(r.output.find("step " + std::to_string(step + 1) + ":"), std::string::npos)
      << "the checkpoint is at step " << step << ", the message should name the next one:\n" << r.output;
  expect_all_finite(ckpt);
}

// The same fault with --skip-nan-steps: the run finishes, reports skipped steps, and no NaN/Inf ever reaches
// a written checkpoint.
TEST_F(Reliability, SkipNanStepsNeverWritesNonFiniteWeights) {
  const std::string out = dir_ + "/run", ckpt = out + "/checkpoint.safetensors";
  Outcome r = run(tiny_train(out, {"--steps", "6", "--checkpoint-every", "1", "--eval-every", "1000", "--lr", "1e30",
                                   "--warmup", "0", "--mode", "fp32", "--skip-nan-steps"}));
  ASSERT_EQ(r.code(), 0) << r.describe();
  EXPECT_NE(r.output.find("step skipped"), std::string::npos) << r.output;
  ASSERT_TRUE(fs::exists(ckpt));
  load_ok(ckpt);
  expect_all_finite(ckpt);
}

// A checkpoint whose master weights or AdamW moments hold NaN/Inf is rejected on load, naming the file, the
// tensor and what it is — before the model is touched — by the library and by the CLI (eval, --resume).
TEST_F(Reliability, CheckpointWithNanOrInfIsRejectedNamingTheTensor) {
  const std::string out = dir_ + "/run", ckpt = out + "/checkpoint.safetensors";
  Outcome first = run(tiny_train(out, {"--steps", "2", "--eval-every", "1000"}));
  ASSERT_EQ(first.code(), 0) << first.describe();
  const std::string good = slurp(ckpt);
  std::string moment;
  const auto reader = safetensors::Reader::open(ckpt);
  for (const auto& t : reader.tensors())
    if (moment.empty() && t.name.size() > 7 && t.name.compare(t.name.size() - 7, 7, ".adam_v") == 0) moment = t.name;
  ASSERT_FALSE(moment.empty());
  const std::vector<std::tuple<std::string, float, std::string>> table = {
      {"norm.weight", std::nanf(""), "master weights"},
      {"norm.weight", -INFINITY, "master weights"},
      {moment, INFINITY, "AdamW moment"},
  };
  for (const auto& [tensor, value, role] : table) {
    SCOPED_TRACE(tensor + " = " + std::to_string(value));
    std::ofstream(ckpt, std::ios::binary | std::ios::trunc) << good;
    poke(ckpt, tensor, value);
    auto backend = make_cpu_backend();
    Model m(*backend, read_checkpoint_config(ckpt));
    m.steps_done = 77;
    try {
      load_checkpoint(ckpt, m);
      ADD_FAILURE() << "a checkpoint holding " << value << " in " << tensor << " was loaded";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(e.kind(), ErrorKind::numeric) << msg;
      EXPECT_NE(msg.find(ckpt), std::string::npos) << msg;
      EXPECT_NE(msg.find("'" + tensor + "'"), std::string::npos) << msg;
      EXPECT_NE(msg.find(role), std::string::npos) << msg;
      EXPECT_NE(msg.find("at index 1"), std::string::npos) << msg;
    }
    EXPECT_EQ(m.steps_done, 77) << "a rejected checkpoint changed the model";
    Outcome e = run({"eval", "--checkpoint", ckpt, "--backend", "cpu", "--corpus", corpus_, "--seq", "16",
                     "--batches", "1"});
    ASSERT_TRUE(e.exited()) << e.describe();
    EXPECT_EQ(e.code(), kExitNumeric) << e.describe();
    EXPECT_NE(e.output.find("edgetrain: error: checkpoint '" + ckpt + "': tensor '" + tensor + "'"), std::string::npos)
        << e.output;
  }
  Outcome r = run({"train", "--resume", "--out", out, "--steps", "4", "--backend", "cpu", "--threads", "1",
                   "--no-progress", "--sample-tokens", "0"});
  EXPECT_EQ(r.code(), kExitNumeric) << r.describe();
  EXPECT_NE(r.output.find("'" + moment + "' (AdamW moment) holds inf"), std::string::npos) << r.output;
  // --init reads only the masters, with the same check.
  std::ofstream(ckpt, std::ios::binary | std::ios::trunc) << good;
  poke(ckpt, "norm.weight", std::nanf(""));
  Outcome i = run({"train", "--init", ckpt, "--corpus", corpus_, "--seq", "16", "--batch", "2", "--steps", "1",
                   "--backend", "cpu", "--threads", "1", "--out", dir_ + "/init", "--no-progress", "--sample-tokens",
                   "0"});
  EXPECT_EQ(i.code(), kExitNumeric) << i.describe();
  EXPECT_NE(i.output.find("train: --init: tensor 'norm.weight' in '" + ckpt + "' holds nan"), std::string::npos)
      << i.output;
}

// A pid that no process has: a child that has exited and been reaped.
pid_t dead_pid() {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

// checkpoint.safetensors.tmp.<pid> left by a writer killed mid save: removed at the start of the next run of
// that folder (with a line saying so) and before every atomic write; a live writer's temp file and files
// that merely look similar stay.
TEST_F(Reliability, StaleCheckpointTempFilesAreRemoved) {
  const std::string out = dir_ + "/run", ckpt = out + "/checkpoint.safetensors";
  Outcome first = run(tiny_train(out, {"--steps", "1", "--eval-every", "1000"}));
  ASSERT_EQ(first.code(), 0) << first.describe();
  const std::string stale = ckpt + ".tmp." + std::to_string(dead_pid());
  const std::string live = ckpt + ".tmp." + std::to_string(::getpid());  // this test process: alive
  const std::vector<std::string> keep = {live, ckpt + ".tmp.12ab", ckpt + ".tmp.", out + "/other.tmp.1",
                                         out + "/checkpoint.safetensors.tmp.-5"};
  for (const std::string& f : keep) std::ofstream(f) << "x";
  std::ofstream(stale) << std::string(1000, 'x');
  Outcome r = run({"train", "--resume", "--out", out, "--steps", "2", "--backend", "cpu", "--threads", "1",
                   "--no-progress", "--sample-tokens", "0"});
  ASSERT_EQ(r.code(), 0) << r.describe();
  EXPECT_FALSE(fs::exists(stale)) << r.output;
  EXPECT_NE(r.output.find("removed " + stale), std::string::npos) << r.output;
  for (const std::string& f : keep) EXPECT_TRUE(fs::exists(f)) << f;
  EXPECT_EQ(load_ok(ckpt), 2);

  // The atomic writer itself (every checkpoint save, export and safetensors file) cleans up too.
  const std::string file = dir_ + "/weights.safetensors", stale2 = file + ".tmp." + std::to_string(dead_pid());
  std::ofstream(stale2) << "x";
  safetensors::Writer w;
  const float one = 1.0f;
  w.add("x", "F32", {1}, &one, sizeof one);
  w.save(file);
  EXPECT_FALSE(fs::exists(stale2));
  EXPECT_EQ(remove_stale_atomic_temps(file), std::vector<std::string>{});
}

// --skip-nan-steps has a limit: after --max-skipped-steps skipped steps in a row the run stops with an error
// naming them (non-zero exit, the checkpoint before them intact and finite); a run in which every step was
// skipped fails even below the limit: nothing was trained.
TEST_F(Reliability, SkipNanStepsStopsWhenStepsKeepFailing) {
  const std::string out = dir_ + "/run", ckpt = out + "/checkpoint.safetensors";
  Outcome r = run(tiny_train(out, {"--steps", "40", "--checkpoint-every", "1", "--eval-every", "1000", "--lr", "1e30",
                                   "--warmup", "0", "--mode", "fp32", "--skip-nan-steps", "--max-skipped-steps", "3"}));
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code(), kExitNumeric) << r.describe();
  EXPECT_NE(r.output.find("error: train: step "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("3 steps in a row"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--max-skipped-steps 3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("last good checkpoint"), std::string::npos) << r.output;
  EXPECT_EQ(count_of(r.output, "step skipped"), 3u) << r.output;
  const int64_t step = load_ok(ckpt);
  EXPECT_NE(r.output.find("(step " + std::to_string(step) + ")"), std::string::npos) << r.output;
  expect_all_finite(ckpt);

  // The weights of that checkpoint overflow every forward: a run started from them skips every step.
  Outcome all = run({"train", "--init", ckpt, "--mode", "fp32", "--corpus", corpus_, "--batch", "2", "--seq", "16",
                     "--steps", "3", "--eval-every", "1000", "--backend", "cpu", "--threads", "1", "--out",
                     dir_ + "/all", "--no-progress", "--sample-tokens", "0", "--skip-nan-steps"});
  ASSERT_TRUE(all.exited()) << all.describe();
  EXPECT_EQ(all.code(), kExitNumeric) << all.describe();
  EXPECT_EQ(count_of(all.output, "step skipped"), 3u) << all.output;
  EXPECT_NE(all.output.find("error: train: every step of this run (1..3)"), std::string::npos) << all.output;
  EXPECT_FALSE(fs::exists(dir_ + "/all/checkpoint.safetensors"));
}

}  // namespace
}  // namespace edgetrain::test
