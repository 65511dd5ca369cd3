// llama.cpp as the reference for the architectures beyond classic Llama (harness/llamacpp_compare.h): Llama
// 3.x rope scaling (rope_freqs.weight), a tied head, heads wider than dim / n_heads, qwen2 (q/k/v biases)
// and qwen3 (per-head q/k RMSNorm), each exported and read back, and its logits and greedy tokens in
// llama.cpp equal to ours.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "edgetrain/backends.h"
#include "edgetrain/interop.h"
#include "edgetrain/tokenizer.h"
#include "io/gguf.h"
#include "harness/llamacpp_compare.h"

namespace edgetrain::test {
namespace {

// ---- Llama 3.x: rope scaling (rope_freqs.weight), tied head, heads wider than dim / n_heads ----

// Llama 3.1 rope scaling factors as transformers' "llama3" rope_type gives them for the tiny model's head
// (16 wide, theta 10000) with factor 8, low_freq_factor 1, high_freq_factor 4 and an original context of 64:
// pair 0 kept, pairs 1 and 2 blended, the rest divided by 8. Pair 1 turns by 0.316 rad per position
// unscaled and 0.244 scaled, so a consumer that ignores the factors is off by radians within the prompt.
ModelConfig llama31_config() {
  ModelConfig c = ModelConfig::preset("tiny");
  c.rope_factors = {1.0f, 1.2951f, 7.6625f, 8.0f, 8.0f, 8.0f, 8.0f, 8.0f};
  return c;
}

// A model read back from its GGUF file computes what the model computed: the config (rope factors, tied
// head, head width) and every weight survive the round trip.
void expect_gguf_round_trip(Backend& be, Model& m, const std::string& path) {
  auto back = load_gguf_model(path, be, TrainMode::fp32, 32);
  ModelConfig want = m.config();
  want.mode = TrainMode::fp32;
  EXPECT_EQ(back->config().to_json(), want.to_json());
  const std::vector<int32_t> ids = make_byte_tokenizer()->encode(kPrompt);
  m.reset_cache();
  if (m.config().mode == TrainMode::fp32) {
    EXPECT_EQ(back->next_logits(ids), m.next_logits(ids));
  }
}

TEST(LlamaCpp, Llama31RopeScalingMatches) {
  SKIP_WITHOUT_LLAMACPP();
  auto be = make_cpu_backend();
  auto m = trained(*be, llama31_config(), TrainMode::fp32, 200, 1e-2f);
  EXPECT_EQ(expect_llamacpp_agrees(*m, GgufType::F32, "rope_freqs_f32", kF32), static_cast<size_t>(kGenerate));
  const gguf::File f = gguf::File::open(llamacpp_tmp("rope_freqs_f32.gguf"));
  ASSERT_NE(f.tensor("rope_freqs.weight"), nullptr);
  EXPECT_EQ(f.to_f32(*f.tensor("rope_freqs.weight")), m->config().rope_factors);
  expect_gguf_round_trip(*be, *m, llamacpp_tmp("rope_freqs_f32.gguf"));
  // Trained in qat and exported with its 4-bit codes as Q4_0.
  auto q = trained(*be, llama31_config(), TrainMode::qat, 300, 1e-2f);
  expect_llamacpp_agrees(*q, GgufType::Q4_0, "rope_freqs_q4_0", kQ4_0);
}

// No output.weight in the file: llama.cpp uses token_embd.weight as the head, and so does the import.
TEST(LlamaCpp, TiedHeadMatches) {
  SKIP_WITHOUT_LLAMACPP();
  auto be = make_cpu_backend();
  ModelConfig c = ModelConfig::preset("tiny");
  c.tied_head = true;
  auto m = trained(*be, c, TrainMode::fp32, 200, 1e-2f);
  EXPECT_EQ(expect_llamacpp_agrees(*m, GgufType::F32, "tied_f32", kF32), static_cast<size_t>(kGenerate));
  EXPECT_EQ(gguf::File::open(llamacpp_tmp("tied_f32.gguf")).tensor("output.weight"), nullptr);
  expect_gguf_round_trip(*be, *m, llamacpp_tmp("tied_f32.gguf"));
}

// Heads of 24 (llama.attention.key_length) on a 32-wide model with 2 query heads and 1 key/value head
// (q: 48 rows, o: 48 columns), with Llama 3's rope base, rope scaling factors for a 24-wide head and a tied
// head: all of a Llama 3.2 file's features at once.
TEST(LlamaCpp, WideHeadsMatch) {
  SKIP_WITHOUT_LLAMACPP();
  auto be = make_cpu_backend();
  ModelConfig c = ModelConfig::preset("tiny");
  c.head_size = 24;
  c.n_kv_heads = 1;
  c.tied_head = true;
  c.rope_theta = 500000.0f;  // Llama 3's llama.rope.freq_base
  c.rope_factors = {1.0f, 1.0f, 2.5f, 8.0f, 8.0f, 8.0f, 8.0f, 8.0f, 8.0f, 8.0f, 8.0f, 8.0f};
  auto m = trained(*be, c, TrainMode::fp32, 200, 1e-2f);
  EXPECT_EQ(expect_llamacpp_agrees(*m, GgufType::F32, "wide_heads_f32", kF32), static_cast<size_t>(kGenerate));
  const gguf::File f = gguf::File::open(llamacpp_tmp("wide_heads_f32.gguf"));
  EXPECT_EQ(f.tensor("blk.0.attn_q.weight")->ne, (std::vector<uint64_t>{32, 48}));
  expect_gguf_round_trip(*be, *m, llamacpp_tmp("wide_heads_f32.gguf"));
}

// ---- qwen2 (q/k/v biases) and qwen3 (per-head q/k RMSNorm) ----
// llama.cpp runs both with "neox" rope (pair i of a head is rows i and i + head_dim/2 of q and k), so the
// export reorders those rows (weights, biases, norm weights) and the import puts them back; the biases and
// norms are trained, so they are far from their initial 0 and 1 by the time of the export.

// Checks the file of `m` exported as F32 (all greedy tokens beyond doubt, and its round trip) and, for a
// qat model, as Q4_0 (the 4-bit codes written bit for bit, rows reordered).
void expect_arch_exports_match(Backend& be, Model& m, const std::string& name) {
  const bool qat = m.config().mode == TrainMode::qat;
  const size_t certain = expect_llamacpp_agrees(m, GgufType::F32, name + "_f32", kF32);
  if (!qat) {
    EXPECT_EQ(certain, static_cast<size_t>(kGenerate));
  }
  const gguf::File f = gguf::File::open(llamacpp_tmp(name + "_f32.gguf"));
  EXPECT_EQ(f.find("general.architecture")->s, m.config().arch);
  expect_gguf_round_trip(be, m, llamacpp_tmp(name + "_f32.gguf"));
  if (qat) {
    auto tok = make_byte_tokenizer();
    const GgufExportReport rep = save_gguf(llamacpp_tmp(name + "_q4_0.gguf"), m, GgufType::Q4_0, tok.get());
    EXPECT_EQ(rep.requantized, 0) << "every linear's codes written as they are";
    expect_llamacpp_agrees_on(m, llamacpp_tmp(name + "_q4_0.gguf"), name + "_q4_0", kQ4_0);
  }
}

TEST(LlamaCpp, Qwen2Matches) {
  SKIP_WITHOUT_LLAMACPP();
  auto be = make_cpu_backend();
  ModelConfig c = ModelConfig::preset("tiny");
  c.arch = "qwen2";
  c.rope_theta = 1000000.0f;  // Qwen2's
  c.tied_head = true;         // as the small Qwen2 models
  for (TrainMode mode : {TrainMode::fp32, TrainMode::qat}) {
    auto m = trained(*be, c, mode, mode == TrainMode::qat ? 300 : 200, 1e-2f);
    const std::vector<float> bq = be->to_vector<float>(m->param("layers.0.attention.wq.bias").value);
    double moved = 0;
    for (float x : bq) moved = std::max(moved, static_cast<double>(std::fabs(x)));
    EXPECT_GT(moved, 0.01) << "the q bias did not train";
    expect_arch_exports_match(*be, *m, std::string("qwen2_") + mode_name(mode));
  }
}

TEST(LlamaCpp, Qwen3Matches) {
  SKIP_WITHOUT_LLAMACPP();
  auto be = make_cpu_backend();
  ModelConfig c = ModelConfig::preset("tiny");
  c.arch = "qwen3";
  c.rope_theta = 1000000.0f;
  c.head_size = 24;  // Qwen3's heads are wider than hidden / heads too
  c.n_kv_heads = 1;
  c.tied_head = true;
  for (TrainMode mode : {TrainMode::fp32, TrainMode::qat}) {
    auto m = trained(*be, c, mode, mode == TrainMode::qat ? 300 : 200, 1e-2f);
    const std::vector<float> kn = be->to_vector<float>(m->param("layers.1.attention.k_norm.weight").value);
    double moved = 0;
    for (float x : kn) moved = std::max(moved, std::fabs(x - 1.0));
    EXPECT_GT(moved, 0.01) << "the k norm did not train";
    expect_arch_exports_match(*be, *m, std::string("qwen3_") + mode_name(mode));
  }
}

}  // namespace
}  // namespace edgetrain::test
