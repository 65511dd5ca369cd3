// Activation checkpointing (Model::set_activation_checkpointing, train --checkpoint-activations): the step
// that recomputes each block's activations before its backward runs the same kernels on the same inputs,
// so its loss and gradients must equal the plain step's bit for bit — on every backend under test, for a
// Llama in qat, fp32 and fp16, qlora with adapters on all seven projections, qwen2's biases, qwen3's head
// norms with packed samples. And it must need less memory: the step's activations shrink towards one
// block's (measured by the estimate, which records the same programs).
#include <gtest/gtest.h>

#include "edgetrain/backends.h"
#include "edgetrain/model.h"
#include "harness/op_case.h"

namespace edgetrain::test {
namespace {

struct Variant {
  std::string name;
  ModelConfig cfg;
  Precision precision = Precision::fp32;
  bool packed = false;
};

std::vector<Variant> variants() {
  ModelConfig base = ModelConfig::preset("tiny");
  base.vocab = 64;
  base.n_layers = 3;
  std::vector<Variant> v;
  ModelConfig c = base;
  v.push_back({"llama qat", c});
  c.mode = TrainMode::fp32;
  v.push_back({"llama fp32", c});
  c = base;
  v.push_back({"llama qat fp16", c, Precision::fp16});
  c.mode = TrainMode::qlora;
  c.lora_targets = "q,k,v,o,gate,up,down";
  c.n_kv_heads = 1;
  v.push_back({"qlora all seven, gqa", c});
  c = base;
  c.arch = "qwen2";
  v.push_back({"qwen2 qat", c});
  c.arch = "qwen3";
  c.mode = TrainMode::fp32;
  v.push_back({"qwen3 fp32 packed", c, Precision::fp32, true});
  return v;
}

TEST(ActivationCheckpointing, LossAndGradientsAreBitIdentical) {
  const int64_t B = 2, T = 16;
  Rng r(31);
  std::vector<int32_t> tokens(B * T), labels(B * T);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = r.integer(0, 63), labels[i] = r.integer(0, 63);
  labels[5] = -1;  // an ignored label, as chat data has
  // Packed rows: samples of 6 and 10 tokens, then 16.
  std::vector<int32_t> pos;
  for (int64_t i = 0; i < T; ++i) pos.push_back(static_cast<int32_t>(i < 6 ? i : i - 6));
  for (int64_t i = 0; i < T; ++i) pos.push_back(static_cast<int32_t>(i));
  for (const std::string& bname : test_backends()) {
    for (const Variant& v : variants()) {
      SCOPED_TRACE(bname + " " + v.name);
      Backend& be = backend_for_tests(bname);
      Model m(be, v.cfg);
      m.init(11);
      for (Param& q : m.params())  // LoRA's B starts at 0, which would leave A's gradient 0
        if (q.name.size() > 7 && q.name.compare(q.name.size() - 7, 7, ".lora_b") == 0) {
          std::vector<float> b(static_cast<size_t>(q.value.numel()));
          for (float& x : b) x = r.uniform(-0.1f, 0.1f);
          be.upload(q.value, b.data(), b.size() * sizeof(float));
        }
      m.set_precision(v.precision);
      const std::vector<int32_t> p = v.packed ? pos : std::vector<int32_t>{};
      const float loss = m.accumulate(tokens, labels, B, T, 31, p);
      const auto plain = m.gradients(tokens, labels, B, T, p);
      m.set_activation_checkpointing(true);
      EXPECT_EQ(m.accumulate(tokens, labels, B, T, 31, p), loss);
      const auto recomputed = m.gradients(tokens, labels, B, T, p);
      ASSERT_EQ(recomputed.size(), plain.size());
      for (const auto& [name, g] : plain) {
        EXPECT_EQ(recomputed.at(name), g) << name;
        double top = 0;
        for (float x : g) top = std::max(top, static_cast<double>(std::fabs(x)));
        EXPECT_GT(top, 0.0) << name << ": a zero gradient would not test anything";
      }
      // Switching back re-records the plain step, which again gives the same numbers.
      m.set_activation_checkpointing(false);
      EXPECT_EQ(m.gradients(tokens, labels, B, T, p), plain);
    }
  }
}

// The step's activations with checkpointing: the blocks' inputs plus one block's saved tensors and the
// head's, where the plain step keeps every block's. With 8 blocks the step must need well under half.
TEST(ActivationCheckpointing, StepMemoryShrinksTowardsOneBlock) {
  for (TrainMode mode : {TrainMode::qat, TrainMode::qlora}) {
    ModelConfig c = ModelConfig::preset("small");  // 8 blocks
    c.mode = mode;
    SCOPED_TRACE(mode_name(mode));
    const MemoryEstimate plain = estimate_training_memory(c, 4, 64, Precision::fp32, false);
    const MemoryEstimate ckpt = estimate_training_memory(c, 4, 64, Precision::fp32, true);
    EXPECT_LT(ckpt.step, plain.step / 2) << ckpt.step << " vs " << plain.step;
    EXPECT_EQ(ckpt.weights, plain.weights);
    EXPECT_EQ(ckpt.optimizer, plain.optimizer);
    EXPECT_LE(ckpt.evaluation, plain.step);  // evaluation reuses the step's buffers (ProgramMemory)
    EXPECT_LT(ckpt.total, plain.total);
  }
}

}  // namespace
}  // namespace edgetrain::test
