// Interop tests: GGUF export/import round trips (F32, F16, exact Q4_0 <-> q4gsw), hand-built Q4_0 blocks,
// grouped-query attention models through GGUF (and bad key/value head counts), the ExecuTorch interchange
// export, the Llama tensor name table against Model's parameters, and --init's fp32 masters of a GGUF file
// (read without a backend). Hugging Face folders: test_interop_hf.cpp; corrupt GGUF files:
// test_interop_corrupt_gguf.cpp; GGUF tokenizer metadata: test_interop_tokenizer.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "edgetrain/backends.h"
#include "edgetrain/half.h"
#include "edgetrain/interop.h"
#include "edgetrain/q4gsw.h"
#include "edgetrain/safetensors.h"
#include "edgetrain/tokenizer.h"
#include "io/gguf.h"
#include "io/llama_names.h"
#include "harness/interop_helpers.h"

namespace edgetrain::test {
namespace {

TEST(Interop, GgufF32RoundTripIsIdentical) {
  auto be = make_cpu_backend();
  int cases = 0;
  for (TrainMode mode : {TrainMode::fp32, TrainMode::qat})
    for (bool tied : {false, true}) {
      Model m(*be, tiny(mode, tied));
      m.init(7);
      std::string path = interop_tmp("f32.gguf");
      save_gguf(path, m, GgufType::F32);
      ImportInfo info;
      auto back = load_gguf_model(path, *be, mode, 32, &info);
      EXPECT_EQ(back->config().to_json(), m.config().to_json());
      expect_same_masters(m, *back);
      expect_same_logits(m, *back);
      ++cases;
    }
  EXPECT_EQ(cases, 4);
}

TEST(Interop, GgufByteTokenizerVocabIsWritten) {
  auto be = make_cpu_backend();
  ModelConfig c = tiny(TrainMode::qat);
  c.vocab = 256;
  Model m(*be, c);
  m.init(3);
  std::string path = interop_tmp("tok.gguf");
  save_gguf(path, m, GgufType::F32, make_byte_tokenizer().get());
  ImportInfo info;
  load_gguf_model(path, *be, TrainMode::qat, 32, &info);
  // A "llama" vocabulary in which llama.cpp's tokenizer gives the byte ids: '▁' for the space, printable
  // ASCII as itself, byte tokens <0xNN> otherwise; no space prefix.
  EXPECT_EQ(info.vocab.model, "llama");
  ASSERT_EQ(info.vocab.tokens.size(), 256u);
  EXPECT_EQ(info.vocab.tokens['A'], "A");
  EXPECT_EQ(info.vocab.tokens[' '], "\xE2\x96\x81");
  EXPECT_EQ(info.vocab.tokens['\n'], "<0x0A>");
  EXPECT_EQ(info.vocab.token_types.size(), 256u);
  EXPECT_EQ(info.vocab.add_space_prefix, 0);
  auto tok = load_gguf_tokenizer(path);
  const std::string text = "In the beginning\n\xC3\xA9\xFF \xE2\x96\x81 x";
  EXPECT_EQ(tok->encode(text), make_byte_tokenizer()->encode(text));
  std::string d = describe_model_file(path);
  EXPECT_NE(d.find("tokenizer.ggml.tokens"), std::string::npos);
  EXPECT_NE(d.find("blk.1.ffn_down.weight F32 [64, 32]"), std::string::npos) << d;
  EXPECT_EQ(d.find("Q4_0"), std::string::npos) << "F32 export: no Q4_0 expected";
}

// Scales rounded to fp16 (and codes re-derived) so that the Q4_0 export can be exact.
void make_scales_fp16(Model& m) {
  for (Param& p : m.params())
    if (p.quantized()) {
      auto s = m.backend().to_vector<float>(p.scales);
      for (float& x : s) x = f16_to_f32(f32_to_f16(x));
      m.backend().upload(p.scales, s.data(), s.size() * 4);
    }
  m.requantize();
}

TEST(Interop, GgufQ4_0IsExactForQatModels) {
  auto be = make_cpu_backend();
  Model m(*be, tiny(TrainMode::qat));
  m.init(11);
  make_scales_fp16(m);
  std::string path = interop_tmp("q4.gguf");
  GgufExportReport rep = save_gguf(path, m, GgufType::Q4_0);
  EXPECT_EQ(rep.exact_q4, 14);
  EXPECT_EQ(rep.requantized, 0);
  ImportInfo info;
  auto back = load_gguf_model(path, *be, TrainMode::qat, 32, &info);
  EXPECT_EQ(info.exact_q4, 14);
  int checked = 0;
  for (Param& p : m.params()) {
    if (!p.quantized()) continue;
    Param& q = back->param(p.name);
    EXPECT_EQ(be->to_vector<uint32_t>(p.codes), be->to_vector<uint32_t>(q.codes)) << p.name;
    auto s1 = be->to_vector<float>(p.scales), s2 = be->to_vector<float>(q.scales);
    EXPECT_EQ(0, std::memcmp(s1.data(), s2.data(), s1.size() * 4)) << p.name;
    // Masters are the dequantized codes.
    q4::Geometry g(p.value.shape()[0], p.value.shape()[1], 32);
    auto deq = q4::dequantize(g, q4::unpack_w4x8(g, be->to_vector<uint32_t>(p.codes).data()).data(), s1.data());
    EXPECT_EQ(deq, be->to_vector<float>(q.value)) << p.name;
    ++checked;
  }
  EXPECT_EQ(checked, 14);
  gguf::File f = gguf::File::open(path);
  EXPECT_EQ(f.tensor("blk.0.attn_q.weight")->type, static_cast<uint32_t>(gguf::Q4_0));
  EXPECT_EQ(f.tensor("token_embd.weight")->type, static_cast<uint32_t>(gguf::F32));
  EXPECT_EQ(f.get_int("general.file_type"), 2);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), 2);
  EXPECT_EQ(f.get_int("llama.context_length"), 32);
}

TEST(Interop, HandBuiltQ4_0BlockDecodes) {
  uint8_t blk[18];
  uint16_t d = 0x3800;  // 0.5
  std::memcpy(blk, &d, 2);
  for (int j = 0; j < 16; ++j) blk[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float out[32];
  gguf::decode_q4_0(blk, 32, out);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], (j - 8) * 0.5f) << j;
    EXPECT_EQ(out[j + 16], (7 - j) * 0.5f) << j;
  }
  uint8_t codes[32];
  float scale = 0;
  gguf::q4_0_to_q4gsw(blk, 1, 32, codes, &scale);
  EXPECT_EQ(scale, 0.5f);
  EXPECT_EQ(codes[3], 3);
  EXPECT_EQ(codes[19], 12);
  auto again = gguf::q4gsw_to_q4_0(1, 32, codes, &scale);
  EXPECT_EQ(0, std::memcmp(again.data(), blk, 18));
  // Through a file, and Q8_0 too.
  gguf::Writer w;
  w.add_tensor("q4", {32}, gguf::Q4_0, std::vector<uint8_t>(blk, blk + 18));
  std::vector<uint8_t> q8(34);
  std::memcpy(q8.data(), &d, 2);
  for (int j = 0; j < 32; ++j) q8[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 16));
  w.add_tensor("q8", {32}, gguf::Q8_0, q8);
  auto bytes = w.to_bytes();
  gguf::File f = gguf::File::from_memory(bytes.data(), bytes.size(), "hand.gguf");
  auto v4 = f.to_f32(*f.tensor("q4"));
  auto v8 = f.to_f32(*f.tensor("q8"));
  EXPECT_EQ(v4[20], (7 - 4) * 0.5f);
  EXPECT_EQ(v8[0], -8.0f);
  EXPECT_EQ(v8[31], 7.5f);
  EXPECT_EQ(f.tensor("q8")->offset % 32, 0u);
}

TEST(Interop, GgufF16WithinHalfPrecision) {
  auto be = make_cpu_backend();
  Model m(*be, tiny(TrainMode::fp32));
  m.init(5);
  std::string path = interop_tmp("f16.gguf");
  save_gguf(path, m, GgufType::F16);
  auto back = load_gguf_model(path, *be, TrainMode::fp32, 32);
  int differing = 0;
  for (Param& p : m.params()) {
    auto x = be->to_vector<float>(p.value), y = be->to_vector<float>(back->param(p.name).value);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_LE(std::fabs(x[i] - y[i]), std::fabs(x[i]) * (1.0f / 2048) + 6e-8f) << p.name << "[" << i << "]";
      differing += x[i] != y[i];
    }
  }
  EXPECT_GT(differing, 0);  // the linears really went through fp16
  expect_same_logits(m, *back, 0.05f);
}

TEST(Interop, GgufQloraIsMerged) {
  auto be = make_cpu_backend();
  ModelConfig c = tiny(TrainMode::qlora);
  Model m(*be, c);
  m.init(9);
  for (Param& p : m.params())  // non-zero adapters
    if (p.name.find(".lora_b") != std::string::npos) {
      std::vector<float> v(static_cast<size_t>(p.value.numel()));
      for (size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * static_cast<float>((i * 7) % 13) - 0.06f;
      be->upload(p.value, v.data(), v.size() * 4);
    }
  std::string path = interop_tmp("qlora.gguf");
  save_gguf(path, m, GgufType::F32);
  auto back = load_gguf_model(path, *be, TrainMode::fp32, 32);
  expect_same_logits(m, *back, 2e-4f);
}

TEST(Interop, GgufGroupedQueryAttentionRoundTrip) {
  auto be = make_cpu_backend();
  for (int64_t kv : {2, 1})
    for (TrainMode mode : {TrainMode::fp32, TrainMode::qat}) {
      SCOPED_TRACE(std::string(mode_name(mode)) + " n_kv_heads " + std::to_string(kv));
      Model m(*be, tiny_gqa(mode, kv));
      m.init(13);
      std::string path = interop_tmp("gqa.gguf");
      save_gguf(path, m, GgufType::F32);
      gguf::File f = gguf::File::open(path);
      EXPECT_EQ(f.get_int("llama.attention.head_count"), 4);
      EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), kv);
      EXPECT_EQ(f.tensor("blk.0.attn_k.weight")->ne, (std::vector<uint64_t>{32, static_cast<uint64_t>(kv * 8)}));
      EXPECT_EQ(f.tensor("blk.1.attn_v.weight")->ne, (std::vector<uint64_t>{32, static_cast<uint64_t>(kv * 8)}));
      EXPECT_EQ(f.tensor("blk.0.attn_q.weight")->ne, (std::vector<uint64_t>{32, 32}));
      EXPECT_EQ(read_gguf_config(path, mode, 32).kv_heads(), kv);
      auto back = load_gguf_model(path, *be, mode, 32);
      EXPECT_EQ(back->config().to_json(), m.config().to_json());
      expect_same_masters(m, *back);
      expect_same_logits(m, *back);
    }
  // Q4_0: the K/V codes go out and come back bit for bit too.
  Model m(*be, tiny_gqa(TrainMode::qat, 2));
  m.init(17);
  make_scales_fp16(m);
  std::string path = interop_tmp("gqa_q4.gguf");
  EXPECT_EQ(save_gguf(path, m, GgufType::Q4_0).exact_q4, 14);
  ImportInfo info;
  auto back = load_gguf_model(path, *be, TrainMode::qat, 32, &info);
  EXPECT_EQ(info.exact_q4, 14);
  for (const char* n : {"layers.0.attention.wk.weight", "layers.1.attention.wv.weight"})
    EXPECT_EQ(be->to_vector<uint32_t>(m.param(n).codes), be->to_vector<uint32_t>(back->param(n).codes)) << n;
  // qlora with adapters on the [16, 32] K/V projections: exported merged.
  ModelConfig lc = tiny_gqa(TrainMode::qlora, 2);
  lc.lora_targets = "q,k,v,o";
  Model lm(*be, lc);
  lm.init(19);
  for (Param& p : lm.params())
    if (p.name.find(".lora_b") != std::string::npos) {
      std::vector<float> v(static_cast<size_t>(p.value.numel()));
      for (size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * static_cast<float>((i * 7) % 13) - 0.06f;
      be->upload(p.value, v.data(), v.size() * 4);
    }
  save_gguf(interop_tmp("gqa_qlora.gguf"), lm, GgufType::F32);
  auto merged = load_gguf_model(interop_tmp("gqa_qlora.gguf"), *be, TrainMode::fp32, 32);
  EXPECT_EQ(merged->config().kv_heads(), 2);
  expect_same_logits(lm, *merged, 2e-4f);
}

TEST(Interop, GgufBadKvHeadCountIsRejected) {
  for (uint32_t kv : {3u, 0u, 8u}) {
    gguf::Writer w;
    w.add_kv("general.architecture", gguf::Value::str("llama"));
    w.add_kv("llama.embedding_length", gguf::Value::u32(32));
    w.add_kv("llama.block_count", gguf::Value::u32(1));
    w.add_kv("llama.attention.head_count", gguf::Value::u32(4));
    w.add_kv("llama.attention.head_count_kv", gguf::Value::u32(kv));
    std::string path = interop_tmp("badkv.gguf");
    w.save(path);
    try {
      read_gguf_config(path, TrainMode::qat, 32);
      FAIL() << "head_count_kv " << kv << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("head_count_kv = " + std::to_string(kv) + " does not divide"),
                std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
}

// A claimed block count far beyond the file's tensors is one problem, found at once (fuzz_gguf found the check
// listing the expected tensors of every claimed block until memory ran out).
TEST(Interop, GgufBlockCountBeyondItsTensorsIsOneProblem) {
  gguf::Writer w;
  w.add_kv("general.architecture", gguf::Value::str("llama"));
  w.add_kv("llama.embedding_length", gguf::Value::u32(32));
  w.add_kv("llama.block_count", gguf::Value::u32(50000000));
  w.add_kv("llama.attention.head_count", gguf::Value::u32(4));
  w.add_kv("llama.feed_forward_length", gguf::Value::u32(64));
  w.add_kv("llama.attention.layer_norm_rms_epsilon", gguf::Value::f32(1e-5f));
  w.add_tensor("token_embd.weight", {32, 256}, 0 /* F32 */, std::vector<uint8_t>(32 * 256 * 4));
  std::string path = interop_tmp("many_blocks.gguf");
  w.save(path);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string d = describe_model_file(path);
  EXPECT_NE(d.find("the block count 50000000 needs at least 9 tensors per block, but the file has 1 tensors"),
            std::string::npos) << d;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  EXPECT_THROW(read_gguf_config(path, TrainMode::qat, 32), Error);
}

// ---- the Llama tensor mapping (io/llama_names) ----

// The table the GGUF and HF importers share lists exactly the tensors of Model that files hold, in Model's
// order and with Model's shapes, for every shape of model: tied head, grouped-query attention, adapters.
TEST(Interop, LlamaNameTableMatchesModelParams) {
  auto be = make_cpu_backend();
  ModelConfig all_adapters = tiny(TrainMode::qlora);
  all_adapters.lora_targets = "q,k,v,o,gate,up,down";
  for (const ModelConfig& c : {tiny(TrainMode::fp32), tiny(TrainMode::qat, /*tied=*/true), tiny_gqa(TrainMode::qat, 2),
                               all_adapters}) {
    SCOPED_TRACE(c.to_json());
    Model m(*be, c);
    std::vector<std::string> want, got;
    for (Param& p : m.params())
      if (p.name.find(".lora_") == std::string::npos) want.push_back(p.name + " " + p.value.shape().str());
    for (const auto& t : llama_names::base_tensors(c)) {
      got.push_back(t.name + " " + t.shape.str());
      EXPECT_EQ(llama_names::gguf_name(t.name), t.gguf);
    }
    EXPECT_EQ(got, want);
  }
  // The names llama.cpp and transformers use (what their loaders look up).
  const auto t = llama_names::base_tensors(tiny_gqa(TrainMode::qat, 2));
  EXPECT_EQ(t[0].gguf, "token_embd.weight");
  EXPECT_EQ(t[0].hf, "model.embed_tokens.weight");
  EXPECT_EQ(t[3].name, "layers.0.attention.wk.weight");
  EXPECT_EQ(t[3].gguf, "blk.0.attn_k.weight");
  EXPECT_EQ(t[3].hf, "model.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(t[3].shape, (Shape{16, 32}));
  EXPECT_EQ(t[9].gguf, "blk.0.ffn_down.weight");
  EXPECT_EQ(t[9].hf, "model.layers.0.mlp.down_proj.weight");
  EXPECT_EQ(t.back().gguf, "output.weight");
  EXPECT_EQ(t.back().hf, "lm_head.weight");
  EXPECT_EQ(llama_names::gguf_name("layers.1.attention.wq.weight.lora_a"), "");
  EXPECT_THROW(llama_names::gguf_name("layers.1.attention.wz.weight"), Error);
}

// `train --init x.gguf` reads fp32 weights under our names without building a model: exactly the weights the
// file holds (a 4-bit linear's dequantized codes), and a file missing a tensor is rejected naming it.
TEST(Interop, GgufImportMastersAreTheFileWeights) {
  auto be = make_cpu_backend();
  for (GgufType type : {GgufType::F32, GgufType::Q4_0}) {
    Model m(*be, tiny(TrainMode::qat));
    m.init(5);
    const std::string path = interop_tmp("masters.gguf");
    save_gguf(path, m, type);
    ModelConfig c;
    const auto masters = import_masters(path, &c);
    EXPECT_EQ(c.dim, m.config().dim);
    EXPECT_EQ(c.mode, TrainMode::fp32);
    size_t n = 0;
    for (Param& p : m.params()) {
      if (p.name.find(".lora_") != std::string::npos) continue;
      ++n;
      const auto it = masters.find(p.name);
      ASSERT_NE(it, masters.end()) << p.name;
      const auto want = interop_detail::effective_weight(m, p);  // Q4_0 of a qat model is exact
      ASSERT_EQ(it->second.size(), want.size()) << p.name;
      EXPECT_EQ(0, std::memcmp(it->second.data(), want.data(), want.size() * 4)) << p.name;
    }
    EXPECT_EQ(masters.size(), n);
  }
  // The same file without blk.1.attn_v.weight.
  const gguf::File f = gguf::File::open(interop_tmp("masters.gguf"));
  gguf::Writer w;
  for (const auto& [k, v] : f.metadata()) w.add_kv(k, v);
  for (const auto& t : f.tensors())
    if (t.name != "blk.1.attn_v.weight")
      w.add_tensor(t.name, t.ne, t.type, std::vector<uint8_t>(f.data(t), f.data(t) + t.nbytes));
  w.save(interop_tmp("missing.gguf"));
  try {
    import_masters(interop_tmp("missing.gguf"));
    FAIL() << "a GGUF file without blk.1.attn_v.weight was imported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing tensor 'blk.1.attn_v.weight' (for layers.1.attention.wv.weight)"),
              std::string::npos) << e.what();
  }
}

// ---- ExecuTorch ----

TEST(Interop, ExecutorchInterchangeMatchesCodes) {
  auto be = make_cpu_backend();
  ModelConfig c = tiny(TrainMode::qat);
  c.dim = 36;      // K = 36: padded to 40, partial last group
  c.ffn_dim = 66;  // N = 66: scales padded to 68; K = 66 for down: padded to 72
  Model m(*be, c);
  m.init(4);
  std::string dir = interop_tmp("et");
  export_executorch(dir, m);
  auto r = safetensors::Reader::open(dir + "/weights.safetensors");
  int checked = 0;
  for (Param& p : m.params()) {
    if (!p.quantized()) {
      EXPECT_EQ(r.to_f32(p.name), be->to_vector<float>(p.value)) << p.name;
      continue;
    }
    const int64_t N = p.value.shape()[0], K = p.value.shape()[1], Kp = (K + 7) / 8 * 8, Np = (N + 3) / 4 * 4;
    q4::Geometry g(N, K, 32), gp(N, Kp, 32);
    const auto& ti = r.info(p.name);
    ASSERT_EQ(ti.dtype, "U8");
    ASSERT_EQ(ti.shape, (std::vector<int64_t>{N, Kp / 2}));
    auto codes = q4::interchange_to_codes(gp, r.data(p.name));
    auto ours = q4::unpack_w4x8(g, be->to_vector<uint32_t>(p.codes).data());
    int pad = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < Kp; ++k) {
        if (k < K) {
          ASSERT_EQ(codes[n * Kp + k], ours[n * K + k]) << p.name << " " << n << "," << k;
        } else {
          ASSERT_EQ(codes[n * Kp + k], 8);
          ++pad;
        }
      }
    EXPECT_EQ(pad, N * (Kp - K));
    auto sc = r.to_f32(p.name + ".scales");
    ASSERT_EQ(r.info(p.name + ".scales").shape, (std::vector<int64_t>{g.groups(), Np}));
    auto s = be->to_vector<float>(p.scales);
    for (int64_t gi = 0; gi < g.groups(); ++gi)
      for (int64_t n = 0; n < Np; ++n) ASSERT_EQ(sc[gi * Np + n], n < N ? s[gi * N + n] : 0.0f) << p.name;
    ++checked;
  }
  EXPECT_EQ(checked, 14);
  std::ifstream in(dir + "/manifest.json");
  auto man = nlohmann::json::parse(in);
  EXPECT_EQ(man["quantized_linears"].size(), 14u);
  EXPECT_EQ(man["group_size"], 32);
  EXPECT_EQ(man["fp32_tensors"].size(), 2u + 2u * 2u + 1u);  // emb, head, 2 norms per layer, final norm
}

}  // namespace
}  // namespace edgetrain::test
