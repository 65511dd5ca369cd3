// llama.cpp (node-llama-cpp 3.21.1's prebuilt CPU build, tests/llamacpp/llama_ref.mjs) as the reference
// consumer of our GGUF files: briefly trained models with the byte tokenizer are exported with save_gguf
// (F32, F16, Q4_0, Q8_0, Q4_K), and llama.cpp's tokenization of a prompt, its next-token distribution after
// every position and its greedy continuation of 32 tokens must match what edgetrain computes
// (Model::next_logits, generate at temperature 0). A Q4_K_M file made by llama.cpp's own quantizer
// (llama_model_quantize, through harness/ggml_ref) goes the other way: edgetrain decodes every tensor as
// llama.cpp's dequantize_row_* does, bit for bit, and computes what llama.cpp computes on it. llama.cpp only
// hands out softmax probabilities (see llama_ref.mjs), so the logits are compared as log-softmax: logits up
// to one constant per position. Skipped only when scripts/setup.sh has not installed the pinned
// node-llama-cpp.
// Llama 3.x and qwen: test_llamacpp_archs.cpp; Llama 3's vocabulary through the CLI: test_llamacpp_vocab.cpp;
// the shared checks: harness/llamacpp_compare.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "edgetrain/backends.h"
#include "edgetrain/interop.h"
#include "edgetrain/tokenizer.h"
#include "io/gguf.h"
#include "io/llama_names.h"
#include "harness/ggml_ref.h"
#include "harness/llamacpp_compare.h"
#include "harness/model_helpers.h"

namespace edgetrain::test {
namespace {

// A model whose linears' rows are whole K-quant super-blocks (K = 256 or 512), as llama.cpp needs to write
// Q4_K/Q6_K instead of falling back to 32-blocks.
ModelConfig kquant_config() {
  ModelConfig c;
  c.vocab = 256, c.dim = 256, c.n_layers = 2, c.n_heads = 4, c.ffn_dim = 512;
  return c;
}

TEST(LlamaCpp, Fp32TinyExportsMatch) {
  SKIP_WITHOUT_LLAMACPP();
  auto be = make_cpu_backend();
  auto m = trained_tiny(*be, TrainMode::fp32, 200, 1e-2f);
  // fp32 files: all kGenerate greedy tokens beyond doubt, hence identical.
  EXPECT_EQ(expect_llamacpp_agrees(*m, GgufType::F32, "fp32_f32", kF32), static_cast<size_t>(kGenerate));
  expect_llamacpp_agrees(*m, GgufType::F16, "fp32_f16", kF16);
}

// A trained qat model whose saturated masters were then moved far outside what their scales can represent
// (as checkpoints of versions before masters were kept in range have them; the codes stay): its GGUF files
// must carry the weights the 4-bit forward computes with, not the masters. (An export of those masters differs by ~21 in
// log-probability, the whole logit range.)
TEST(LlamaCpp, QatTinyExportsMatch) {
  SKIP_WITHOUT_LLAMACPP();
  auto be = make_cpu_backend();
  auto m = trained_tiny(*be, TrainMode::qat, 400, 1e-2f);
  plant_master_drift(*m, /*keep_codes=*/true);
  const q4::RangeStats range = m->range_stats();
  const int64_t drifted = range.outside, total = range.total;
  std::printf("[ llama.cpp ] qat: %lld of %lld master weights drifted outside [-8.5s, 7.5s]\n",
              static_cast<long long>(drifted), static_cast<long long>(total));
  ASSERT_GT(drifted, total / 10) << "training left the masters within their codes' range: the test would not see drift";
  expect_llamacpp_agrees(*m, GgufType::F32, "qat_f32", kF32);
  expect_llamacpp_agrees(*m, GgufType::Q4_0, "qat_q4_0", kQ4_0);
}

// ---- K-quants and Q8_0 ----
// A Q8_0 or K-quant matmul in llama.cpp quantizes its input activations to 8 bits, as Q4_0's does, so the
// errors come from there (its token embedding lookup, get_rows, dequantizes exactly with dequantize_row_*;
// an F16 export of the same model agrees to 2.6e-4 R). Q8_0 weights take Q8_0 activations (a scale per 32
// values), like Q4_0; on the 256-wide model below the worst position is the one after the prompt's two
// UTF-8 bytes, which training never saw and whose activations have outliers: measured 9.7 * 2^-8 R there
// (a Q4_0 export of the model: 5.2), under 2.6 * 2^-8 R elsewhere. 2^-4 R is 16 * 2^-8.
constexpr Tol kQ8_0{1.0 / 16};
// K-quant weights take Q8_K activations: one scale per 256 values, so one outlier coarsens the steps of 8
// times as many values as in Q8_0. 2^-3 R; measured: 19 * 2^-8 R at that position for our Q4_K export,
// 6.6 * 2^-8 for llama.cpp's Q4_K_M file of the same model, at most 9 * 2^-8 at every other position.
constexpr Tol kKQuant{1.0 / 8};

// The blocks of every K-quant and Q8_0 tensor of `path` decode to what llama.cpp's dequantize_row_* gives
// for the same bytes, bit for bit; returns how many tensors of each type the file has.
std::map<std::string, int> expect_decoding_is_llamacpps(const std::string& path) {
  const GgmlRef& g = ggml_ref();
  const gguf::File f = gguf::File::open(path);
  std::map<std::string, int> types;
  for (const gguf::TensorInfo& t : f.tensors()) {
    ++types[gguf::type_name(t.type)];
    if (!g.dequantize(t.type)) continue;
    const std::vector<float> ours = f.to_f32(t);
    std::vector<float> theirs(ours.size());
    g.dequantize(t.type)(f.data(t), theirs.data(), static_cast<int64_t>(theirs.size()));
    EXPECT_EQ(0, std::memcmp(ours.data(), theirs.data(), ours.size() * 4)) << t.name << " " << gguf::type_name(t.type);
  }
  return types;
}

// Our Q4_K and Q8_0 exports of `m`: the blocks are what llama.cpp's quantizer writes for the same weights,
// and llama.cpp computes on the file what edgetrain computes on it (the model read back in fp32: the file's
// weights, decoded exactly).
void expect_kquant_exports_match(Backend& be, Model& model) {
  const GgmlRef& g = ggml_ref();
  Model* m = &model;
  auto tok = make_byte_tokenizer();
  for (GgufType type : {GgufType::Q4_K, GgufType::Q8_0}) {
    const bool k = type == GgufType::Q4_K;
    const uint32_t tt = k ? gguf::Q4_K : gguf::Q8_0;
    const std::string name = k ? "fp32_q4_k" : "fp32_q8_0";
    const std::string path = llamacpp_tmp(name + ".gguf");
    const GgufExportReport rep = save_gguf(path, *m, type, tok.get());
    EXPECT_EQ(rep.requantized, 14) << "every block linear quantized";
    EXPECT_TRUE(rep.warnings.empty());
    std::printf("[ llama.cpp ] %s export: %s, %s\n", name.c_str(), rep.error.summary().c_str(),
                rep.error.worst_line().c_str());
    const gguf::File f = gguf::File::open(path);
    int checked = 0;
    for (Param& p : m->params()) {
      const gguf::TensorInfo* t = f.tensor(llama_names::gguf_name(p.name));
      ASSERT_NE(t, nullptr) << p.name;
      if (t->type != tt) continue;
      const std::vector<float> w = interop_detail::effective_weight(*m, p);
      std::vector<uint8_t> theirs(t->nbytes);
      g.quantize_ref(tt)(w.data(), theirs.data(), static_cast<int64_t>(w.size()));
      EXPECT_EQ(0, std::memcmp(theirs.data(), f.data(*t), theirs.size())) << p.name << ": not llama.cpp's bytes";
      ++checked;
    }
    EXPECT_EQ(checked, 14);
    EXPECT_EQ(expect_decoding_is_llamacpps(path)[gguf::type_name(tt)], 14);
    auto back = load_gguf_model(path, be, TrainMode::fp32, 32);
    EXPECT_EQ(expect_llamacpp_agrees_on(*back, path, name, k ? kKQuant : kQ8_0), static_cast<size_t>(kGenerate));
  }
}

// A Q4_K_M file made by llama.cpp itself (llama_model_quantize, its `llama-quantize`, from our F32 export
// of `m`): Q4_K linears, Q6_K output head and some ffn_down / attn_v, as the files people ship. edgetrain
// decodes every tensor as llama.cpp does (bit for bit), computes what llama.cpp computes on it, and a qat
// import measures its q4gsw error.
void expect_llamacpp_q4_k_m_imports(Backend& backend, Model& model) {
  const GgmlRef& g = ggml_ref();
  Backend* be = &backend;
  Model* m = &model;
  auto tok = make_byte_tokenizer();
  const std::string f32 = llamacpp_tmp("for_q4_k_m.gguf"), q4km = llamacpp_tmp("q4_k_m.gguf");
  save_gguf(f32, *m, GgufType::F32, tok.get());
  ASSERT_EQ(g.quantize_model(f32, q4km, /*LLAMA_FTYPE_MOSTLY_Q4_K_M=*/15), 0u) << "llama_model_quantize failed";
  std::map<std::string, int> types = expect_decoding_is_llamacpps(q4km);
  const gguf::File f = gguf::File::open(q4km);
  std::string mix, q6;
  for (const auto& [t, n] : types) mix += " " + t + ":" + std::to_string(n);
  for (const gguf::TensorInfo& t : f.tensors())
    if (t.type == gguf::Q6_K) q6 += " " + t.name;
  std::printf("[ llama.cpp ] Q4_K_M tensor types:%s; Q6_K:%s\n", mix.c_str(), q6.c_str());
  EXPECT_GT(types["Q4_K"], 0);
  EXPECT_GT(types["Q6_K"], 0);
  EXPECT_EQ(f.tensor("output.weight")->type, static_cast<uint32_t>(gguf::Q6_K));

  auto back = load_gguf_model(q4km, *be, TrainMode::fp32, 32);
  EXPECT_EQ(expect_llamacpp_agrees_on(*back, q4km, "q4_k_m", kKQuant), static_cast<size_t>(kGenerate));

  ImportInfo info;
  auto qat = load_gguf_model(q4km, *be, TrainMode::qat, 32, &info);
  ASSERT_EQ(info.q4_error.tensors.size(), 14u);
  ASSERT_NE(info.q4_error.worst(), nullptr);
  std::printf("[ llama.cpp ] Q4_K_M -> q4gsw: %s, %s\n", info.q4_error.summary().c_str(),
              info.q4_error.worst_line().c_str());
  // The report is the measured error: recompute one tensor's from the file and the model.
  Param* w2 = nullptr;
  for (Param& p : qat->params())
    if (p.name == "layers.1.feed_forward.w2.weight") w2 = &p;
  ASSERT_NE(w2, nullptr);
  const std::vector<float> file = f.to_f32(*f.tensor("blk.1.ffn_down.weight"));
  const std::vector<float> q = interop_detail::effective_weight(*qat, *w2);
  double err = 0, ref = 0;
  for (size_t i = 0; i < q.size(); ++i) err += (q[i] - file[i]) * double(q[i] - file[i]), ref += file[i] * double(file[i]);
  bool found = false;
  for (const auto& e : info.q4_error.tensors) {
    if (e.name != w2->name) continue;
    EXPECT_NEAR(e.rel_rms, std::sqrt(err / ref), 1e-12);
    found = true;
  }
  EXPECT_TRUE(found);
  EXPECT_GT(info.q4_error.overall(), 0.005);
  EXPECT_LT(info.q4_error.overall(), 0.3);
}

// One trained 256-wide model for both (its training is most of the time).
TEST(LlamaCpp, KQuantAndQ8_0FilesMatch) {
  SKIP_WITHOUT_LLAMACPP();
  auto be = make_cpu_backend();
  auto m = trained(*be, kquant_config(), TrainMode::fp32, 300, 3e-3f);
  expect_kquant_exports_match(*be, *m);
  expect_llamacpp_q4_k_m_imports(*be, *m);
}

}  // namespace
}  // namespace edgetrain::test
