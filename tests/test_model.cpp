// Whole-model tests on the `tiny` preset (and its Llama 3, qwen2 and qwen3 variants): gradients against
// finite differences (fp32) and against the fp32 model at the dequantized weights (qat's straight-through
// estimator), every device backend against the CPU backend, a short run whose loss must fall, exact resume,
// the qat/fp32 loss gap, and the KV cache against a full forward.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "edgetrain/backends.h"
#include "edgetrain/model.h"
#include "edgetrain/q4gsw.h"
#include "edgetrain/trainer.h"
#include "harness/op_case.h"
#include "harness/model_helpers.h"

namespace edgetrain::test {
namespace {

// The architectures' variants of the tiny model: Llama; Llama 3.2-like (rope base 500000, rope scaling
// factors, heads of 24 on a 32-wide model, one key/value head); qwen2 (q/k/v biases, started away from zero
// so that they matter); qwen3 (q/k head norms, started away from one, on heads of 24).
std::vector<std::pair<std::string, ModelConfig>> variants(TrainMode mode) {
  std::vector<std::pair<std::string, ModelConfig>> v;
  v.push_back({"llama", tiny_config(mode, 64)});
  ModelConfig l3 = tiny_config(mode, 64);
  l3.rope_theta = 500000.0f, l3.head_size = 24, l3.n_kv_heads = 1;
  l3.rope_factors = {1.0f, 1.0f, 2.5f, 8.0f, 8.0f, 8.0f, 8.0f, 8.0f, 8.0f, 8.0f, 8.0f, 8.0f};
  v.push_back({"llama3", l3});
  ModelConfig q2 = tiny_config(mode, 64);
  q2.arch = "qwen2";
  v.push_back({"qwen2", q2});
  ModelConfig q3 = tiny_config(mode, 64);
  q3.arch = "qwen3", q3.head_size = 24;
  v.push_back({"qwen3", q3});
  return v;
}

// init() starts biases at 0 and norms at 1; moves them so that a forward that skips them differs.
void perturb_biases_and_norms(Model& m) {
  Rng r(77);
  for (Param& p : m.params()) {
    const bool bias = p.name.find(".bias") != std::string::npos, qk = p.name.find("_norm.weight") != std::string::npos &&
                                                                         p.name.find("attention.") != std::string::npos;
    if (!bias && !qk) continue;
    std::vector<float> v = m.backend().to_vector<float>(p.value);
    for (float& x : v) x = bias ? r.uniform(-0.5f, 0.5f) : r.uniform(0.5f, 1.5f);
    m.backend().upload(p.value, v.data(), v.size() * 4);
  }
}

struct Batch {
  std::vector<int32_t> tokens, labels;
  int64_t B = 2, T = 12;
};

Batch make_batch(uint32_t seed, int64_t vocab) {
  Batch b;
  Rng r(seed);
  for (int64_t i = 0; i < b.B * b.T; ++i) {
    b.tokens.push_back(r.integer(0, static_cast<int32_t>(vocab - 1)));
    b.labels.push_back(i % 7 == 5 ? -100 : r.integer(0, static_cast<int32_t>(vocab - 1)));  // some ignored
  }
  return b;
}

double mean_loss(Model& m, const Batch& b) { return m.evaluate(b.tokens, b.labels, b.B, b.T); }

// Checks the gradients of the parameters `take` names against central differences of the loss, at the three
// largest-gradient elements of each tensor (there the finite difference is well above the fp32 rounding noise
// of the loss); returns how many elements it checked.
int check_against_central_differences(Model& m, const Batch& b, const std::function<bool(const Param&)>& take) {
  Backend& backend = m.backend();
  auto grads = m.gradients(b.tokens, b.labels, b.B, b.T);
  int checked = 0;
  for (Param& p : m.params()) {
    if (!take(p)) continue;
    const auto& g = grads.at(p.name);
    auto v = backend.to_vector<float>(p.value);
    std::vector<size_t> idx(g.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::partial_sort(idx.begin(), idx.begin() + 3, idx.end(), [&](size_t a, size_t c) { return std::fabs(g[a]) > std::fabs(g[c]); });
    for (int j = 0; j < 3; ++j) {
      size_t i = idx[j];
      const float eps = 1e-2f, old = v[i];
      v[i] = old + eps;
      backend.upload(p.value, v.data(), v.size() * 4);
      double lp = mean_loss(m, b);
      v[i] = old - eps;
      backend.upload(p.value, v.data(), v.size() * 4);
      double lm = mean_loss(m, b);
      v[i] = old;
      backend.upload(p.value, v.data(), v.size() * 4);
      double fd = (lp - lm) / (2.0 * eps);
      // Central differences with eps = 1e-2: truncation error O(eps^2 * f''') plus fp32 loss rounding
      // (~1e-7 / eps); 3% of the gradient plus 2e-4 covers both for these smooth models.
      EXPECT_NEAR(fd, g[i], 0.03 * std::fabs(g[i]) + 2e-4) << p.name << "[" << i << "]";
      ++checked;
    }
  }
  return checked;
}

TEST(Model, Fp32GradientsMatchFiniteDifferences) {
  for (const auto& [name, cfg] : variants(TrainMode::fp32)) {
    SCOPED_TRACE(name);
    auto backend = make_cpu_backend();
    Model m(*backend, cfg);
    m.init(3);
    perturb_biases_and_norms(m);
    EXPECT_GT(check_against_central_differences(m, make_batch(11, 64), [](const Param&) { return true; }), 30);
  }
}

// qlora's adapter gradients against central differences of the loss (CPU): every projection adapted, a scale
// alpha / r = 5 / 3 that is not a power of two (it multiplies dA's and dB's products, not their inputs), and
// B moved away from its zero start so that dA is not zero.
TEST(Model, QloraAdapterGradientsMatchFiniteDifferences) {
  ModelConfig c = tiny_config(TrainMode::qlora, 64);
  c.lora_rank = 3, c.lora_alpha = 5.0f, c.lora_targets = "q,k,v,o,gate,up,down";
  auto backend = make_cpu_backend();
  Model m(*backend, c);
  m.init(3);
  Rng r(91);
  for (Param& p : m.params()) {
    if (p.name.find(".lora_b") == std::string::npos) continue;
    std::vector<float> v = backend->to_vector<float>(p.value);
    for (float& x : v) x = r.uniform(-0.3f, 0.3f);
    backend->upload(p.value, v.data(), v.size() * 4);
  }
  const int checked = check_against_central_differences(
      m, make_batch(11, 64), [](const Param& p) { return p.name.find(".lora_") != std::string::npos; });
  EXPECT_EQ(checked, 2 * 7 * c.n_layers * 3);
}

// Under a frozen embedding (qlora) nothing below the first block's q, k and v projections wants a gradient,
// so their 4-bit input gradients are not recorded (as PyTorch's autograd skips them): 7 per block but 3 for
// the first. With a trainable embedding (qat) every block computes all 7. Counted in the CPU profile of one
// gradient step; the adapters' gradients there are checked by QloraAdapterGradientsMatchFiniteDifferences.
TEST(Model, FrozenEmbeddingSkipsTheFirstBlocksInputGradient) {
  for (TrainMode mode : {TrainMode::qlora, TrainMode::qat}) {
    const std::string path = ::testing::TempDir() + "edgetrain_first_block_profile.txt";
    std::filesystem::remove(path);
    std::unique_ptr<Backend> backend = make_profiled_backend("cpu", path);
    ModelConfig c = tiny_config(mode, 64);
    c.lora_targets = "q,k,v,o,gate,up,down";
    {
      Model m(*backend, c);
      m.init(3);
      Batch b = make_batch(11, 64);
      m.gradients(b.tokens, b.labels, b.B, b.T);
    }
    backend.reset();  // writes the profile
    std::ifstream in(path);
    std::string line;
    int64_t calls = -1;
    while (std::getline(in, line)) {
      double total = 0, pct = 0;
      long n = 0;  // a row: total ms, percent, calls, ..., "op (kernel)"
      if (line.find("linear_q4gsw_backward (") != std::string::npos &&
          std::sscanf(line.c_str(), "%lf %lf%% %ld", &total, &pct, &n) == 3)
        calls = n;
    }
    const int64_t expected = 7 * c.n_layers - (mode == TrainMode::qlora ? 3 : 0);
    EXPECT_EQ(calls, expected) << (mode == TrainMode::qlora ? "qlora" : "qat") << ", profile " << path;
  }
}

// qat's weight gradient is the straight-through estimate: the fp32 gradient evaluated at the
// dequantized weights. So a qat model and an fp32 model holding dequant(codes) must agree everywhere.
TEST(Model, QatGradientsAreStraightThrough) {
  auto backend = make_cpu_backend();
  Model q(*backend, tiny_config(TrainMode::qat, 64)), f(*backend, tiny_config(TrainMode::fp32, 64));
  q.init(5);
  f.init(5);
  for (Param& p : q.params()) {
    Param& fp = f.param(p.name);
    auto v = backend->to_vector<float>(p.value);
    if (p.quantized()) {
      q4::Geometry g(p.value.shape()[0], p.value.shape()[1], q.config().group_size);
      auto codes = q4::unpack_w4x8(g, backend->to_vector<uint32_t>(p.codes).data());
      v = q4::dequantize(g, codes.data(), backend->to_vector<float>(p.scales).data());
    }
    backend->upload(fp.value, v.data(), v.size() * 4);
  }
  Batch b = make_batch(17, 64);
  auto gq = q.gradients(b.tokens, b.labels, b.B, b.T), gf = f.gradients(b.tokens, b.labels, b.B, b.T);
  for (auto& [name, g] : gq) {
    HostTensor a = HostTensor::from(Shape{static_cast<int64_t>(g.size())}, DType::f32, g);
    HostTensor c = HostTensor::from(Shape{static_cast<int64_t>(g.size())}, DType::f32, gf.at(name));
    std::string diff = compare(a, c, Tolerance{1e-6, 1e-3});
    EXPECT_TRUE(diff.empty()) << name << ":\n" << diff;
  }
}

// update(..., apply = false) (the trainer's answer to a NaN/Inf loss) writes no weight, codes or moment and
// leaves zeroed gradients; the same step with apply = true does change the weights.
TEST(Model, UpdateWithoutApplyWritesNothing) {
  auto backend = make_cpu_backend();
  Model m(*backend, tiny_config(TrainMode::qat, 64));
  m.init(3);
  auto snapshot = [&] {
    std::map<std::string, std::vector<uint8_t>> s;
    for (auto& [name, t] : m.state_tensors()) {
      std::vector<uint8_t> bytes(static_cast<size_t>(t.nbytes()));
      backend->download(t, bytes.data(), bytes.size());
      s[name] = std::move(bytes);
    }
    return s;
  };
  OptimConfig opt;
  opt.lr = 1e-2f;
  opt.warmup_steps = 0;
  Batch b = make_batch(23, 64);
  auto before = snapshot();
  m.accumulate(b.tokens, b.labels, b.B, b.T, static_cast<int64_t>(b.tokens.size()));
  float norm = m.update(opt, 1, /*apply=*/false);
  EXPECT_TRUE(std::isfinite(norm) && norm > 0);
  EXPECT_TRUE(snapshot() == before) << "update(apply=false) changed the model state";
  EXPECT_EQ(m.steps_done, 1) << "a skipped step is still a step taken";
  EXPECT_EQ(m.adam_steps, 0) << "a skipped step is no AdamW update";
  m.accumulate(b.tokens, b.labels, b.B, b.T, static_cast<int64_t>(b.tokens.size()));
  m.update(opt, 2);
  EXPECT_FALSE(snapshot() == before) << "update(apply=true) left the model unchanged";
  EXPECT_EQ(m.steps_done, 2);
  EXPECT_EQ(m.adam_steps, 1);
}

// Bias correction counts the updates the moments received, not the steps taken: after a skipped step 1,
// step 2 is AdamW's first update, so each weight moves by lr * g / (|g| + eps) ~ lr * sign(g) (fp32, no
// decay, no clipping). Counting the skipped step would scale that by sqrt(1 + beta2) / (1 + beta1) ~ 0.73.
TEST(Model, SkippedStepDoesNotCountForBiasCorrection) {
  auto backend = make_cpu_backend();
  Model m(*backend, tiny_config(TrainMode::fp32, 64));
  m.init(5);
  OptimConfig opt;
  opt.lr = 1e-2f;
  opt.warmup_steps = 0;
  opt.total_steps = 1000000;  // lr_at(2) ~ lr
  opt.weight_decay = 0;
  opt.grad_clip = 0;
  Batch b = make_batch(31, 64);
  int64_t valid = 0;
  for (int32_t l : b.labels) valid += l >= 0;
  std::map<std::string, std::vector<float>> before, grads = m.gradients(b.tokens, b.labels, b.B, b.T);
  for (Param& p : m.params()) before[p.name] = backend->to_vector<float>(p.value);
  m.accumulate(b.tokens, b.labels, b.B, b.T, valid);
  m.update(opt, 1, /*apply=*/false);
  m.accumulate(b.tokens, b.labels, b.B, b.T, valid);
  m.update(opt, 2);
  const double lr = opt.lr_at(2);
  int64_t checked = 0;
  for (Param& p : m.params()) {
    const std::vector<float> after = backend->to_vector<float>(p.value);
    const std::vector<float>& g = grads.at(p.name);
    for (size_t i = 0; i < after.size(); ++i) {
      if (std::fabs(g[i]) < 1e-5f) continue;  // eps would matter
      const double moved = static_cast<double>(after[i]) - before[p.name][i];
      ASSERT_NEAR(moved, g[i] > 0 ? -lr : lr, 1e-3 * lr) << p.name << "[" << i << "], gradient " << g[i];
      ++checked;
    }
  }
  EXPECT_GT(checked, 1000);
}

// Each device backend trains tiny for a few steps: losses and gradients must follow the CPU backend.
TEST(Model, DeviceBackendsMatchCpu) {
  for (const std::string& name : test_backends()) {
    if (name == "cpu") continue;
    SCOPED_TRACE(name);
    Backend& dev = backend_for_tests(name);
    auto cpu = make_cpu_backend();
    for (TrainMode mode : {TrainMode::qat, TrainMode::fp32, TrainMode::qlora}) {
      SCOPED_TRACE(mode_name(mode));
      Model a(*cpu, tiny_config(mode, 64)), d(dev, tiny_config(mode, 64));
      a.init(9);
      d.init(9);
      expect_models_train_alike(a, d, 4, [&](int step) { return make_batch(100 + step, 64); });
    }
    for (const auto& [variant, cfg] : variants(TrainMode::qat)) {  // the other architectures' ops, in qat
      if (variant == "llama") continue;
      SCOPED_TRACE(variant);
      Model a(*cpu, cfg), d(dev, cfg);
      a.init(9);
      d.init(9);
      perturb_biases_and_norms(a);
      perturb_biases_and_norms(d);
      expect_models_train_alike(a, d, 4, [&](int step) { return make_batch(100 + step, 64); });
    }
  }
}

TEST(Trainer, LossFalls) {
  auto out = std::filesystem::temp_directory_path() / "edgetrain_lossfalls";
  std::filesystem::remove_all(out);
  TrainResult r = train(quick_options(out.string()));
  EXPECT_EQ(r.steps, 40);
  EXPECT_LT(r.last_val_loss, r.first_val_loss - 1.5) << "validation loss did not fall enough";
  EXPECT_TRUE(std::filesystem::exists(r.checkpoint));
  EXPECT_TRUE(std::filesystem::exists(r.curve));
  EXPECT_TRUE(std::filesystem::exists(r.sample));
}

std::vector<double> losses(const std::string& metrics) {
  std::vector<double> v;
  std::ifstream f(metrics);
  std::string line;
  while (std::getline(f, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) v.push_back(j["loss"].get<double>());
  }
  return v;
}

TEST(Trainer, ResumeGivesTheSameLossCurve) {
  auto base = std::filesystem::temp_directory_path();
  auto full = base / "edgetrain_resume_full", part = base / "edgetrain_resume_part";
  std::filesystem::remove_all(full);
  std::filesystem::remove_all(part);
  TrainOptions o = quick_options(full.string());
  o.optim.total_steps = 20;
  o.sample_tokens = 0;
  train(o);
  TrainOptions p = o;
  p.out_dir = part.string();
  p.optim.total_steps = 20;
  p.time_limit_s = 1e-9;  // stops (with a checkpoint) right after the first step
  train(p);
  TrainOptions r;
  r.out_dir = part.string();
  r.resume = true;
  r.backend = "cpu";
  r.progress = false;
  r.sample_tokens = 0;
  r.optim.total_steps = 20;
  train(r);
  auto a = losses((full / "metrics.jsonl").string()), b = losses((part / "metrics.jsonl").string());
  ASSERT_EQ(a.size(), 20u);
  ASSERT_EQ(b.size(), 20u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "step " << i + 1;  // bit-identical
}

TEST(Trainer, QatVersusFp32Gap) {
  auto base = std::filesystem::temp_directory_path();
  double val[2];
  int i = 0;
  for (TrainMode mode : {TrainMode::fp32, TrainMode::qat}) {
    auto out = base / (std::string("edgetrain_gap_") + mode_name(mode));
    std::filesystem::remove_all(out);
    TrainOptions o = quick_options(out.string());
    o.model.mode = mode;
    o.sample_tokens = 0;
    val[i++] = train(o).last_val_loss;
  }
  double gap = val[1] - val[0];
  RecordProperty("fp32_val_loss", std::to_string(val[0]));
  RecordProperty("qat_val_loss", std::to_string(val[1]));
  std::printf("tiny, 40 steps: fp32 validation loss %.4f, qat %.4f, gap %+.4f nats\n", val[0], val[1], gap);
  // 4-bit QAT must still learn: within 0.5 nats of fp32 on this easy corpus.
  EXPECT_LT(gap, 0.5);
}

}  // namespace
}  // namespace edgetrain::test

namespace edgetrain::test {
namespace {

// Generation's KV cache must give the logits a full forward pass gives: feed a prefix, then tokens one
// at a time, and compare the last position with one pass over the whole sequence.
TEST(Model, KvCacheMatchesFullForward) {
  for (const std::string& name : test_backends()) {
    SCOPED_TRACE(name);
    Backend& b = backend_for_tests(name);
    for (TrainMode mode : {TrainMode::qat, TrainMode::qlora})
    for (const auto& [variant, cfg] : variants(mode)) {
      SCOPED_TRACE(variant);
      Model m(b, cfg);
      m.init(21);
      perturb_biases_and_norms(m);
      std::vector<int32_t> seq = {5, 17, 3, 60, 22, 9, 41, 8, 30, 2};
      const int64_t V = m.config().vocab;
      std::vector<float> full = m.next_logits(seq);
      ASSERT_EQ(full.size(), seq.size() * V);
      m.reset_cache();
      std::vector<float> step = m.next_logits({seq.begin(), seq.begin() + 4});
      for (size_t i = 4; i < seq.size(); ++i) step = m.next_logits({seq[i]});
      ASSERT_EQ(step.size(), static_cast<size_t>(V));
      HostTensor got = HostTensor::from(Shape{V}, DType::f32, step);
      HostTensor want = HostTensor::from(Shape{V}, DType::f32, std::vector<float>(full.end() - V, full.end()));
      std::string diff = compare(got, want, Tolerance{1e-5, 1e-4});
      EXPECT_TRUE(diff.empty()) << mode_name(mode) << ":\n" << diff;
    }
  }
}

}  // namespace
}  // namespace edgetrain::test
