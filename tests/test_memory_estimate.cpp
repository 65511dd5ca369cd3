// The training memory estimate (estimate_training_memory) against what a real run allocates on every test
// backend, the trainer's refusal of a run that cannot fit, before it allocates anything, and where qlora's
// frozen masters live.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "edgetrain/backends.h"
#include "edgetrain/error.h"
#include "edgetrain/graph.h"
#include "edgetrain/safetensors.h"
#include "edgetrain/trainer.h"
#include "harness/cli_child.h"
#include "harness/model_helpers.h"
#include "harness/op_case.h"
#include "harness/temp_files.h"

namespace edgetrain::test {
namespace {

struct Case {
  const char* what;
  ModelConfig cfg;
  Precision precision;
};

std::vector<Case> cases() {
  std::vector<Case> v;
  ModelConfig tiny = ModelConfig::preset("tiny");
  v.push_back({"tiny qat fp32", tiny, Precision::fp32});
  ModelConfig gqa = tiny;
  gqa.mode = TrainMode::qlora;
  gqa.n_kv_heads = 2;
  gqa.lora_targets = "q,k,v,o,gate,up,down";
  v.push_back({"tiny qlora gqa fp16", gqa, Precision::fp16});
  ModelConfig qwen = tiny;
  qwen.arch = "qwen3";
  qwen.mode = TrainMode::fp32;
  qwen.tied_head = true;
  v.push_back({"tiny qwen3 fp32 tied", qwen, Precision::fp32});
  return v;
}

// What a run keeps after its first micro-batch, update and evaluation is exactly what the estimate counted.
TEST(MemoryEstimate, EqualsWhatARunAllocatesOnEveryBackend) {
  const int64_t B = 3, T = 24;
  for (const std::string& name : test_backends()) {
    Backend& b = backend_for_tests(name);
    for (const Case& s : cases()) for (bool ckpt : {false, true}) {
      SCOPED_TRACE(name + ", " + s.what + (ckpt ? ", checkpointed activations" : ""));
      const MemoryEstimate e = estimate_training_memory(s.cfg, B, T, s.precision, ckpt, target_device(b));
      Backend& host = b.host_storage();
      const uint64_t before = b.tensor_memory().in_use, host_before = host.tensor_memory().in_use;
      {
        Model m(b, s.cfg);
        m.set_precision(s.precision);
        m.set_activation_checkpointing(ckpt);
        m.init(3);
        uint64_t weights = 0, optimizer = 0, on_host = 0;
        for (const Param& p : m.params()) {
          for (const Tensor* t : {&p.value, &p.codes, &p.scales})
            (t->backend() == &b ? weights : on_host) += t->defined() ? t->nbytes() : 0;
          for (const Tensor* t : {&p.grad, &p.m, &p.v}) optimizer += t->defined() ? t->nbytes() : 0;
        }
        EXPECT_EQ(e.optimizer, optimizer);
        EXPECT_GE(e.weights, weights);  // plus rope frequencies where the config has them
        EXPECT_EQ(e.weights + e.optimizer, b.tensor_memory().in_use - before);
        // A device keeps a qlora model's frozen masters in host memory, the CPU in itself.
        const bool frozen_off_device = &host != &b && s.cfg.mode == TrainMode::qlora;
        EXPECT_EQ(on_host > 0, frozen_off_device);
        EXPECT_EQ(e.host, on_host);
        if (&host != &b) {
          EXPECT_EQ(host.tensor_memory().in_use - host_before, on_host);
        }
        Rng rng(5);
        std::vector<int32_t> tokens(B * T), labels(B * T);
        for (size_t i = 0; i < tokens.size(); ++i) {
          tokens[i] = rng.integer(0, static_cast<int32_t>(s.cfg.vocab) - 1);
          labels[i] = rng.integer(0, static_cast<int32_t>(s.cfg.vocab) - 1);
        }
        m.accumulate(tokens, labels, B, T, B * T);
        m.update(OptimConfig{}, 1);
        EXPECT_EQ(e.weights + e.optimizer + e.step, b.tensor_memory().in_use - before);
        m.evaluate(tokens, labels, B, T);
        EXPECT_EQ(e.total, b.tensor_memory().in_use - before);
        EXPECT_GT(e.step, 0u);
        EXPECT_GT(e.evaluation, 0u);
      }
      EXPECT_EQ(b.tensor_memory().in_use, before) << "the model's tensors were all released";
      EXPECT_EQ(b.host_storage().tensor_memory().in_use, host_before);
    }
  }
}

// Activations grow with the tokens of a micro-batch, weights do not.
// The memory plan shares a planned output's buffer with later tensors unless the call reads it: with
// accumulate = 1, only the outputs ops.inc marks "+" (rms_norm_backward's dw, mm's out) keep their value;
// rms_norm_backward's dx is written whole and shares (it took a buffer per call before: 1 GiB of the 1B step).
TEST(MemoryEstimate, OnlyAccumulatedOutputsKeepABufferOfTheirOwn) {
  auto b = make_cpu_backend();
  auto p = b->new_program();
  Graph g(*b, *p);
  const Shape xs{64, 32};
  Tensor dy = b->zeros(xs, DType::f32), x = b->zeros(xs, DType::f32), w = b->zeros(Shape{32}, DType::f32),
         rstd = b->zeros(Shape{64}, DType::f32), dw = b->zeros(Shape{32}, DType::f32);
  for (int i = 0; i < 2; ++i) {  // calls 2i (dx, accumulating into dw) and 2i + 1 (dx's last use)
    g.call(Op::rms_norm_backward, {dy, x, w, rstd}, {g.alloc(xs, DType::f32), dw}, {1, 1});
    g.call(Op::add, {p->calls().back().out[0], x}, {g.alloc(xs, DType::f32)}, {}, {1.0f});
  }
  for (int i = 0; i < 2; ++i) {  // calls 4 + 2i (accumulating into a planned out) and 5 + 2i
    Tensor acc = g.alloc(xs, DType::f32);
    g.call(Op::mm, {x, b->zeros(Shape{32, 32}, DType::f32)}, {acc}, {0, 0, 1}, {1.0f});
    g.call(Op::add, {acc, x}, {g.alloc(xs, DType::f32)}, {}, {1.0f});
  }
  p->finalize();
  const auto& c = p->calls();
  auto id = [&](size_t call) { return c[call].out[0].storage()->id; };
  // dx, its add's output, the second dx and its add's output: two buffers (best fit picks which).
  const std::set<uint64_t> first_four = {id(0), id(1), id(2), id(3)};
  EXPECT_EQ(first_four.size(), 2u) << "each dx should share the buffers its neighbours use";
  EXPECT_NE(id(4), id(6)) << "an accumulated output keeps its value: a buffer of its own";
  EXPECT_NE(id(4), id(0));
  EXPECT_NE(id(6), id(0));
}

TEST(MemoryEstimate, ActivationsScaleWithTheBatchWeightsDoNot) {
  const ModelConfig cfg = ModelConfig::preset("mini");
  const MemoryEstimate a = estimate_training_memory(cfg, 4, 64), b = estimate_training_memory(cfg, 8, 64);
  EXPECT_EQ(a.weights, b.weights);
  EXPECT_EQ(a.optimizer, b.optimizer);
  EXPECT_GT(b.step, a.step * 19 / 10);
  EXPECT_LT(b.step, a.step * 21 / 10);
  // qat: fp32 masters plus the codes (half a byte per weight) and fp32 scales of every 4-bit linear.
  EXPECT_GT(a.weights, static_cast<uint64_t>(cfg.parameter_count()) * 4);
  EXPECT_LT(a.weights, static_cast<uint64_t>(cfg.parameter_count()) * 5);
}

// A model far beyond this machine's memory is refused before anything is allocated, with the estimate and
// what to change, as an unsupported-kind error (a --backend list would try the next device).
TEST(MemoryEstimate, TrainerRefusesARunThatCannotFit) {
  TempDir dir("memory", "refuse");
  TrainOptions o = quick_options(dir.str());
  o.model.dim = 16384;
  o.model.n_heads = 128;
  o.model.ffn_dim = 65536;
  o.model.n_layers = 64;  // ~0.2T fp32 parameters: terabytes of masters, gradients and moments
  const auto t0 = std::chrono::steady_clock::now();
  try {
    train(o);
    FAIL() << "a run of terabytes started";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::unsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find("training needs ~"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("GiB"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--batch"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--checkpoint-activations ("), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("still too much"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
}

using MemoryCli = CliTest;

// qlora on a device keeps the frozen 4-bit linears' fp32 masters in host memory (Backend::host_storage):
// `train` says so, and the checkpoint still holds them — the same masters as a CPU run of the same seed
// writes (they never change), and the adapters the device trained.
TEST_F(MemoryCli, QloraOnVulkanKeepsFrozenMastersOnTheHostAndCheckpointsThem) {
  const std::vector<std::string> backends = test_backends();
  if (std::find(backends.begin(), backends.end(), "vulkan") == backends.end()) GTEST_SKIP() << "no Vulkan under test";
  std::map<std::string, std::string> ckpt;
  for (const std::string backend : {"cpu", "vulkan"}) {
    std::vector<std::string> args = tiny_train(dir_ + "/qlora_" + backend, {"--steps", "2", "--mode", "qlora"});
    for (size_t i = 0; i + 1 < args.size(); ++i)
      if (args[i] == "--backend") args[i + 1] = backend;
    Outcome r = run(args, 120);
    ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
    EXPECT_EQ(r.output.find("frozen fp32 masters in host memory") != std::string::npos, backend == "vulkan")
        << r.output;
    ckpt[backend] = dir_ + "/qlora_" + backend + "/checkpoint.safetensors";
  }
  const auto cpu = safetensors::Reader::open(ckpt["cpu"]), dev = safetensors::Reader::open(ckpt["vulkan"]);
  for (const char* name : {"layers.0.attention.wq.weight", "layers.1.feed_forward.w2.weight"})
    EXPECT_EQ(dev.to_f32(name), cpu.to_f32(name)) << name;
  const std::vector<float> b = dev.to_f32("layers.0.attention.wq.weight.lora_b");
  EXPECT_TRUE(std::any_of(b.begin(), b.end(), [](float x) { return x != 0.0f; })) << "the adapters did not train";
}

}  // namespace
}  // namespace edgetrain::test
