// The vocabulary a part at a time (src/model/vocab.cpp): an embedding table, head or logits larger than
// one kernel binding is taken in parts of the vocabulary, each a view (Tensor::rows) or a tensor of its
// own. Checked two ways: every backend with its binding limit lowered (BackendOptions::max_binding_bytes)
// so a tiny model splits into 2-5 parts, against the CPU backend in one part; and lavapipe's real limit
// (128 MiB) with a table over it. Parts change only summation orders (the logsumexp over parts, dh as a
// sum of the parts' products), so the harness's device-vs-CPU tolerance applies unchanged.
#include <gtest/gtest.h>

#include <cmath>

#include "edgetrain/backends.h"
#include "edgetrain/graph.h"
#include "edgetrain/model.h"
#include "harness/model_helpers.h"
#include "harness/op_case.h"

namespace edgetrain::test {
namespace {

struct Batch {
  std::vector<int32_t> tokens, labels;
  int64_t B = 2, T = 8;
};

Batch make_batch(uint32_t seed, int64_t vocab) {
  Batch b;
  Rng r(seed);
  for (int64_t i = 0; i < b.B * b.T; ++i) {
    // Tokens from every part, the first and the last id included.
    const int32_t t = i == 0 ? 0 : i == 1 ? static_cast<int32_t>(vocab - 1) : r.integer(0, static_cast<int32_t>(vocab - 1));
    b.tokens.push_back(t);
    b.labels.push_back(i % 7 == 5 ? -100 : i == 2 ? static_cast<int32_t>(vocab - 1) : r.integer(0, static_cast<int32_t>(vocab - 1)));
  }
  return b;
}

std::unique_ptr<Backend> capped_backend(const std::string& name, uint64_t bytes) {
  BackendOptions o;
  o.validation = true;
  o.max_binding_bytes = bytes;
  return make_backend(name, o);
}

// The parts a [vocab, dim] table takes on b: how many row views its embedding and head calls bind.
int64_t table_parts(const Backend& b, int64_t vocab, int64_t dim, int64_t rows) {
  const int64_t per = rows_per_binding(b, vocab, 4 * static_cast<uint64_t>(std::max(dim, rows)), 4 * static_cast<uint64_t>(dim));
  return (vocab + per - 1) / per;
}

TEST(VocabParts, TrainingInPartsMatchesOnePartOnEveryBackend) {
  ModelConfig base = ModelConfig::preset("tiny");
  base.vocab = 301;  // parts of unequal width
  auto cpu = make_cpu_backend();
  for (const std::string& name : test_backends()) {
    for (uint64_t cap : {20u << 10, 8u << 10}) {
      SCOPED_TRACE(name + ", bindings of " + std::to_string(cap) + " bytes");
      auto dev = capped_backend(name, cap);
      const int64_t parts = table_parts(*dev, base.vocab, base.dim, 16);
      ASSERT_GE(parts, 2) << "the cap must split the table, or this tests nothing";
      for (TrainMode mode : {TrainMode::qat, TrainMode::fp32, TrainMode::qlora})
        for (bool tied : {false, true}) {
          SCOPED_TRACE(std::string(mode_name(mode)) + (tied ? ", tied head" : ", own head") + ", " +
                       std::to_string(parts) + " parts");
          ModelConfig cfg = base;
          cfg.mode = mode;
          cfg.tied_head = tied;
          Model a(*cpu, cfg), d(*dev, cfg);
          a.init(5);
          d.init(5);
          expect_models_train_alike(a, d, 3, [&](int step) { return make_batch(200 + step, cfg.vocab); });
          const Batch b = make_batch(300, cfg.vocab);
          EXPECT_NEAR(d.evaluate(b.tokens, b.labels, b.B, b.T), a.evaluate(b.tokens, b.labels, b.B, b.T), 1e-4);
          // Generation: the logits of every vocabulary part, in order.
          const std::vector<int32_t> prompt = {3, 300, 150, 7};
          const std::vector<float> la = a.next_logits(prompt), ld = d.next_logits(prompt);
          ASSERT_EQ(la.size(), ld.size());
          for (size_t i = 0; i < la.size(); ++i) ASSERT_NEAR(ld[i], la[i], 1e-4 + 1e-4 * std::fabs(la[i])) << "logit " << i;
        }
    }
  }
}

// The memory estimate records the calls as the capped device will: every binding within the cap, while
// without it the table is bound whole.
TEST(VocabParts, EstimateBindsWithinTheDeviceLimit) {
  ModelConfig cfg = ModelConfig::preset("tiny");
  cfg.vocab = 301;
  const uint64_t table = static_cast<uint64_t>(cfg.vocab * cfg.dim) * 4;
  const MemoryEstimate whole = estimate_training_memory(cfg, 2, 8);
  EXPECT_GE(whole.largest_binding, table);
  const MemoryEstimate parts = estimate_training_memory(cfg, 2, 8, Precision::fp32, false, {20u << 10, 256});
  EXPECT_LE(parts.largest_binding, 20u << 10) << parts.largest_binding_name;
}

// On a capped backend a run allocates exactly what the estimate, recording with the same limits, counted.
TEST(VocabParts, EstimateEqualsWhatACappedRunAllocates) {
  ModelConfig cfg = ModelConfig::preset("tiny");
  cfg.vocab = 301;
  const int64_t B = 2, T = 8;
  for (const std::string& name : test_backends()) {
    SCOPED_TRACE(name);
    auto dev = capped_backend(name, 8u << 10);
    const MemoryEstimate e =
        estimate_training_memory(cfg, B, T, Precision::fp32, false, target_device(*dev));
    EXPECT_EQ(e.vocab_parts, table_parts(*dev, cfg.vocab, cfg.dim, B * T));
    EXPECT_GE(e.vocab_parts, 2);
    const uint64_t before = dev->tensor_memory().in_use;
    Model m(*dev, cfg);
    m.init(3);
    const Batch bt = make_batch(7, cfg.vocab);
    m.accumulate(bt.tokens, bt.labels, B, T, B * T);
    m.update(OptimConfig{}, 1);
    EXPECT_EQ(e.weights + e.optimizer + e.step, dev->tensor_memory().in_use - before);
    m.evaluate(bt.tokens, bt.labels, B, T);
    EXPECT_EQ(e.total, dev->tensor_memory().in_use - before);
  }
}

// Lavapipe binds at most 128 MiB: a 33,000 x 1,024 fp32 table (129 MiB), as embedding and as its own head,
// trains there as on the CPU.
TEST(VocabParts, TableLargerThanLavapipesBindingTrains) {
  bool have = false;
  for (const std::string& name : test_backends()) have |= name == "vulkan";
  if (!have) GTEST_SKIP() << "vulkan is not among EDGETRAIN_TEST_BACKENDS";
  Backend& dev = backend_for_tests("vulkan");
  ModelConfig cfg = ModelConfig::preset("tiny");
  cfg.vocab = 33000, cfg.dim = 1024, cfg.n_heads = 8, cfg.n_layers = 1, cfg.ffn_dim = 256;
  cfg.mode = TrainMode::qat;
  const uint64_t table = static_cast<uint64_t>(cfg.vocab * cfg.dim) * 4;
  if (dev.max_binding_bytes() == 0 || table <= dev.max_binding_bytes())
    GTEST_SKIP() << "this Vulkan device binds the whole table (lavapipe binds 128 MiB)";
  auto cpu = make_cpu_backend();
  Model a(*cpu, cfg), d(dev, cfg);
  a.init(11);
  d.init(11);
  // Generation first: after training, a 4-bit code flipped by rounding on one side would move logits by
  // more than rounding does.
  const std::vector<float> la = a.next_logits({1, 32999, 17000}), ld = d.next_logits({1, 32999, 17000});
  ASSERT_EQ(la.size(), ld.size());
  for (size_t i = 0; i < la.size(); ++i) ASSERT_NEAR(ld[i], la[i], 1e-4 + 1e-4 * std::fabs(la[i])) << "logit " << i;
  expect_models_train_alike(a, d, 2, [&](int step) { return make_batch(400 + step, cfg.vocab); });
}

}  // namespace
}  // namespace edgetrain::test
