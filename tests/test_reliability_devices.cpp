// Devices that are missing, exhausted or failing, against the real `edgetrain` CLI in child processes: no
// Vulkan driver and device names that match nothing, a tensor larger than a binding, out of device memory,
// kernels the driver cannot compile, the fallback through a --backend list, no usable Dawn. Each must end in
// one clear message and the exit status of its error kind (a device failure lets a list fall through).
#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "edgetrain/backends.h"
#include "harness/checkpoint_files.h"
#include "harness/cli_child.h"

namespace edgetrain::test {
namespace {

namespace fs = std::filesystem;

using Reliability = CliTest;

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

}  // namespace
}  // namespace edgetrain::test
