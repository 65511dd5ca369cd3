// fp16 training's dynamic loss scaling (LossScaler, Model::update): an overflow skips the step, writes
// nothing, counts it and halves the scale; the scale doubles after growth_interval applied steps; a run
// where every step overflows stops with a clear numeric error; the gradients AdamW sees are unscaled; the
// scaler survives a checkpoint; and the same through `edgetrain train` with an injected overflow.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "edgetrain/backends.h"
#include "edgetrain/checkpoint.h"
#include "edgetrain/graph.h"
#include "edgetrain/model.h"
#include "edgetrain/safetensors.h"
#include "harness/cli_child.h"
#include "harness/op_case.h"

namespace edgetrain::test {
namespace {

ModelConfig tiny() {
  ModelConfig c = ModelConfig::preset("tiny");
  c.vocab = 64;
  return c;
}

struct Batch {
  std::vector<int32_t> tokens, labels;
  int64_t B = 2, T = 12;
  int64_t valid() const { return static_cast<int64_t>(tokens.size()); }
};
Batch batch(uint32_t seed) {
  Batch b;
  Rng r(seed);
  for (int64_t i = 0; i < b.B * b.T; ++i) {
    b.tokens.push_back(r.integer(0, 63));
    b.labels.push_back(r.integer(0, 63));
  }
  return b;
}

// Every saved tensor (masters, codes, scales, moments) as bytes.
std::map<std::string, std::vector<uint8_t>> state_of(Model& m) {
  std::map<std::string, std::vector<uint8_t>> s;
  for (const Model::Named& n : m.state_tensors()) {
    std::vector<uint8_t> v(n.tensor.nbytes());
    m.backend().download(n.tensor, v.data(), v.size());
    s[n.name] = std::move(v);
  }
  return s;
}

// +inf in one element of the first trainable gradient: what an fp16 overflow leaves behind.
void plant_inf(Model& m) {
  for (Param& p : m.params())
    if (p.trainable) {
      auto g = m.backend().to_vector<float>(p.grad);
      g[g.size() / 2] = INFINITY;
      m.backend().upload(p.grad, g.data(), p.grad.nbytes());
      return;
    }
}

bool grads_are_zero(Model& m) {
  for (Param& p : m.params())
    if (p.trainable)
      for (float g : m.backend().to_vector<float>(p.grad))
        if (g != 0.0f) return false;
  return true;
}

OptimConfig optim() {
  OptimConfig o;
  o.lr = 1e-2f;
  o.warmup_steps = 0;
  o.total_steps = 100;
  return o;
}

class LossScaling : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> backend_ = make_cpu_backend();
  std::unique_ptr<Model> fp16() {
    auto m = std::make_unique<Model>(*backend_, tiny());
    m->set_precision(Precision::fp16);
    m->init(5);
    return m;
  }
};

TEST_F(LossScaling, AnOverflowSkipsTheStepWritesNothingAndHalvesTheScale) {
  auto m = fp16();
  const Batch b = batch(1);
  m->accumulate(b.tokens, b.labels, b.B, b.T, b.valid());
  m->update(optim(), 1);  // one applied step, so the moments are not zero
  ASSERT_EQ(m->adam_steps, 1);
  ASSERT_EQ(m->scaler.scale, 65536.0f);
  const auto before = state_of(*m);

  m->accumulate(b.tokens, b.labels, b.B, b.T, b.valid());
  plant_inf(*m);
  const float norm = m->update(optim(), 2);
  EXPECT_FALSE(std::isfinite(norm));
  EXPECT_EQ(state_of(*m), before) << "an overflowing step wrote to the weights, codes or moments";
  EXPECT_TRUE(grads_are_zero(*m)) << "the overflowing step's gradients were not dropped";
  EXPECT_EQ(m->scaler.scale, 32768.0f);
  EXPECT_EQ(m->scaler.overflows, 1);
  EXPECT_TRUE(m->scaler.last_overflowed);
  EXPECT_EQ(m->adam_steps, 1);  // no AdamW update: bias correction does not advance
  EXPECT_EQ(m->steps_done, 2);  // but the step was taken (its batch consumed)

  // The next step applies at the new scale.
  m->accumulate(b.tokens, b.labels, b.B, b.T, b.valid());
  EXPECT_TRUE(std::isfinite(m->update(optim(), 3)));
  EXPECT_NE(state_of(*m), before);
  EXPECT_EQ(m->adam_steps, 2);
  EXPECT_EQ(m->scaler.scale, 32768.0f);
  EXPECT_EQ(m->scaler.good_steps, 1);
  EXPECT_FALSE(m->scaler.last_overflowed);
}

TEST_F(LossScaling, TheScaleDoublesAfterTheGrowthInterval) {
  auto m = fp16();
  m->scaler.growth_interval = 3;
  const Batch b = batch(2);
  auto step = [&](int64_t s, bool overflow) {
    m->accumulate(b.tokens, b.labels, b.B, b.T, b.valid());
    if (overflow) plant_inf(*m);
    m->update(optim(), s);
  };
  step(1, false);
  step(2, false);
  EXPECT_EQ(m->scaler.scale, 65536.0f);
  step(3, true);  // an overflow resets the count of good steps
  EXPECT_EQ(m->scaler.scale, 32768.0f);
  EXPECT_EQ(m->scaler.good_steps, 0);
  step(4, false);
  step(5, false);
  EXPECT_EQ(m->scaler.scale, 32768.0f);
  step(6, false);  // the third applied step in a row
  EXPECT_EQ(m->scaler.scale, 65536.0f);
  EXPECT_EQ(m->scaler.good_steps, 0);
  EXPECT_EQ(m->scaler.overflows, 1);
}

TEST_F(LossScaling, EveryStepOverflowingStopsWithAClearMessage) {
  auto m = fp16();
  m->scaler.scale = 4.0f;  // 4 -> 2 -> 1 -> the floor
  const Batch b = batch(3);
  const auto before = state_of(*m);
  for (int64_t s = 1; s <= 2; ++s) {
    m->accumulate(b.tokens, b.labels, b.B, b.T, b.valid());
    plant_inf(*m);
    m->update(optim(), s);
  }
  EXPECT_EQ(m->scaler.scale, 1.0f);
  m->accumulate(b.tokens, b.labels, b.B, b.T, b.valid());
  plant_inf(*m);
  try {
    m->update(optim(), 3);
    FAIL() << "an overflow at the floor of the loss scale did not stop training";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::numeric);
    const std::string w = e.what();
    EXPECT_NE(w.find("step 3"), std::string::npos) << w;
    EXPECT_NE(w.find("3 steps in a row (1..3)"), std::string::npos) << w;
    EXPECT_NE(w.find("--precision fp32"), std::string::npos) << w;
  }
  EXPECT_EQ(state_of(*m), before);
  EXPECT_EQ(m->adam_steps, 0);
  EXPECT_EQ(m->scaler.overflows, 3);
}

TEST_F(LossScaling, Fp32HasNoScaler) {
  Model m(*backend_, tiny());
  m.init(5);
  const Batch b = batch(4);
  for (int64_t s = 1; s <= 20; ++s) {  // never throws, never touches the scaler
    m.accumulate(b.tokens, b.labels, b.B, b.T, b.valid());
    plant_inf(m);
    EXPECT_FALSE(std::isfinite(m.update(optim(), s)));
  }
  EXPECT_EQ(m.scaler.scale, 65536.0f);
  EXPECT_EQ(m.scaler.overflows, 0);
}

// The loss read back does not depend on the scale (it enters fused_ce's denominator as a power of two and
// is divided out exactly), and AdamW's moments after one clipped step see the unscaled gradients: an unscale
// forgotten in the clipping coefficient would make them 65536 times larger.
TEST_F(LossScaling, LossAndMomentsAreUnscaled) {
  const Batch b = batch(6);
  Model ref(*backend_, tiny());
  ref.init(5);
  auto big = fp16(), small = fp16();
  small->scaler.scale = 1024.0f;
  const float l32 = ref.accumulate(b.tokens, b.labels, b.B, b.T, b.valid());
  const float l_big = big->accumulate(b.tokens, b.labels, b.B, b.T, b.valid());
  const float l_small = small->accumulate(b.tokens, b.labels, b.B, b.T, b.valid());
  EXPECT_EQ(l_big, l_small) << "the loss depends on the loss scale";
  EXPECT_NEAR(l_big, l32, 1e-2 * std::fabs(l32));
  OptimConfig o = optim();
  o.grad_clip = 0.05f;  // clipping active: the coefficient must see the unscaled norm
  const float n32 = ref.update(o, 1), n16 = big->update(o, 1);
  EXPECT_NEAR(n16, n32, 2e-2 * n32) << "the returned gradient norm is not unscaled";
  for (size_t i = 0; i < ref.params().size(); ++i) {
    Param &p = ref.params()[i], &q = big->params()[i];
    if (!p.trainable) continue;
    const auto m32 = backend_->to_vector<float>(p.m), m16 = backend_->to_vector<float>(q.m);
    double num = 0, den = 0;
    for (size_t j = 0; j < m32.size(); ++j) num += (m16[j] - m32[j]) * (m16[j] - m32[j]), den += m32[j] * m32[j];
    // fp16 operands move the gradients by ~1e-3 relative (tol::f16_operands); 5% leaves room and still
    // fails by orders of magnitude if the scale were not divided out.
    EXPECT_LT(std::sqrt(num), 0.05 * std::sqrt(den) + 1e-12) << p.name;
  }
}

TEST_F(LossScaling, TheScalerSurvivesACheckpointAndIsOnlyWrittenByFp16) {
  const std::string dir = ::testing::TempDir();
  auto m = fp16();
  const Batch b = batch(7);
  m->accumulate(b.tokens, b.labels, b.B, b.T, b.valid());
  plant_inf(*m);
  m->update(optim(), 1);
  m->accumulate(b.tokens, b.labels, b.B, b.T, b.valid());
  m->update(optim(), 2);
  const std::string path = dir + "/fp16_scaler.safetensors";
  save_checkpoint(path, *m);
  auto back = fp16();
  load_checkpoint(path, *back);
  EXPECT_EQ(back->scaler.scale, 32768.0f);
  EXPECT_EQ(back->scaler.good_steps, 1);
  EXPECT_EQ(back->scaler.overflows, 1);
  // The masters are fp32 whatever the precision: an fp32 model loads it, and its own checkpoints carry no
  // scaler.
  Model plain(*backend_, tiny());
  load_checkpoint(path, plain);
  EXPECT_EQ(state_of(plain), state_of(*back));
  const std::string p32 = dir + "/fp32_scaler.safetensors";
  save_checkpoint(p32, plain);
  EXPECT_EQ(safetensors::Reader::open(p32).metadata().count("loss_scale"), 0u);
  EXPECT_EQ(safetensors::Reader::open(path).metadata().at("loss_scale"), "32768");
}

TEST(Precision, GraphRecordsTheF16FlagOnlyUnderFp16) {
  auto b = make_cpu_backend();
  auto p = b->new_program();
  Graph g(*b, *p);
  Tensor x = b->zeros(Shape{4, 8}, DType::f32), w = b->zeros(Shape{6, 8}, DType::f32);
  g.linear(x, w);
  g.mm(x, w, false, true);
  g.set_precision(Precision::fp16);
  g.linear(x, w);
  g.mm(x, w, false, true);
  g.add(x, x);  // not a matrix product: unchanged
  const auto& c = p->calls();
  ASSERT_EQ(c.size(), 5u);
  EXPECT_EQ(c[0].ints, (std::vector<int64_t>{}));
  EXPECT_EQ(c[1].ints, (std::vector<int64_t>{0, 1, 0}));  // trans_a, trans_b, accumulate
  EXPECT_EQ(c[2].ints, (std::vector<int64_t>{1}));
  EXPECT_EQ(c[3].ints, (std::vector<int64_t>{0, 1, 0, 1}));
  EXPECT_EQ(c[4].ints, (std::vector<int64_t>{}));
}

TEST(Precision, AutoPicksFp32WhereFp16IsNotFaster) {
  auto b = make_cpu_backend();
  const PrecisionChoice a = choose_precision("auto", *b);
  EXPECT_EQ(a.precision, Precision::fp32);
  EXPECT_NE(a.why.find("auto"), std::string::npos) << a.why;
  EXPECT_EQ(choose_precision("fp16", *b).precision, Precision::fp16);
  EXPECT_EQ(choose_precision("fp32", *b).precision, Precision::fp32);
  try {
    choose_precision("bf16", *b);
    FAIL() << "bf16 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--precision: unknown value 'bf16' (choose fp32, fp16 or auto)"),
              std::string::npos)
        << e.what();
  }
  for (const std::string& name : test_backends()) {
    Backend& d = backend_for_tests(name);
    // auto follows the device's fp16 speed: fp16 only with tensor cores (the H200), fp32 on the CPU and on
    // software devices (lavapipe, SwiftShader), which keeps this suite in fp32 there.
    const Backend::Fp16Speed speed = d.fp16_speed();
    EXPECT_EQ(choose_precision("auto", d).precision, speed.fast ? Precision::fp16 : Precision::fp32) << speed.why;
    const std::string dev = d.device_name();
    if (d.name() == "cpu" || dev.find("llvmpipe") != std::string::npos || dev.find("SwiftShader") != std::string::npos) {
      EXPECT_FALSE(speed.fast) << dev << ": " << speed.why;
    }
  }
}

// WebGPU takes --precision fp16 only on an adapter with shader-f16 (the rule); elsewhere the run is
// fp32 and the one precision line says why. SwiftShader has no shader-f16; Mesa 26's lavapipe through Dawn
// has it (tests/khr_coop.sh runs this test there).
TEST(Precision, WebGpuTakesFp16OnlyWithShaderF16) {
  bool ran = false;
  for (const std::string& name : test_backends()) {
    if (name != "webgpu") continue;
    Backend& d = backend_for_tests(name);
    const std::string dev = d.device_name();
    const PrecisionChoice c = choose_precision("fp16", d);
    const std::vector<DeviceInfo> devices = list_devices();
    const bool has_f16 = std::any_of(devices.begin(), devices.end(), [](const DeviceInfo& i) {
      return i.backend == "webgpu" && i.details.find("; shader-f16") != std::string::npos;
    });
    if (dev.find("SwiftShader") != std::string::npos) EXPECT_FALSE(has_f16) << dev;
    if (dev.find("llvmpipe") != std::string::npos) EXPECT_TRUE(has_f16) << dev << " (Mesa 26 offers shader-f16)";
    EXPECT_EQ(c.precision, has_f16 ? Precision::fp16 : Precision::fp32) << c.why;
    if (!has_f16) {
      EXPECT_NE(c.why.find("precision fp32 (--precision fp16 asked): the WebGPU adapter"), std::string::npos) << c.why;
      EXPECT_NE(c.why.find("has no shader-f16"), std::string::npos) << c.why;
    }
    EXPECT_EQ(choose_precision("auto", d).precision, Precision::fp32);  // never faster without tensor cores
    ran = true;
  }
  if (!ran) GTEST_SKIP() << "no webgpu backend under test";
}

// ---- through the CLI ----

class LossScalingCli : public CliTest {};

std::vector<nlohmann::json> metric_lines(const std::string& path) {
  std::vector<nlohmann::json> v;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) v.push_back(nlohmann::json::parse(line));
  return v;
}

TEST_F(LossScalingCli, AnInjectedOverflowIsSkippedCountedAndReported) {
  ChildOptions fault;
  fault.env = {{"EDGETRAIN_TRAIN_FAULT", "overflow@3"}};
  const std::string out = dir_ + "/run";
  Outcome r = run(tiny_train(out, {"--precision", "fp16", "--steps", "6", "--eval-every", "1000"}), 60, fault);
  ASSERT_EQ(r.code(), 0) << r.describe();
  EXPECT_NE(r.output.find("precision fp16 (--precision fp16), not faster than fp32 on cpu"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("step 3: fp16 gradient overflow at loss scale 65536: step skipped (weights unchanged), "
                          "scale now 32768"),
            std::string::npos)
      << r.output;
  std::map<int64_t, nlohmann::json> by_step;
  for (const auto& j : metric_lines(out + "/metrics.jsonl"))
    if (j.contains("loss")) by_step[j["step"].get<int64_t>()] = j;
  ASSERT_EQ(by_step.count(3), 0u) << "a skipped step has no metrics line";
  EXPECT_EQ(by_step.at(2)["loss_scale"].get<double>(), 65536.0);
  EXPECT_EQ(by_step.at(2)["overflow_steps"].get<int64_t>(), 0);
  EXPECT_EQ(by_step.at(4)["loss_scale"].get<double>(), 32768.0);
  EXPECT_EQ(by_step.at(6)["overflow_steps"].get<int64_t>(), 1);
  const auto meta = safetensors::Reader::open(out + "/checkpoint.safetensors").metadata();
  EXPECT_EQ(meta.at("step"), "6");
  EXPECT_EQ(meta.at("adam_steps"), "5");
  EXPECT_EQ(meta.at("loss_scale"), "32768");
  EXPECT_EQ(meta.at("overflow_steps"), "1");
}

TEST_F(LossScalingCli, ARunWhereEveryStepOverflowsStops) {
  ChildOptions fault;
  fault.env = {{"EDGETRAIN_TRAIN_FAULT", "overflow@1,2,3,4,5,6,7,8,9,10"}};
  Outcome r = run(tiny_train(dir_ + "/run", {"--precision", "fp16", "--loss-scale", "8", "--steps", "10"}), 60, fault);
  EXPECT_EQ(r.code(), 5) << r.describe();  // ErrorKind::numeric
  EXPECT_NE(r.output.find("fp16 loss scaling: step 4: the gradients overflowed fp16 at loss scale 1"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("4 steps in a row (1..4) overflowed and were skipped"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("train this model with --precision fp32"), std::string::npos) << r.output;
  EXPECT_EQ(count_of(r.output, "fp16 gradient overflow at loss scale"), 3u) << r.output;
}

// Checkpoints hold fp32 masters, so --resume may change precision: fp16 -> fp32 -> fp16, with the fp16
// run's loss scale coming back from its checkpoint (an fp32 run keeps it, unused).
TEST_F(LossScalingCli, ResumeMayChangePrecision) {
  ChildOptions fault;
  fault.env = {{"EDGETRAIN_TRAIN_FAULT", "overflow@2"}};
  const std::string out = dir_ + "/run";
  auto resume = [&](const char* precision, const char* steps) {
    return run({"train", "--resume", "--out", out, "--steps", steps, "--backend", "cpu", "--threads", "1",
                "--no-progress", "--sample-tokens", "0", "--precision", precision});
  };
  Outcome a = run(tiny_train(out, {"--precision", "fp16", "--steps", "3"}), 60, fault);
  ASSERT_EQ(a.code(), 0) << a.describe();
  Outcome b = resume("fp32", "5");
  ASSERT_EQ(b.code(), 0) << b.describe();
  EXPECT_NE(b.output.find("precision fp32 (--precision fp32)"), std::string::npos) << b.output;
  EXPECT_EQ(safetensors::Reader::open(out + "/checkpoint.safetensors").metadata().count("loss_scale"), 0u);
  Outcome c = resume("fp16", "7");
  ASSERT_EQ(c.code(), 0) << c.describe();
  EXPECT_NE(c.output.find("steps 6..7"), std::string::npos) << c.output;
  const auto meta = safetensors::Reader::open(out + "/checkpoint.safetensors").metadata();
  EXPECT_EQ(meta.at("step"), "7");
  EXPECT_EQ(meta.at("loss_scale"), "65536") << "an fp32 leg in between does not carry the scale";
  EXPECT_EQ(meta.at("overflow_steps"), "0");
}

TEST_F(LossScalingCli, Fp32RunsTreatAnOverflowAsBefore) {
  ChildOptions fault;
  fault.env = {{"EDGETRAIN_TRAIN_FAULT", "overflow@2"}};
  Outcome r = run(tiny_train(dir_ + "/run", {"--precision", "fp32", "--steps", "3"}), 60, fault);
  EXPECT_EQ(r.code(), 5) << r.describe();
  EXPECT_NE(r.output.find("step 2: gradient norm is inf"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace edgetrain::test
