// Grouped-query attention (n_kv_heads < n_heads) in the model: config validation, parameter shapes and
// counts, finite-difference gradients on every backend, equality with a multi-head model whose K/V weights
// repeat the GQA ones per group (forward logits and the group-summed weight gradients), device backends
// against the CPU backend, the KV cache against a full forward, checkpoints, and a short training run.
// Interop (GGUF/HF import and export of GQA models) is in test_interop.cpp and test_interop_hf.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "edgetrain/backends.h"
#include "edgetrain/checkpoint.h"
#include "edgetrain/interop.h"
#include "edgetrain/model.h"
#include "edgetrain/safetensors.h"
#include "edgetrain/trainer.h"
#include "harness/op_case.h"
#include "harness/model_helpers.h"

namespace edgetrain::test {
namespace {

// tiny with 4 query heads of head dim 8 and `kv` key/value heads.
ModelConfig gqa(TrainMode mode, int64_t kv) {
  ModelConfig c = ModelConfig::preset("tiny");
  c.mode = mode;
  c.vocab = 64;
  c.n_heads = 4;
  c.n_kv_heads = kv;
  return c;
}

struct Batch {
  std::vector<int32_t> tokens, labels;
  int64_t B = 2, T = 12;
};

Batch make_batch(uint32_t seed) {
  Batch b;
  Rng r(seed);
  for (int64_t i = 0; i < b.B * b.T; ++i) {
    b.tokens.push_back(r.integer(0, 63));
    b.labels.push_back(i % 7 == 5 ? -100 : r.integer(0, 63));
  }
  return b;
}

bool is_kv_weight(const std::string& name) {
  return name.find("attention.wk.weight") != std::string::npos || name.find("attention.wv.weight") != std::string::npos;
}

std::string expect_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "NO ERROR";
}

TEST(ModelGqa, ConfigValidatesKvHeads) {
  ModelConfig c = gqa(TrainMode::qat, 2);
  c.validate();
  EXPECT_EQ(c.kv_heads(), 2);
  EXPECT_EQ(c.kv_dim(), 16);
  // Not a divisor, zero, negative (other than the default -1), more than n_heads.
  for (int64_t bad : {3, 0, -2, 8}) {
    c.n_kv_heads = bad;
    std::string m = expect_error([&] { c.validate(); });
    EXPECT_NE(m.find("n_kv_heads"), std::string::npos) << bad << ": " << m;
    EXPECT_NE(m.find(bad == 3 || bad == 8 ? "must divide n_heads (4)" : "must be >= 1"), std::string::npos)
        << bad << ": " << m;
    auto be = make_cpu_backend();
    EXPECT_NE(expect_error([&] { Model m2(*be, c); }).find("n_kv_heads"), std::string::npos);
  }
  // JSON: absent means n_heads; present must be an integer >= 1 dividing n_heads; always written resolved.
  EXPECT_EQ(ModelConfig::from_json(R"({"preset": "tiny", "n_heads": 4})").kv_heads(), 4);
  ModelConfig j = ModelConfig::from_json(R"({"preset": "tiny", "n_heads": 4, "n_kv_heads": 1})");
  EXPECT_EQ(j.kv_heads(), 1);
  EXPECT_EQ(nlohmann::json::parse(j.to_json())["n_kv_heads"], 1);
  EXPECT_EQ(nlohmann::json::parse(ModelConfig::preset("mini").to_json())["n_kv_heads"], 4);
  EXPECT_EQ(ModelConfig::from_json(j.to_json()).to_json(), j.to_json());
  // Checkpoints written before n_kv_heads existed: their config (no such field) is multi-head attention and
  // compares equal to the model's (load_checkpoint compares the two configs' JSON).
  auto old = nlohmann::json::parse(ModelConfig::preset("tiny").to_json());
  old.erase("n_kv_heads");
  EXPECT_EQ(ModelConfig::from_json(old.dump()).to_json(), ModelConfig::preset("tiny").to_json());
  for (const char* text : {R"({"preset": "tiny", "n_heads": 4, "n_kv_heads": 3})",
                           R"({"preset": "tiny", "n_kv_heads": 0})", R"({"preset": "tiny", "n_kv_heads": -1})",
                           R"({"preset": "tiny", "n_kv_heads": 1.5})"}) {
    std::string m = expect_error([&] { ModelConfig::from_json(text); });
    EXPECT_NE(m.find("n_kv_heads"), std::string::npos) << text << ": " << m;
  }
  // Presets are plain multi-head attention.
  for (const std::string& p : ModelConfig::preset_names()) EXPECT_EQ(ModelConfig::preset(p).kv_heads(), ModelConfig::preset(p).n_heads);
}

TEST(ModelGqa, ShapesAndParameterCount) {
  auto be = make_cpu_backend();
  for (int64_t kv : {4, 2, 1})
    for (TrainMode mode : {TrainMode::fp32, TrainMode::qat, TrainMode::qlora}) {
      SCOPED_TRACE(std::to_string(kv) + " " + mode_name(mode));
      ModelConfig c = gqa(mode, kv);
      c.lora_targets = "q,k,v,o,gate,up,down";
      Model m(*be, c);
      int64_t base = 0;
      for (Param& p : m.params()) {
        if (p.name.find(".lora_") == std::string::npos) base += p.value.numel();
        if (!is_kv_weight(p.name)) continue;  // wk, wv and their adapters
        const int64_t rows = p.value.shape()[0], cols = p.value.shape().rank() > 1 ? p.value.shape()[1] : 0;
        if (p.name.find(".lora_a") != std::string::npos) {
          EXPECT_EQ(p.value.shape().str(), Shape({c.lora_rank, 32}).str()) << p.name;
        } else if (p.name.find(".lora_b") != std::string::npos) {
          EXPECT_EQ(rows, kv * 8) << p.name;
          EXPECT_EQ(cols, c.lora_rank) << p.name;
        } else {
          EXPECT_EQ(rows, kv * 8) << p.name;
          EXPECT_EQ(cols, 32) << p.name;
          EXPECT_EQ(p.quantized(), mode != TrainMode::fp32) << p.name;
          if (p.quantized()) {
            EXPECT_EQ(p.scales.shape().str(), Shape({1, kv * 8}).str()) << p.name;
          }
        }
      }
      EXPECT_EQ(base, c.parameter_count());
    }
  // The formula: 2 layers of q, o [32, 32], k, v [kv*8, 32], 3 MLP [64, 32], 2 norms; embedding, head, norm.
  EXPECT_EQ(gqa(TrainMode::qat, 1).parameter_count(), 64 * 32 * 2 + 2 * (2 * 32 * 32 + 2 * 8 * 32 + 3 * 32 * 64 + 2 * 32) + 32);
}

// Central differences of the fp32 loss on each backend: the three largest-gradient elements of every
// tensor, and for K and V the largest one in each key/value head's rows (their gradient sums the group).
// Device backends check the attention projections only (the rest of the model is the same code as MHA,
// and ModelGqa.DeviceBackendsMatchCpu compares every gradient with the CPU backend's), to keep lavapipe and
// SwiftShader time down.
TEST(ModelGqa, GradientsMatchFiniteDifferences) {
  for (const std::string& name : test_backends()) {
    SCOPED_TRACE(name);
    Backend& be = backend_for_tests(name);
    for (int64_t kv : {2, 1}) {
      SCOPED_TRACE("n_kv_heads " + std::to_string(kv));
      Model m(be, gqa(TrainMode::fp32, kv));
      m.init(3);
      Batch b = make_batch(11);
      auto grads = m.gradients(b.tokens, b.labels, b.B, b.T);
      int checked = 0;
      for (Param& p : m.params()) {
        if (name != "cpu" && p.name.find("attention.w") == std::string::npos) continue;
        const auto& g = grads.at(p.name);
        auto v = be.to_vector<float>(p.value);
        auto largest = [&](size_t lo, size_t hi) {
          size_t best = lo;
          for (size_t i = lo; i < hi; ++i)
            if (std::fabs(g[i]) > std::fabs(g[best])) best = i;
          return best;
        };
        std::vector<size_t> idx(g.size());
        for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
        std::partial_sort(idx.begin(), idx.begin() + 3, idx.end(),
                          [&](size_t a, size_t c) { return std::fabs(g[a]) > std::fabs(g[c]); });
        idx.resize(3);
        if (is_kv_weight(p.name)) {
          const size_t per_head = 8 * 32;
          for (int64_t h = 0; h < kv; ++h) idx.push_back(largest(h * per_head, (h + 1) * per_head));
        }
        for (size_t i : idx) {
          const float eps = 1e-2f, old = v[i];
          v[i] = old + eps;
          be.upload(p.value, v.data(), v.size() * 4);
          double lp = m.evaluate(b.tokens, b.labels, b.B, b.T);
          v[i] = old - eps;
          be.upload(p.value, v.data(), v.size() * 4);
          double lm = m.evaluate(b.tokens, b.labels, b.B, b.T);
          v[i] = old;
          be.upload(p.value, v.data(), v.size() * 4);
          double fd = (lp - lm) / (2.0 * eps);
          // As Model.Fp32GradientsMatchFiniteDifferences: O(eps^2) truncation plus fp32 loss rounding.
          EXPECT_NEAR(fd, g[i], 0.03 * std::fabs(g[i]) + 3e-4) << p.name << "[" << i << "]";
          ++checked;
        }
      }
      EXPECT_GT(checked, name == "cpu" ? 60 : 24);
    }
  }
}

// A GQA model equals the multi-head model whose query head h reads K/V rows copied from kv head h / G:
// same logits (generation path), same loss (training path), the same gradients for every other tensor,
// and GQA's K/V gradients are the sums over each group of the MHA model's per-head K/V gradients.
TEST(ModelGqa, EqualsMultiHeadWithRepeatedKv) {
  for (const std::string& name : test_backends()) {
    SCOPED_TRACE(name);
    Backend& be = backend_for_tests(name);
    for (int64_t kv : {2, 1})
      for (TrainMode mode : {TrainMode::fp32, TrainMode::qat}) {
        SCOPED_TRACE(std::string(mode_name(mode)) + " n_kv_heads " + std::to_string(kv));
        const int64_t H = 4, G = H / kv, hd = 8, D = 32;
        Model g(be, gqa(mode, kv)), m(be, gqa(mode, 4));
        g.init(41);
        m.init(99);
        for (Param& p : g.params()) {
          auto v = be.to_vector<float>(p.value);
          if (is_kv_weight(p.name)) {
            std::vector<float> rep(static_cast<size_t>(H * hd * D));
            for (int64_t h = 0; h < H; ++h) std::copy_n(&v[(h / G) * hd * D], hd * D, &rep[h * hd * D]);
            v = rep;
          }
          be.upload(m.param(p.name).value, v.data(), v.size() * 4);
        }
        m.quantize_from_masters();  // per-row scales: repeated rows get the GQA rows' codes and scales
        std::vector<int32_t> prompt = {3, 14, 15, 9, 26, 5, 35, 8, 9, 7, 9, 32, 38, 4, 6, 2, 6, 43};
        auto lg = g.next_logits(prompt), lm = m.next_logits(prompt);
        HostTensor a = HostTensor::from(Shape{static_cast<int64_t>(lg.size())}, DType::f32, lg);
        HostTensor c = HostTensor::from(Shape{static_cast<int64_t>(lm.size())}, DType::f32, lm);
        std::string diff = compare(a, c, Tolerance{1e-5, 1e-4});
        EXPECT_TRUE(diff.empty()) << "logits:\n" << diff;
        Batch b = make_batch(23);
        EXPECT_NEAR(g.evaluate(b.tokens, b.labels, b.B, b.T), m.evaluate(b.tokens, b.labels, b.B, b.T), 1e-5);
        auto gg = g.gradients(b.tokens, b.labels, b.B, b.T), gm = m.gradients(b.tokens, b.labels, b.B, b.T);
        int kv_checked = 0;
        for (auto& [pname, grad] : gg) {
          std::vector<float> want = gm.at(pname);
          if (is_kv_weight(pname)) {
            std::vector<float> sum(static_cast<size_t>(kv * hd * D), 0.0f);
            for (int64_t h = 0; h < H; ++h)
              for (int64_t i = 0; i < hd * D; ++i) sum[(h / G) * hd * D + i] += want[h * hd * D + i];
            want = sum;
            ++kv_checked;
          }
          ASSERT_EQ(grad.size(), want.size()) << pname;
          HostTensor x = HostTensor::from(Shape{static_cast<int64_t>(grad.size())}, DType::f32, grad);
          HostTensor y = HostTensor::from(Shape{static_cast<int64_t>(want.size())}, DType::f32, want);
          std::string d = compare(x, y, Tolerance{1e-6, 1e-3});
          EXPECT_TRUE(d.empty()) << pname << ":\n" << d;
        }
        EXPECT_EQ(kv_checked, 4);
      }
  }
}

// Device backends train a GQA model (qat, and qlora with adapters on every linear, K/V included) the way
// the CPU backend does.
TEST(ModelGqa, DeviceBackendsMatchCpu) {
  for (const std::string& name : test_backends()) {
    if (name == "cpu") continue;
    SCOPED_TRACE(name);
    Backend& dev = backend_for_tests(name);
    auto cpu = make_cpu_backend();
    for (TrainMode mode : {TrainMode::qat, TrainMode::qlora}) {
      SCOPED_TRACE(mode_name(mode));
      ModelConfig c = gqa(mode, 2);
      c.lora_targets = "q,k,v,o,gate,up,down";
      Model a(*cpu, c), d(dev, c);
      a.init(9);
      d.init(9);
      expect_models_train_alike(a, d, 3, [&](int step) { return make_batch(100 + step); });
    }
  }
}

// The KV cache holds n_kv_heads heads; feeding a prefix then single tokens must give the logits of one
// full pass.
TEST(ModelGqa, KvCacheMatchesFullForward) {
  for (const std::string& name : test_backends()) {
    SCOPED_TRACE(name);
    Backend& b = backend_for_tests(name);
    for (int64_t kv : {2, 1})
      for (TrainMode mode : {TrainMode::qat, TrainMode::qlora}) {
        SCOPED_TRACE(std::string(mode_name(mode)) + " n_kv_heads " + std::to_string(kv));
        ModelConfig c = gqa(mode, kv);
        Model m(b, c);
        m.init(21);
        if (mode == TrainMode::qlora)  // adapters that change the output (B = 0 at init)
          for (Param& p : m.params())
            if (p.name.find(".lora_b") != std::string::npos) {
              std::vector<float> v(static_cast<size_t>(p.value.numel()));
              for (size_t i = 0; i < v.size(); ++i) v[i] = 0.02f * static_cast<float>((i * 5) % 11) - 0.1f;
              b.upload(p.value, v.data(), v.size() * 4);
            }
        std::vector<int32_t> seq = {5, 17, 3, 60, 22, 9, 41, 8, 30, 2, 11, 47};
        const int64_t V = c.vocab, n = static_cast<int64_t>(seq.size());
        std::vector<float> full = m.next_logits(seq);
        ASSERT_EQ(full.size(), seq.size() * V);
        m.reset_cache();
        std::vector<float> got = m.next_logits({seq.begin(), seq.begin() + 5});  // positions 0..4
        for (int64_t i = 5; i < n; ++i) {
          std::vector<float> step = m.next_logits({seq[i]});
          got.insert(got.end(), step.begin(), step.end());
        }
        HostTensor x = HostTensor::from(Shape{n, V}, DType::f32, got), y = HostTensor::from(Shape{n, V}, DType::f32, full);
        std::string diff = compare(x, y, Tolerance{1e-5, 1e-4});
        EXPECT_TRUE(diff.empty()) << diff;
      }
  }
}


// The trainer trains a GQA model (n_kv_heads 1: multi-query attention), the loss falls, and the checkpoint
// carries the K/V shapes and n_kv_heads, loads back and resumes.
TEST(ModelGqa, TrainerLossFallsAndCheckpointCarriesKvHeads) {
  auto out = std::filesystem::temp_directory_path() / "edgetrain_gqa_train";
  std::filesystem::remove_all(out);
  TrainOptions o = quick_options(out.string());
  o.model = ModelConfig::from_json(R"({"preset": "tiny", "n_heads": 4, "n_kv_heads": 1})");
  o.checkpoint_every = 20;
  TrainResult r = train(o);
  EXPECT_EQ(r.steps, 40);
  EXPECT_LT(r.last_val_loss, r.first_val_loss - 1.5) << "validation loss did not fall enough";
  ModelConfig saved = read_checkpoint_config(r.checkpoint);
  EXPECT_EQ(saved.n_heads, 4);
  EXPECT_EQ(saved.kv_heads(), 1);
  auto st = safetensors::Reader::open(r.checkpoint);
  EXPECT_EQ(st.info("layers.0.attention.wk.weight").shape, (std::vector<int64_t>{8, 32}));
  EXPECT_EQ(st.info("layers.1.attention.wv.weight.adam_m").shape, (std::vector<int64_t>{8, 32}));
  EXPECT_EQ(st.info("layers.0.attention.wq.weight").shape, (std::vector<int64_t>{32, 32}));
  std::string info = describe_model_file(r.checkpoint);  // `edgetrain info FILE`
  EXPECT_NE(info.find("\"n_kv_heads\":1"), std::string::npos) << info;
  auto be = make_cpu_backend();
  Model m(*be, saved);
  load_checkpoint(r.checkpoint, m);
  EXPECT_EQ(m.steps_done, 40);
  // An MHA model cannot load it: the config check names the field.
  ModelConfig mha = saved;
  mha.n_kv_heads = -1;
  Model other(*be, mha);
  std::string e = expect_error([&] { load_checkpoint(r.checkpoint, other); });
  EXPECT_NE(e.find("n_kv_heads"), std::string::npos) << e;
  // Resume continues the GQA run.
  TrainOptions res;
  res.out_dir = out.string();
  res.resume = true;
  res.backend = "cpu";
  res.progress = false;
  res.sample_tokens = 0;
  res.optim.total_steps = 45;
  train(res);
  EXPECT_EQ(read_checkpoint_metadata(r.checkpoint).at("step"), "45");
}

}  // namespace
}  // namespace edgetrain::test
