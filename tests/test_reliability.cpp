// Faults from outside, against the real `edgetrain` CLI in child processes: SIGKILL at random moments
// (also mid checkpoint write) and the temp files it leaves, a full disk during a save, NaN losses (also
// steps skipped without end), missing or exhausted devices, no usable Dawn, kernels the driver cannot
// compile and the fallback through a --backend list, checkpoints holding NaN/Inf, and bad flags, configs
// and corpora. Each must end in one clear message, the exit status of its error kind and a loadable last
// checkpoint.
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "edgetrain/backends.h"
#include "edgetrain/checkpoint.h"
#include "edgetrain/safetensors.h"
#include "harness/cli_child.h"
#include "io/atomic_file.h"

namespace edgetrain::test {
namespace {

namespace fs = std::filesystem;

// The CLI's exit status per error kind (tools/main.cpp, README).
constexpr int kExitMisuse = 1, kExitUnsupported = 2, kExitDevice = 3, kExitIo = 4, kExitNumeric = 5;

using Clock = std::chrono::steady_clock;

using Reliability = CliTest;

// Every F32 tensor of the file is finite (masters, scales, AdamW moments).
void expect_all_finite(const std::string& path) {
  auto r = safetensors::Reader::open(path);
  int checked = 0;
  for (const auto& t : r.tensors()) {
    if (t.dtype != "F32") continue;
    std::vector<float> v = r.to_f32(t.name);
    for (size_t i = 0; i < v.size(); ++i)
      ASSERT_TRUE(std::isfinite(v[i])) << path << ": tensor " << t.name << "[" << i << "] = " << v[i];
    ++checked;
  }
  EXPECT_GT(checked, 5);
}

// SIGKILL at random moments, half of them the instant a checkpoint temp file appears (mid write, before
// the rename). After every kill the latest checkpoint must load; every 8th also resumes and evaluates.
TEST_F(Reliability, SigkillAtRandomMomentsKeepsALoadableCheckpoint) {
  const std::string out = dir_ + "/run";
  std::mt19937 rng(20261129);
  int kills = 0, mid_write = 0, loaded = 0, resumed = 0;
  for (int i = 0; i < 56; ++i) {
    const bool have = fs::exists(out + "/checkpoint.safetensors");
    std::vector<std::string> args =
        have && i % 3 == 0 ? std::vector<std::string>{"train", "--resume", "--out", out, "--backend", "cpu", "--threads",
                                                      "1", "--no-progress", "--sample-tokens", "0"}
                           : tiny_train(out, {"--steps", "400", "--checkpoint-every", "1", "--eval-every", "1000"});
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
    const std::string ckpt = out + "/checkpoint.safetensors";
    if (!fs::exists(ckpt)) continue;
    int64_t step = 0;
    ASSERT_NO_THROW(step = load_ok(ckpt)) << "after kill " << i << "\n" << slurp(o.log);
    ++loaded;
    if (i % 8 == 7) {  // resume to completion of a short time slice: the step must advance
      // --steps: a bare --resume goes on to the checkpoint's own total (400), which a run may have reached.
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

// True when `text` names `flag` as a flag ("--group-size") or as its config field ("group_size").
bool names_flag(const std::string& text, const std::string& flag) {
  std::string field = flag.substr(2);
  for (char& c : field) c = c == '-' ? '_' : c;
  return text.find(flag) != std::string::npos || text.find(field) != std::string::npos;
}

// Every numeric flag of `train` with zero, negative, NaN/Inf and out-of-range values: a non-zero exit (no
// signal) and a message naming the flag, before anything is written.
TEST_F(Reliability, BadTrainFlagsAreRejectedNamingTheFlag) {
  const std::vector<std::vector<std::string>> table = {
      {"--batch", "0"},          {"--batch", "-1"},         {"--batch", "nan"},         {"--seq", "0"},
      {"--seq", "999"},          {"--accum", "0"},          {"--steps", "0"},           {"--steps", "-5"},
      {"--lr", "0"},             {"--lr", "-1"},            {"--lr", "nan"},            {"--lr", "inf"},
      {"--min-lr-ratio", "-0.1"}, {"--min-lr-ratio", "2"},  {"--min-lr-ratio", "nan"},  {"--warmup", "-1"},
      {"--weight-decay", "-1"},  {"--weight-decay", "nan"}, {"--beta1", "1"},           {"--beta1", "nan"},
      {"--beta2", "-0.5"},       {"--grad-clip", "-1"},     {"--grad-clip", "nan"},     {"--eval-every", "0"},
      {"--eval-batches", "0"},   {"--checkpoint-every", "0"}, {"--log-every", "-2"},    {"--val-fraction", "0"},
      {"--val-fraction", "0.6"}, {"--val-fraction", "nan"}, {"--time-limit", "-1"},     {"--time-limit", "nan"},
      {"--threads", "-1"},       {"--sample-tokens", "-1"}, {"--group-size", "0"},      {"--group-size", "48"},
      {"--lora-rank", "0"},      {"--lora-alpha", "-1"},    {"--lora-alpha", "nan"},    {"--mode", "int3"},
      {"--preset", "huge"},      {"--backend", "tpu"},      {"--lora-targets", "q,x"},  {"--steps", "ten"},
      {"--backend", "vulkan,tpu"}, {"--backend", "cpu,cpu"}, {"--backend", "auto,cpu"}, {"--backend", "cpu,"},
      {"--max-skipped-steps", "0"}, {"--time", "0"},      {"--time", "-1m"},          {"--time", "4x"},
      {"--time", "nan"},         {"--time", "4m30"},        {"--time-limit", "5", "--time", "1m"},
      {"--warmup", "0", "--time", "1m"}, {"--time", "1m", "--resume"},
  };
  int rejected = 0;
  for (const auto& row : table) {
    const std::string out = dir_ + "/bad";
    std::vector<std::string> args = {"train", "--preset", "tiny", "--corpus", corpus_, "--out", out, "--no-progress",
                                     "--sample-tokens", "0", "--backend", "cpu", "--seq", "16"};
    // Flags given in the base line are replaced, not repeated.
    for (size_t i = 0; i + 1 < args.size(); ++i)
      if (args[i] == row[0]) args.erase(args.begin() + static_cast<long>(i), args.begin() + static_cast<long>(i) + 2);
    args.insert(args.end(), row.begin(), row.end());
    if (row[0].rfind("--lora", 0) == 0) args.insert(args.end(), {"--mode", "qlora"});
    Outcome r = run(args, 30);
    SCOPED_TRACE(row[0] + " " + row[1]);
    ASSERT_TRUE(r.exited()) << r.describe();
    EXPECT_NE(r.code(), 0) << r.describe();
    // Values CLI11 itself rejects keep its exit codes (100 and up); the rest are edgetrain's misuse errors.
    if (r.output.find("edgetrain: error:") != std::string::npos) {
      EXPECT_EQ(r.code(), kExitMisuse) << r.describe();
    }
    EXPECT_TRUE(names_flag(r.output, row[0])) << "the message does not name " << row[0] << ":\n" << r.output;
    EXPECT_FALSE(fs::exists(out + "/checkpoint.safetensors"));
    rejected += r.code() != 0;
  }
  std::printf("[reliability] %d of %zu bad flag values rejected\n", rejected, table.size());
}

// Model config files: unknown fields, wrong types and bad values are rejected naming the field.
TEST_F(Reliability, BadConfigJsonIsRejectedNamingTheField) {
  const std::vector<std::pair<std::string, std::string>> table = {
      {R"({"preset": "tiny", "bogus": 1})", "bogus"},        {R"({"preset": "tiny", "dim": "32"})", "dim"},
      {R"({"preset": "tiny", "dim": -32})", "dim"},          {R"({"preset": "tiny", "dim": 32.5})", "dim"},
      {R"({"preset": "tiny", "n_heads": 3})", "n_heads"},    {R"({"preset": "tiny", "tied_head": 1})", "tied_head"},
      {R"({"preset": "tiny", "rope_theta": 0.5})", "rope_theta"}, {R"({"preset": "tiny", "norm_eps": -1})", "norm_eps"},
      {R"({"preset": "tiny", "max_seq": 0})", "max_seq"},    {R"({"preset": 7})", "preset"},
      {R"({"preset": "tiny", "n_layers": 1e40})", "n_layers"}, {R"({"preset": "tiny",)", "not valid JSON"},
      {R"([1, 2])", "JSON object"},
  };
  for (size_t i = 0; i < table.size(); ++i) {
    const std::string cfg = dir_ + "/config" + std::to_string(i) + ".json";
    std::ofstream(cfg) << table[i].first;
    Outcome r = run({"train", "--config", cfg, "--corpus", corpus_, "--out", dir_ + "/bad", "--backend", "cpu",
                     "--no-progress"}, 30);
    SCOPED_TRACE(table[i].first);
    ASSERT_TRUE(r.exited()) << r.describe();
    EXPECT_EQ(r.code(), kExitMisuse) << r.describe();
    EXPECT_NE(r.output.find(table[i].second), std::string::npos) << r.output;
  }
  Outcome r = run({"train", "--config", dir_ + "/missing.json", "--corpus", corpus_, "--out", dir_ + "/bad"}, 30);
  EXPECT_EQ(r.code(), kExitIo) << r.describe();
  EXPECT_NE(r.output.find("--config"), std::string::npos) << r.output;
}

// Corpora: missing, a directory, empty, shorter than one training + validation window: clear messages.
// Random bytes are valid input for the byte tokenizer: they must train.
TEST_F(Reliability, BadCorporaGiveClearMessagesAndBinaryTrains) {
  const std::string empty = dir_ + "/empty.txt", small = dir_ + "/small.txt", binary = dir_ + "/random.bin";
  std::ofstream(empty).flush();
  std::ofstream(small) << "too short";
  {
    std::mt19937 rng(7);
    std::ofstream b(binary, std::ios::binary);
    for (int i = 0; i < 8192; ++i) b.put(static_cast<char>(rng() & 0xff));
  }
  const std::vector<std::pair<std::string, std::string>> table = {
      {dir_ + "/missing.txt", "does not exist"}, {dir_, "not a file"}, {empty, "too small"}, {small, "too small"}};
  for (const auto& [corpus, want] : table) {
    Outcome r = run({"train", "--preset", "tiny", "--corpus", corpus, "--seq", "16", "--out", dir_ + "/bad",
                     "--backend", "cpu", "--no-progress"}, 30);
    SCOPED_TRACE(corpus);
    ASSERT_TRUE(r.exited()) << r.describe();
    EXPECT_NE(r.code(), 0) << r.describe();
    EXPECT_NE(r.output.find(want), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(corpus), std::string::npos) << "the message should name the corpus:\n" << r.output;
  }
  const std::string out = dir_ + "/bin";
  std::vector<std::string> args = tiny_train(out, {"--steps", "3", "--eval-every", "1000"});
  for (auto& a : args)
    if (a == corpus_) a = binary;
  Outcome r = run(args);
  ASSERT_EQ(r.code(), 0) << r.describe();
  load_ok(out + "/checkpoint.safetensors");
  expect_all_finite(out + "/checkpoint.safetensors");
}

// Missing devices: a Vulkan run with no driver, device names that match nothing: one clear message, no
// crash. (Dawn missing altogether cannot be staged here: the loader also tries the build's deps folder.)
TEST_F(Reliability, MissingVulkanAndWebGpuGiveClearMessages) {
  struct Row {
    std::string backend;
    std::vector<std::pair<std::string, std::string>> env;
    std::string want;
    int code;  // a device error; a backend this build lacks is unsupported
  };
#ifdef EDGETRAIN_HAS_VULKAN
  const int vulkan_code = kExitDevice;
#else
  const int vulkan_code = kExitUnsupported;
#endif
#ifdef EDGETRAIN_HAS_WEBGPU
  const int webgpu_code = kExitDevice;
#else
  const int webgpu_code = kExitUnsupported;
#endif
  const std::vector<Row> rows = {
      {"vulkan", {{"VK_ICD_FILENAMES", "/nonexistent.json"}, {"VK_DRIVER_FILES", "/nonexistent.json"}}, "ulkan",
       vulkan_code},
      {"vulkan", {{"EDGETRAIN_VULKAN_DEVICE", ""}}, vulkan_code == kExitDevice ? "no-such-gpu" : "ulkan", vulkan_code},
      {"webgpu", {}, webgpu_code == kExitDevice ? "no-such-gpu" : "webgpu", webgpu_code},
  };
  for (const Row& row : rows) {
    ChildOptions o;
    o.env = row.env;
    SCOPED_TRACE(row.backend);
    std::vector<std::string> args = tiny_train(dir_ + "/dev", {"--steps", "2"});
    for (size_t i = 0; i + 1 < args.size(); ++i)
      if (args[i] == "--backend") args[i + 1] = row.backend;  // tiny_train says cpu
    if (row.want == "no-such-gpu") args.insert(args.end(), {"--device", "no-such-gpu"});
    Outcome r = run(args, 60, o);
    ASSERT_TRUE(r.exited()) << r.describe();
    EXPECT_EQ(r.code(), row.code) << r.describe();
    EXPECT_NE(r.output.find("edgetrain: error:"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(row.want), std::string::npos) << r.output;
  }
}

// Whether a usable Vulkan device exists (of DeviceInfo::kind `kind`, if given).
bool have_usable_vulkan_device(const char* kind = nullptr) {
  for (const DeviceInfo& d : list_devices())
    if (d.backend == "vulkan" && d.usable && (!kind || d.kind == kind)) return true;
  return false;
}

// Device memory faults on Vulkan: a buffer beyond what one binding may hold (128 MiB: lavapipe's
// maxStorageBufferRange, and EDGETRAIN_MAX_BINDING_BYTES makes any device bind at most that; the SwiGLU
// activations [B*T, ffn] of 80 x 512 tokens with ffn_dim 1024 are 160 MiB), and device memory running out
// (below). Each: one clear message, non-zero exit, no crash, no hang.
TEST_F(Reliability, VulkanTensorLargerThanABindingGivesClearMessage) {
  if (!have_usable_vulkan_device()) GTEST_SKIP() << "no usable Vulkan device";
  const std::string cfg = dir_ + "/long.json";
  std::ofstream(cfg) << R"({"preset": "tiny", "max_seq": 512, "ffn_dim": 1024})";
  // An activation larger than a kernel may bind (only the vocabulary's tensors are taken in parts): refused
  // before anything is allocated, by the memory estimate of the run, naming the call (kind unsupported, so
  // a --backend list would move on).
  ChildOptions o;
  o.env = {{"EDGETRAIN_MAX_BINDING_BYTES", std::to_string(128u << 20)}};
  Outcome range = run({"train", "--config", cfg, "--batch", "80", "--seq", "512", "--backend", "vulkan", "--corpus",
                       corpus_, "--out", dir_ + "/range", "--no-progress", "--steps", "1"}, 120, o);
  ASSERT_TRUE(range.exited()) << range.describe();
  EXPECT_EQ(range.code(), kExitUnsupported) << range.describe();
  EXPECT_NE(range.output.find("edgetrain: error: training binds a tensor of"), std::string::npos) << range.output;
  EXPECT_NE(range.output.find("(linear_q4gsw's output 0 f32[40960, 1024]) but vulkan binds at most 128.0 MiB"),
            std::string::npos) << range.output;
  EXPECT_NE(range.output.find("lower --batch or --seq"), std::string::npos) << range.output;
}

// Running out of device memory, where the device's memory is this process's (lavapipe: its heap is host
// memory, so RLIMIT_AS makes it run out under the `base` preset, and the heap it reports is the host's).
TEST_F(Reliability, VulkanOutOfDeviceMemoryGivesClearMessages) {
  if (!have_usable_vulkan_device("software"))
    GTEST_SKIP() << "needs a Vulkan device whose memory is host memory (lavapipe)";
  // More than the device-local heap: refused up front with the estimate and what to change.
  Outcome big = run({"train", "--preset", "base", "--batch", "16", "--seq", "256", "--backend", "vulkan", "--corpus",
                     corpus_, "--out", dir_ + "/big", "--no-progress", "--steps", "1"}, 120);
  ASSERT_TRUE(big.exited()) << big.describe();
  EXPECT_EQ(big.code(), kExitUnsupported) << big.describe();
  EXPECT_NE(big.output.find("edgetrain: error: training needs ~"), std::string::npos) << big.output;
  EXPECT_NE(big.output.find("but vulkan has"), std::string::npos) << big.output;

  // A run the estimate lets through but the process cannot allocate (an address-space limit below what
  // its tensors take): the device's own out-of-memory error, kind device.
  ChildOptions o;
  o.as_limit = rlim_t{1200} << 20;
  Outcome oom = run({"train", "--preset", "base", "--batch", "2", "--seq", "256", "--backend", "vulkan", "--corpus",
                     corpus_, "--out", dir_ + "/oom", "--no-progress", "--steps", "1"}, 120, o);
  ASSERT_TRUE(oom.exited()) << oom.describe();
  EXPECT_EQ(oom.code(), kExitDevice) << oom.describe();
  EXPECT_NE(oom.output.find("edgetrain: error: vulkan: out of device memory"), std::string::npos) << oom.output;
}

// Rewrites the safetensors file at `path` with `value` poked into tensor `name` at index 1.
void poke(const std::string& path, const std::string& name, float value) {
  auto r = safetensors::Reader::open(path);
  safetensors::Writer w;
  for (const auto& [k, v] : r.metadata()) w.set_metadata(k, v);
  for (const auto& t : r.tensors()) {
    std::vector<uint8_t> bytes(r.data(t.name), r.data(t.name) + t.nbytes());
    if (t.name == name) {
      EXPECT_EQ(t.dtype, "F32");
      EXPECT_GE(t.nbytes(), 8u);
      std::memcpy(bytes.data() + 4, &value, 4);
    }
    w.add_owned(t.name, t.dtype, t.shape, std::move(bytes));
  }
  w.save(path);
}

// A pipeline the driver cannot create (EDGETRAIN_VK_FAULT=pipeline makes every vkCreateComputePipelines
// fail as a compile failure would; the validation layer stays on and must stay silent): one error line naming
// the kernel, a non-zero exit, no crash, nothing written.
TEST_F(Reliability, VulkanPipelineFailureGivesOneClearMessage) {
  if (!have_usable_vulkan_device()) GTEST_SKIP() << "no usable Vulkan device";
  ChildOptions o;
  o.env = {{"EDGETRAIN_VK_FAULT", "pipeline"}, {"EDGETRAIN_VULKAN_VALIDATION", "1"}};
  std::vector<std::string> args = tiny_train(dir_ + "/pipe", {"--steps", "2"});
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--backend") args[i + 1] = "vulkan";
  Outcome r = run(args, 60, o);
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code(), kExitDevice) << r.describe();
  EXPECT_NE(r.output.find("edgetrain: error: vulkan: creating the compute pipeline of kernel '"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("could not compile this shader"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--backend vulkan,cpu"), std::string::npos) << "no hint how to fall back:\n" << r.output;
  EXPECT_EQ(count_of(r.output, "edgetrain: error:"), 1u) << r.output;
  EXPECT_EQ(r.output.find("validation message"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("falling back"), std::string::npos) << "a single backend must not fall back:\n" << r.output;
  EXPECT_FALSE(fs::exists(dir_ + "/pipe/checkpoint.safetensors"));
}

// An ordered --backend list falls back when (and only when) the backend itself fails, with a one-line
// notice naming it and why; the run then trains on the next one. Without a list (above) there is no
// fallback. Staged twice: no Vulkan driver at all (works on any machine), and a pipeline that fails to
// compile after the device started (needs Vulkan). A bad checkpoint is the input's fault: no fallback.
TEST_F(Reliability, BackendListFallsBackToTheNextBackendWithANotice) {
  struct Row {
    std::string name;
    std::vector<std::pair<std::string, std::string>> env;
    bool needs_vulkan;
  };
  const std::vector<Row> rows = {
      {"no driver", {{"VK_ICD_FILENAMES", "/nonexistent.json"}, {"VK_DRIVER_FILES", "/nonexistent.json"}}, false},
      {"pipeline", {{"EDGETRAIN_VK_FAULT", "pipeline"}, {"EDGETRAIN_VULKAN_VALIDATION", "1"}}, true},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    if (row.needs_vulkan && !have_usable_vulkan_device()) continue;
    ChildOptions o;
    o.env = row.env;
    const std::string out = dir_ + "/fb_" + std::to_string(&row - rows.data());
    std::vector<std::string> args = tiny_train(out, {"--steps", "2", "--eval-every", "1000"});
    for (size_t i = 0; i + 1 < args.size(); ++i)
      if (args[i] == "--backend") args[i + 1] = "vulkan,cpu";
    Outcome r = run(args, 60, o);
    ASSERT_EQ(r.code(), 0) << r.describe();
    EXPECT_EQ(count_of(r.output, "edgetrain: backend vulkan failed at start-up (vulkan"), 1u) << r.output;
    EXPECT_NE(r.output.find("); falling back to cpu"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(" on cpu ("), std::string::npos) << r.output;
    EXPECT_EQ(load_ok(out + "/checkpoint.safetensors"), 2);
  }
  // The input's fault is not the backend's: a checkpoint rejected on --resume fails at once, no fallback.
  const std::string out = dir_ + "/fb_0", ckpt = out + "/checkpoint.safetensors";
  poke(ckpt, "norm.weight", std::nanf(""));
  Outcome r = run({"train", "--resume", "--out", out, "--steps", "4", "--backend", "cpu,vulkan", "--threads", "1",
                   "--no-progress", "--sample-tokens", "0"});
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code(), kExitNumeric) << r.describe();
  EXPECT_NE(r.output.find(ckpt), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("falling back"), std::string::npos) << r.output;
}

// The path of a shared library that is certainly not Dawn (the C math library).
std::string not_dawn_library() {
  void* libm = ::dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
  void* cos_fn = libm ? ::dlsym(libm, "cos") : nullptr;
  Dl_info info{};
  return cos_fn && ::dladdr(cos_fn, &info) && info.dli_fname ? info.dli_fname : "";
}

// No usable Dawn is WebGPU's missing driver: a device error (exit status 3, with the hint to list a fallback)
// alone, and a list falls through it with the notice. Dawn missing altogether cannot be staged (the loader
// also tries the build's deps folder), so EDGETRAIN_DAWN names a library that is not Dawn: the loader takes
// it, finds no wgpu functions, and fails the way a missing Dawn does. A build without WebGPU says so
// instead (unsupported, exit status 2) and falls through the same way.
TEST_F(Reliability, NoUsableDawnIsADeviceFailureAndAListFallsThroughIt) {
  const std::string lib = not_dawn_library();
  ASSERT_FALSE(lib.empty());
  ChildOptions o;
  o.env = {{"EDGETRAIN_DAWN", lib}};
#ifdef EDGETRAIN_HAS_WEBGPU
  const std::string why = "webgpu: Dawn at " + lib + " lacks the function wgpu";
  const int code = kExitDevice;
#else
  const std::string why = "backend 'webgpu' is not compiled into this build";
  const int code = kExitUnsupported;
#endif
  std::vector<std::string> args = tiny_train(dir_ + "/dawn", {"--steps", "1", "--eval-every", "1000"});
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--backend") args[i + 1] = "webgpu";
  Outcome alone = run(args, 60, o);
  ASSERT_TRUE(alone.exited()) << alone.describe();
  EXPECT_EQ(alone.code(), code) << alone.describe();
  EXPECT_NE(alone.output.find("edgetrain: error: " + why), std::string::npos) << alone.output;
  EXPECT_NE(alone.output.find("--backend webgpu,cpu"), std::string::npos) << alone.output;

  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--backend") args[i + 1] = "webgpu,cpu";
  Outcome list = run(args, 60, o);
  ASSERT_EQ(list.code(), 0) << list.describe();
  EXPECT_NE(list.output.find("edgetrain: backend webgpu failed at start-up (" + why), std::string::npos)
      << list.output;
  EXPECT_NE(list.output.find("); falling back to cpu"), std::string::npos) << list.output;
  EXPECT_EQ(load_ok(dir_ + "/dawn/checkpoint.safetensors"), 1);
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

