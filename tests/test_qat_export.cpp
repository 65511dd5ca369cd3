// A trained 4-bit model is its codes and scales, not its fp32 masters: every export (GGUF F32/F16/Q4_0, the
// edgetrain checkpoint, ExecuTorch) must give back the model that was evaluated. The models here have
// masters planted far outside the range their codes can follow (what long QAT with a pass-through gradient
// produces), so an export that writes masters, or re-quantizes them, fails. Also: quantize() keeps weights
// that already are q4gsw values, scales are fp16 values, and the clipped straight-through gradient keeps
// trained masters inside the range.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "edgetrain/backends.h"
#include "edgetrain/checkpoint.h"
#include "edgetrain/half.h"
#include "edgetrain/interop.h"
#include "edgetrain/q4gsw.h"
#include "edgetrain/safetensors.h"
#include "harness/model_helpers.h"
#include "harness/temp_files.h"
#include "io/gguf.h"

namespace fs = std::filesystem;

namespace edgetrain::test {
namespace {

std::string tmp(const std::string& name) { return temp_path("qat_export", name); }

std::vector<int32_t> prompt() {
  std::vector<int32_t> t;
  for (int i = 0; i < 24; ++i) t.push_back((i * 37 + 5) % 64);
  return t;
}

// Logits of every position of prompt() (a fresh KV cache).
std::vector<float> logits(Model& m) {
  m.reset_cache();
  return m.next_logits(prompt());
}

void plant_drift(Model& m) {
  ASSERT_GT(plant_master_drift(m), 0.25) << "the planted drift must put many masters out of range";
}

void expect_same_codes_and_scales(Model& a, Model& b) {
  for (Param& p : a.params()) {
    if (!p.quantized()) continue;
    Param& q = b.param(p.name);
    ASSERT_TRUE(q.quantized()) << p.name;
    EXPECT_EQ(a.backend().to_vector<uint32_t>(p.codes), b.backend().to_vector<uint32_t>(q.codes)) << p.name;
    EXPECT_EQ(a.backend().to_vector<float>(p.scales), b.backend().to_vector<float>(q.scales)) << p.name;
  }
}

// Worst |a - b| relative to the logits' range.
double worst_relative(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float lo = a[0], hi = a[0];
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    lo = std::min(lo, a[i]), hi = std::max(hi, a[i]);
    worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  return worst / std::max(1e-30, static_cast<double>(hi - lo));
}

TEST(QatExport, ScalesAreFp16ValuesAndQuantizeKeepsQ4Values) {
  std::vector<float> w(4 * 64);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.37f * static_cast<float>(i)) * 0.05f;
  q4::Geometry g(4, 64, 32);
  const q4::Quantized q = q4::quantize(g, w.data());
  for (float s : q.scales) {
    EXPECT_GT(s, 0.0f);
    EXPECT_EQ(round_to_f16(s), s);
  }
  // Dequantized values, codes -8 and 7 included, quantize back to the same values.
  std::vector<uint8_t> codes = q.codes;
  codes[0] = 0, codes[1] = 15, codes[40] = 0;
  const auto deq = q4::dequantize(g, codes.data(), q.scales.data());
  const q4::Quantized again = q4::quantize(g, deq.data());
  EXPECT_EQ(q4::dequantize(g, again.codes.data(), again.scales.data()), deq);
  // A group whose codes span only -3..3 keeps its values too (a coarser grid would not).
  std::vector<float> small(32);
  for (int k = 0; k < 32; ++k) small[k] = static_cast<float>(k % 7 - 3) * 0.0078125f;
  q4::Geometry g1(1, 32, 32);
  const q4::Quantized s1 = q4::quantize(g1, small.data());
  EXPECT_EQ(q4::dequantize(g1, s1.codes.data(), s1.scales.data()), small);
  // Tiny and huge groups: a nonzero group never gets scale 0 or infinity.
  std::vector<float> tiny_w(32, 1e-9f), huge_w(32, 1e9f);
  EXPECT_GT(q4::quantize(g1, tiny_w.data()).scales[0], 0.0f);
  EXPECT_TRUE(std::isfinite(q4::quantize(g1, huge_w.data()).scales[0]));
}

TEST(QatExport, EveryGgufExportOfADriftedQatModelIsTheModel) {
  auto be = make_cpu_backend();
  for (int64_t gs : {32, 64}) {
    ModelConfig c = tiny_config(TrainMode::qat, 64);
    c.group_size = gs;
    Model m(*be, c);
    m.init(5);
    plant_drift(m);
    const auto want = logits(m);
    // F32: the dequantized values, exactly; read back in qat mode, the same codes and scales.
    {
      const std::string path = tmp("drift_f32_" + std::to_string(gs) + ".gguf");
      save_gguf(path, m, GgufType::F32);
      auto back = load_gguf_model(path, *be, TrainMode::qat, gs);
      expect_same_codes_and_scales(m, *back);
      EXPECT_EQ(logits(*back), want) << "gs " << gs;
      auto fp = load_gguf_model(path, *be, TrainMode::fp32, gs);  // an fp32 model computing with those values
      EXPECT_LT(worst_relative(logits(*fp), want), 1e-5) << "gs " << gs;
    }
    // Q4_0: the codes and scales bit for bit (a group of 64 is two blocks with one scale).
    {
      const std::string path = tmp("drift_q4_" + std::to_string(gs) + ".gguf");
      GgufExportReport rep = save_gguf(path, m, GgufType::Q4_0);
      EXPECT_EQ(rep.exact_q4, 14) << "gs " << gs;
      EXPECT_EQ(rep.requantized, 0);
      EXPECT_TRUE(rep.warnings.empty());
      if (gs == 32) {
        ImportInfo info;
        auto back = load_gguf_model(path, *be, TrainMode::qat, 32, &info);
        EXPECT_EQ(info.exact_q4, 14);
        expect_same_codes_and_scales(m, *back);
        EXPECT_EQ(logits(*back), want);
      } else {
        auto back = load_gguf_model(path, *be, TrainMode::qat, gs);  // F32 masters on the same grid
        expect_same_codes_and_scales(m, *back);
        EXPECT_EQ(logits(*back), want);
      }
    }
    // F16: each weight rounded to fp16 (11 significant bits): logits within 2^-8 of their range.
    {
      const std::string path = tmp("drift_f16_" + std::to_string(gs) + ".gguf");
      save_gguf(path, m, GgufType::F16);
      auto back = load_gguf_model(path, *be, TrainMode::fp32, gs);
      EXPECT_LT(worst_relative(logits(*back), want), 1.0 / 256) << "gs " << gs;
    }
  }
}

TEST(QatExport, CheckpointAndExecuTorchKeepTheCodes) {
  auto be = make_cpu_backend();
  Model m(*be, tiny_config(TrainMode::qat, 64));
  m.init(6);
  plant_drift(m);
  const auto want = logits(m);
  const std::string ck = tmp("drift.safetensors");
  save_checkpoint(ck, m);
  Model back(*be, tiny_config(TrainMode::qat, 64));
  load_checkpoint(ck, back);
  EXPECT_EQ(logits(back), want);
  // ExecuTorch: the interchange codes and scales are ours.
  const std::string dir = tmp("drift_et");
  fs::create_directories(dir);
  export_executorch(dir, m);
  auto r = safetensors::Reader::open(dir + "/weights.safetensors");
  Param& p = m.param("layers.0.attention.wq.weight");
  q4::Geometry g(p.value.shape()[0], p.value.shape()[1], 32);
  const auto codes = q4::unpack_w4x8(g, be->to_vector<uint32_t>(p.codes).data());
  ASSERT_EQ(p.value.shape()[1] % 8, 0) << "K is padded to a multiple of 8 in the export";
  EXPECT_EQ(q4::interchange_to_codes(g, r.data(p.name)), codes);
}

TEST(QatExport, MergedQloraExportIsBasePlusAdapters) {
  auto be = make_cpu_backend();
  ModelConfig c = tiny_config(TrainMode::qlora, 64);
  c.lora_targets = "q,v,down";
  Model m(*be, c);
  m.init(7);
  // Nonzero adapters (B starts at 0) so the merge matters.
  for (Param& p : m.params())
    if (p.name.find(".lora_b") != std::string::npos) {
      std::vector<float> b(static_cast<size_t>(p.value.numel()));
      for (size_t i = 0; i < b.size(); ++i) b[i] = 0.01f * std::cos(static_cast<float>(i));
      be->upload(p.value, b.data(), b.size() * sizeof(float));
    }
  const auto want = logits(m);
  const std::string path = tmp("qlora_f32.gguf");
  save_gguf(path, m, GgufType::F32);
  auto back = load_gguf_model(path, *be, TrainMode::fp32, 32);
  // The merge is computed in double and rounded once per weight; the model adds the adapter path in fp32.
  EXPECT_LT(worst_relative(logits(*back), want), 1e-5);
  // Q4_0 cannot hold base + B A: re-quantized, and the report says so with the error it causes.
  GgufExportReport rep = save_gguf(tmp("qlora_q4.gguf"), m, GgufType::Q4_0);
  EXPECT_EQ(rep.requantized, 6);  // q, v and down of both layers
  EXPECT_EQ(rep.exact_q4, 8);
  ASSERT_FALSE(rep.warnings.empty());
  EXPECT_NE(rep.warnings[0].find("merged LoRA"), std::string::npos) << rep.warnings[0];
  EXPECT_NE(rep.warnings[0].find("RMS weight error"), std::string::npos) << rep.warnings[0];
}

TEST(QatExport, OlderCheckpointScalesThatAreNotFp16AreRequantizedWithAWarning) {
  auto be = make_cpu_backend();
  Model m(*be, tiny_config(TrainMode::qat, 64));
  m.init(8);
  Param& p = m.param("layers.1.feed_forward.w2.weight");
  auto s = be->to_vector<float>(p.scales);
  s[3] = std::nextafter(s[3], 1.0f);  // one ulp above an fp16 value: not one
  be->upload(p.scales, s.data(), s.size() * sizeof(float));
  m.requantize();
  GgufExportReport rep = save_gguf(tmp("old.gguf"), m, GgufType::Q4_0);
  EXPECT_EQ(rep.exact_q4, 13);
  EXPECT_EQ(rep.requantized, 1);
  ASSERT_EQ(rep.warnings.size(), 1u);
  EXPECT_NE(rep.warnings[0].find("not an fp16 value"), std::string::npos) << rep.warnings[0];
}

TEST(QatExport, InfoReportsTheShareOfMastersOutsideTheRange) {
  auto be = make_cpu_backend();
  Model m(*be, tiny_config(TrainMode::qat, 64));
  m.init(9);
  const std::string clean = tmp("clean.safetensors");
  save_checkpoint(clean, m);
  EXPECT_NE(describe_model_file(clean).find("4-bit linears: 0.00% of masters outside"), std::string::npos)
      << describe_model_file(clean);
  plant_drift(m);
  const q4::RangeStats r = m.range_stats();
  const std::string drifted = tmp("drifted.safetensors");
  save_checkpoint(drifted, m);
  const std::string d = describe_model_file(drifted);
  char want[64];
  std::snprintf(want, sizeof want, "4-bit linears: %.2f%% of masters outside",
                100.0 * static_cast<double>(r.outside) / static_cast<double>(r.total));
  EXPECT_NE(d.find(want), std::string::npos) << d;
  EXPECT_NE(d.find("layers.0.attention.wq.weight"), std::string::npos) << d;
}

// One deterministic batch per step of tiny on a fixed token pattern.
void train_steps(Model& m, const OptimConfig& opt, int from, int to) {
  std::vector<int32_t> tokens(4 * 16), labels(tokens.size());
  for (int step = from; step <= to; ++step) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = static_cast<int32_t>((i * 13 + static_cast<size_t>(step) * 7) % 64);
      labels[i] = static_cast<int32_t>((i * 13 + static_cast<size_t>(step) * 7 + 1) % 64);
    }
    m.accumulate(tokens, labels, 4, 16, static_cast<int64_t>(tokens.size()));
    m.update(opt, step);
  }
}

OptimConfig qat_opt(int steps) {
  OptimConfig opt;
  opt.lr = 3e-3f;
  opt.warmup_steps = 0;
  opt.total_steps = steps;
  return opt;
}

// Training keeps every master within half a step of the weight it stands for (requant clamps it into
// [-8.5s, 7.5s]) and never changes the scales; without the clamp, this run leaves ~30% of the masters
// outside, up to ~50 scales out.
TEST(QatTraining, MastersStayWithinHalfAStepOfTheirWeights) {
  auto be = make_cpu_backend();
  Model m(*be, tiny_config(TrainMode::qat, 64));
  m.init(10);
  Param& p = m.param("layers.0.feed_forward.w2.weight");
  const auto scales = be->to_vector<float>(p.scales);
  train_steps(m, qat_opt(250), 1, 250);
  const q4::RangeStats r = m.range_stats();
  EXPECT_EQ(r.outside, 0);
  EXPECT_LE(r.max_ratio, 8.5);
  EXPECT_GT(r.max_ratio, 7.0) << "the masters were not pushed against the bounds: this test shows nothing";
  EXPECT_EQ(be->to_vector<float>(p.scales), scales);
}

}  // namespace
}  // namespace edgetrain::test
