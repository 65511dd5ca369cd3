// Interop tests: GGUF export/import round trips (F32, F16, exact Q4_0 <-> q4gsw), hand-built Q4_0 blocks,
// Hugging Face folders (single and sharded, rotate_half order) written here, grouped-query attention models
// through GGUF and HF (and bad key/value head counts), the ExecuTorch interchange export, and corrupt GGUF
// files (truncations, huge counts, bad fields, a fixed-seed mutation loop). GGUF tokenizer metadata: export ->
// import keeps it, malformed metadata is rejected naming the key, and `train --init x.gguf` trains, generates
// and converts with the file's own tokenizer. The Llama tensor name table against Model's parameters, and
// --init's fp32 masters of a GGUF file (read without a backend).
#include <gtest/gtest.h>

#include <chrono>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "edgetrain/backends.h"
#include "edgetrain/checkpoint.h"
#include "edgetrain/interop.h"
#include "edgetrain/tokenizer.h"
#include "edgetrain/trainer.h"
#include "edgetrain/q4gsw.h"
#include "edgetrain/half.h"
#include "edgetrain/safetensors.h"
#include "io/gguf.h"
#include "io/llama_names.h"
#include "harness/cli_child.h"
#include "harness/temp_files.h"
#include "harness/gguf_vocab.h"

namespace fs = std::filesystem;

namespace edgetrain::test {
namespace {

ModelConfig tiny(TrainMode mode, bool tied = false) {
  ModelConfig c = ModelConfig::preset("tiny");
  c.mode = mode;
  c.vocab = 64;
  c.tied_head = tied;
  return c;
}

std::string tmp(const std::string& name) { return temp_path("interop", name); }

const std::vector<int32_t> kPrompt = {1, 5, 9, 33, 2, 60, 17};

// `exported`: a's side is what an export writes (interop_detail::effective_weight); otherwise a's masters.
void expect_same_masters(Model& a, Model& b, bool exported = true) {
  int n = 0;
  for (Param& p : a.params()) {
    if (p.name.find(".lora_") != std::string::npos) continue;
    // A 4-bit linear is exported as the weight it computes with, (code - 8) * scale, not its master.
    auto x = exported ? interop_detail::effective_weight(a, p) : a.backend().to_vector<float>(p.value);
    auto y = b.backend().to_vector<float>(b.param(p.name).value);
    ASSERT_EQ(x.size(), y.size()) << p.name;
    EXPECT_EQ(0, std::memcmp(x.data(), y.data(), x.size() * 4)) << p.name;
    ++n;
  }
  EXPECT_GT(n, 10);
}

void expect_same_logits(Model& a, Model& b, float tol = 0.0f) {
  a.reset_cache();
  b.reset_cache();
  auto x = a.next_logits(kPrompt), y = b.next_logits(kPrompt);
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], y[i], tol) << "logit " << i;
}

TEST(Interop, GgufF32RoundTripIsIdentical) {
  auto be = make_cpu_backend();
  int cases = 0;
  for (TrainMode mode : {TrainMode::fp32, TrainMode::qat})
    for (bool tied : {false, true}) {
      Model m(*be, tiny(mode, tied));
      m.init(7);
      std::string path = tmp("f32.gguf");
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
  std::string path = tmp("tok.gguf");
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
  std::string path = tmp("q4.gguf");
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
  std::string path = tmp("f16.gguf");
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
  std::string path = tmp("qlora.gguf");
  save_gguf(path, m, GgufType::F32);
  auto back = load_gguf_model(path, *be, TrainMode::fp32, 32);
  expect_same_logits(m, *back, 2e-4f);
}

// Grouped-query attention: 4 query heads of head dim 8 sharing `kv` key/value heads.
ModelConfig tiny_gqa(TrainMode mode, int64_t kv) {
  ModelConfig c = tiny(mode);
  c.n_heads = 4;
  c.n_kv_heads = kv;
  return c;
}

TEST(Interop, GgufGroupedQueryAttentionRoundTrip) {
  auto be = make_cpu_backend();
  for (int64_t kv : {2, 1})
    for (TrainMode mode : {TrainMode::fp32, TrainMode::qat}) {
      SCOPED_TRACE(std::string(mode_name(mode)) + " n_kv_heads " + std::to_string(kv));
      Model m(*be, tiny_gqa(mode, kv));
      m.init(13);
      std::string path = tmp("gqa.gguf");
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
  std::string path = tmp("gqa_q4.gguf");
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
  save_gguf(tmp("gqa_qlora.gguf"), lm, GgufType::F32);
  auto merged = load_gguf_model(tmp("gqa_qlora.gguf"), *be, TrainMode::fp32, 32);
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
    std::string path = tmp("badkv.gguf");
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
  std::string path = tmp("many_blocks.gguf");
  w.save(path);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string d = describe_model_file(path);
  EXPECT_NE(d.find("the block count 50000000 needs at least 9 tensors per block, but the file has 1 tensors"),
            std::string::npos) << d;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  EXPECT_THROW(read_gguf_config(path, TrainMode::qat, 32), Error);
}

// ---- Hugging Face ----

std::string hf_name(const std::string& ours) {
  static const std::map<std::string, std::string> top = {{"tok_embeddings.weight", "model.embed_tokens.weight"},
                                                         {"norm.weight", "model.norm.weight"},
                                                         {"output.weight", "lm_head.weight"}};
  if (top.count(ours)) return top.at(ours);
  static const std::map<std::string, std::string> sub = {
      {"attention_norm.weight", "input_layernorm.weight"}, {"attention.wq.weight", "self_attn.q_proj.weight"},
      {"attention.wk.weight", "self_attn.k_proj.weight"},  {"attention.wv.weight", "self_attn.v_proj.weight"},
      {"attention.wo.weight", "self_attn.o_proj.weight"},  {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"feed_forward.w1.weight", "mlp.gate_proj.weight"},  {"feed_forward.w3.weight", "mlp.up_proj.weight"},
      {"feed_forward.w2.weight", "mlp.down_proj.weight"}};
  size_t dot = ours.find('.', 7);
  return "model.layers." + ours.substr(7, dot - 7) + "." + sub.at(ours.substr(dot + 1));
}

// Writes `m` as an HF Llama folder: q/k rows in rotate_half order (pair i's elements at rows i and i+hd/2 of
// each head: n_heads heads in q, n_kv_heads in k), tensors in F32 except the norms in BF16-exact F32;
// `shards` files. kv_heads >= 0 overrides num_key_value_heads in config.json.
void write_hf(Model& m, const std::string& dir, int shards, int kv_heads = -1) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  const ModelConfig& c = m.config();
  nlohmann::json cfg = {{"model_type", "llama"},          {"hidden_size", c.dim},
                        {"num_hidden_layers", c.n_layers}, {"num_attention_heads", c.n_heads},
                        {"num_key_value_heads", kv_heads < 0 ? c.kv_heads() : kv_heads},
                        {"intermediate_size", c.ffn_dim},  {"rms_norm_eps", c.norm_eps},
                        {"rope_theta", c.rope_theta},      {"max_position_embeddings", c.max_seq},
                        {"vocab_size", c.vocab},           {"tie_word_embeddings", c.tied_head}};
  std::ofstream(dir + "/config.json") << cfg.dump();
  std::vector<safetensors::Writer> ws(static_cast<size_t>(shards));
  nlohmann::json wmap = nlohmann::json::object();
  int i = 0;
  for (Param& p : m.params()) {
    auto v = m.backend().to_vector<float>(p.value);
    if (p.name.find("attention.wq") != std::string::npos || p.name.find("attention.wk") != std::string::npos) {
      const int64_t hd = c.head_dim(), cols = c.dim;
      const int64_t heads = p.name.find("attention.wk") != std::string::npos ? c.kv_heads() : c.n_heads;
      std::vector<float> hf(v.size());
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t r = 0; r < hd; ++r) {
          int64_t ours_row = h * hd + (r < hd / 2 ? 2 * r : 2 * (r - hd / 2) + 1);
          std::copy_n(&v[ours_row * cols], cols, &hf[(h * hd + r) * cols]);
        }
      v = hf;
    }
    std::vector<uint8_t> bytes(v.size() * 4);
    std::memcpy(bytes.data(), v.data(), bytes.size());
    const Shape& s = p.value.shape();
    int f = i++ % shards;
    ws[f].add_owned(hf_name(p.name), "F32", std::vector<int64_t>(s.data(), s.data() + s.rank()), std::move(bytes));
    wmap[hf_name(p.name)] = "model-0000" + std::to_string(f + 1) + ".safetensors";
  }
  if (shards == 1) {
    ws[0].save(dir + "/model.safetensors");
  } else {
    for (int f = 0; f < shards; ++f) ws[f].save(dir + "/model-0000" + std::to_string(f + 1) + ".safetensors");
    std::ofstream(dir + "/model.safetensors.index.json") << nlohmann::json{{"weight_map", wmap}}.dump();
  }
}

TEST(Interop, HfFolderImportsWithEqualLogits) {
  auto be = make_cpu_backend();
  int cases = 0;
  for (int shards : {1, 3})
    for (TrainMode mode : {TrainMode::fp32, TrainMode::qat}) {
      Model m(*be, tiny(mode));
      m.init(21);
      std::string dir = tmp("hf" + std::to_string(shards));
      write_hf(m, dir, shards);
      EXPECT_TRUE(is_hf_folder(dir));
      auto back = load_hf_llama(dir, *be, mode, 32);
      expect_same_masters(m, *back, /*exported=*/false);  // write_hf writes masters
      expect_same_logits(m, *back);
      ++cases;
    }
  EXPECT_EQ(cases, 4);
  // --init's path: masters by our names.
  ModelConfig c;
  auto masters = import_masters(tmp("hf3"), &c);
  EXPECT_EQ(c.dim, 32);
  EXPECT_EQ(masters.count("layers.1.attention.wk.weight"), 1u);
}

// An HF folder with num_key_value_heads = 2 (k_proj/v_proj [16, 32], k_proj in rotate_half order over 2 heads).
TEST(Interop, HfGroupedQueryAttentionImportsWithEqualLogits) {
  auto be = make_cpu_backend();
  for (TrainMode mode : {TrainMode::fp32, TrainMode::qat}) {
    SCOPED_TRACE(mode_name(mode));
    Model m(*be, tiny_gqa(mode, 2));
    m.init(23);
    std::string dir = tmp("hfgqa");
    write_hf(m, dir, 2);
    ASSERT_EQ(nlohmann::json::parse(std::ifstream(dir + "/config.json"))["num_key_value_heads"], 2);
    EXPECT_EQ(read_hf_config(dir, mode, 32).kv_heads(), 2);
    auto back = load_hf_llama(dir, *be, mode, 32);
    EXPECT_EQ(back->config().to_json(), m.config().to_json());
    expect_same_masters(m, *back, /*exported=*/false);  // write_hf writes masters
    expect_same_logits(m, *back);
  }
  ModelConfig c;
  auto masters = import_masters(tmp("hfgqa"), &c);
  EXPECT_EQ(c.kv_heads(), 2);
  EXPECT_EQ(masters.at("layers.1.attention.wk.weight").size(), 16u * 32u);
}

TEST(Interop, HfBadKvHeadCountIsRejected) {
  auto be = make_cpu_backend();
  Model m(*be, tiny(TrainMode::fp32));  // 2 heads
  m.init(1);
  std::string dir = tmp("hfbadkv");
  for (int kv : {3, 0}) {
    write_hf(m, dir, 1, kv);
    try {
      load_hf_llama(dir, *be, TrainMode::qat, 32);
      FAIL() << "num_key_value_heads " << kv << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("num_key_value_heads = " + std::to_string(kv) + " does not divide"),
                std::string::npos) << e.what();
    }
  }
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
    const std::string path = tmp("masters.gguf");
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
  const gguf::File f = gguf::File::open(tmp("masters.gguf"));
  gguf::Writer w;
  for (const auto& [k, v] : f.metadata()) w.add_kv(k, v);
  for (const auto& t : f.tensors())
    if (t.name != "blk.1.attn_v.weight")
      w.add_tensor(t.name, t.ne, t.type, std::vector<uint8_t>(f.data(t), f.data(t) + t.nbytes));
  w.save(tmp("missing.gguf"));
  try {
    import_masters(tmp("missing.gguf"));
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
  std::string dir = tmp("et");
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

// ---- corrupt GGUF files ----

std::vector<uint8_t> small_valid_gguf() {
  gguf::Writer w;
  w.add_kv("general.architecture", gguf::Value::str("llama"));
  w.add_kv("u8", [] { gguf::Value v; v.type = gguf::VType::U8; v.u = 7; return v; }());
  w.add_kv("f64", [] { gguf::Value v; v.type = gguf::VType::F64; v.f = 2.5; return v; }());
  w.add_kv("b", gguf::Value::boolean(true));
  w.add_kv("strs", gguf::Value::strings({"a", "bc", ""}));
  gguf::Value nested;
  nested.type = gguf::VType::ARRAY;
  nested.elem = gguf::VType::ARRAY;
  nested.arr = {gguf::Value::f32s({1.0f, 2.0f}), gguf::Value::f32s({})};
  w.add_kv("nested", nested);
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  std::vector<uint8_t> xb(24);
  std::memcpy(xb.data(), x.data(), 24);
  w.add_tensor("x", {3, 2}, gguf::F32, xb);
  w.add_tensor("q", {32}, gguf::Q4_0, std::vector<uint8_t>(18, 0x11));
  return w.to_bytes();
}

// Parses and decodes everything; returns false when the file is rejected with an Error naming it.
bool parse_all(const std::vector<uint8_t>& b) {
  try {
    gguf::File f = gguf::File::from_memory(b.data(), b.size(), "corrupt.gguf");
    for (auto& t : f.tensors()) f.to_f32(t);
    for (auto& [k, v] : f.metadata()) v.describe();
    return true;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("corrupt.gguf"), std::string::npos) << e.what();
    return false;
  }
}

TEST(Interop, GgufTruncatedAtEveryLengthIsRejected) {
  auto full = small_valid_gguf();
  ASSERT_TRUE(parse_all(full));
  gguf::File f = gguf::File::from_memory(full.data(), full.size(), "x");
  const gguf::TensorInfo* q = f.tensor("q");
  const size_t data_end = static_cast<size_t>(f.data(*q) - full.data()) + q->nbytes;
  int rejected = 0;
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<long>(n));
    bool ok = parse_all(cut);
    if (n < data_end) {
      EXPECT_FALSE(ok) << "length " << n;
    }
    rejected += !ok;
  }
  EXPECT_EQ(rejected, static_cast<int>(data_end));
}

std::vector<uint8_t> header(uint64_t n_tensors, uint64_t n_kv, uint32_t magic = gguf::kMagic, uint32_t version = 3) {
  std::vector<uint8_t> b(24);
  std::memcpy(&b[0], &magic, 4);
  std::memcpy(&b[4], &version, 4);
  std::memcpy(&b[8], &n_tensors, 8);
  std::memcpy(&b[16], &n_kv, 8);
  return b;
}
template <typename T>
void put(std::vector<uint8_t>& b, T v) {
  size_t at = b.size();
  b.resize(at + sizeof(T));
  std::memcpy(&b[at], &v, sizeof(T));
}
void put_str(std::vector<uint8_t>& b, const std::string& s) {
  put<uint64_t>(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}
std::string reject_message(const std::vector<uint8_t>& b) {
  try {
    gguf::File::from_memory(b.data(), b.size(), "corrupt.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  return "ACCEPTED";
}
std::vector<uint8_t> one_tensor(uint32_t n_dims, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
  auto b = header(1, 0);
  put_str(b, "t");
  put<uint32_t>(b, n_dims);
  for (uint64_t d : dims) put<uint64_t>(b, d);
  put<uint32_t>(b, type);
  put<uint64_t>(b, offset);
  b.resize(b.size() + 64, 0);
  return b;
}

TEST(Interop, GgufCorruptFieldsAreRejected) {
  struct Case {
    const char* what;
    std::vector<uint8_t> bytes;
    const char* expect;
  };
  std::vector<Case> cases;
  cases.push_back({"tensor count 2^60", header(uint64_t{1} << 60, 0), "tensor count"});
  cases.push_back({"kv count 2^62", header(0, uint64_t{1} << 62), "metadata count"});
  {
    auto b = header(0, 1);
    put<uint64_t>(b, uint64_t{1} << 62);  // key length
    b.resize(b.size() + 64, 0);
    cases.push_back({"string length 2^62", b, "truncated"});
  }
  {
    auto b = header(0, 1);
    put_str(b, "k");
    put<uint32_t>(b, 8);  // STRING
    put<uint64_t>(b, uint64_t{1} << 62);
    b.resize(b.size() + 64, 0);
    cases.push_back({"string value length 2^62", b, "truncated"});
  }
  {
    auto b = header(0, 1);
    put_str(b, "k");
    put<uint32_t>(b, 9);  // ARRAY
    put<uint32_t>(b, 0);  // of u8
    put<uint64_t>(b, uint64_t{1} << 62);
    cases.push_back({"array count 2^62", b, "array count"});
  }
  {
    auto b = header(0, 1);
    put_str(b, "k");
    put<uint32_t>(b, 13);
    cases.push_back({"bad value type", b, "unknown value type"});
  }
  {
    auto b = header(0, 1);
    put_str(b, "k");
    put<uint32_t>(b, 9);  // ARRAY of ARRAY of ARRAY ...
    for (int d = 0; d < 20; ++d) put<uint32_t>(b, 9), put<uint64_t>(b, 1);
    cases.push_back({"deep nesting", b, "nested"});
  }
  cases.push_back({"bad magic", header(0, 0, 0x12345678), "bad magic"});
  cases.push_back({"bad version", header(0, 0, gguf::kMagic, 99), "version"});
  cases.push_back({"bad tensor type", one_tensor(1, {32}, 99, 0), "unknown tensor type 99"});
  cases.push_back({"removed tensor type", one_tensor(1, {32}, 31, 0), "unknown tensor type 31"});
  cases.push_back({"five dims", one_tensor(5, {1, 1, 1, 1, 1}, 0, 0), "dims"});
  cases.push_back({"dims overflow", one_tensor(2, {uint64_t{1} << 40, uint64_t{1} << 40}, 0, 0), "overflow"});
  cases.push_back({"offset past the end", one_tensor(1, {4}, 0, 1024), "past the end"});
  cases.push_back({"misaligned offset", one_tensor(1, {4}, 0, 4), "alignment"});
  cases.push_back({"partial Q4_0 block", one_tensor(1, {31}, 2, 0), "whole blocks of 32 elements, but ne[0] = 31"});
  // 256 values, but rows of 128: a Q4_K block would straddle two rows.
  cases.push_back({"Q4_K row of half a block", one_tensor(2, {128, 2}, 12, 0), "Q4_K row holds whole blocks of 256"});
  for (auto& c : cases) {
    std::string m = reject_message(c.bytes);
    EXPECT_NE(m.find("corrupt.gguf"), std::string::npos) << c.what << ": " << m;
    EXPECT_NE(m.find(c.expect), std::string::npos) << c.what << ": " << m;
  }
  // From disk: the error names the path.
  std::string path = tmp("trunc.gguf");
  auto full = small_valid_gguf();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(full.data()), 30);
  auto be = make_cpu_backend();
  try {
    load_gguf_model(path, *be, TrainMode::qat, 32);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(Interop, GgufMutationFuzzNeverCrashes) {
  auto base = small_valid_gguf();
  std::mt19937_64 rng(1234);
  int accepted = 0, rejected = 0;
  for (int it = 0; it < 2000; ++it) {
    auto b = base;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % b.size();
      switch (rng() % 4) {
        case 0: b[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
        case 1: b[at] = static_cast<uint8_t>(rng()); break;
        case 2: {  // a large little-endian u64 somewhere
          uint64_t v = rng() >> (rng() % 64);
          for (int k = 0; k < 8 && at + k < b.size(); ++k) b[at + k] = static_cast<uint8_t>(v >> (8 * k));
          break;
        }
        case 3: b.resize(at); break;
      }
      if (b.empty()) break;
    }
    (parse_all(b) ? accepted : rejected)++;
  }
  EXPECT_EQ(accepted + rejected, 2000);
  EXPECT_GT(rejected, 500);
}

// ---- GGUF tokenizer metadata ----

const std::string kSpm = "\xE2\x96\x81";  // '▁'

// A llama-style vocabulary for `text`: <unk>, <s>, </s>, the 256 byte tokens, every character of the text
// and every prefix of every '▁'-word (longer prefixes score higher), one user-defined token.
GgufVocab spm_vocab_for(const std::string& text) {
  GgufVocab v = edgetrain::test::spm_vocab_head();
  auto add = [&](const std::string& t, float score, int32_t type) {
    for (const auto& have : v.tokens)
      if (have == t) return;
    v.tokens.push_back(t);
    v.scores.push_back(score);
    v.token_types.push_back(type);
  };
  add(kSpm, -100, 1);
  std::string word;
  auto flush = [&] {
    const std::string w = kSpm + word;
    for (size_t n = kSpm.size() + 1; n <= w.size(); ++n) add(w.substr(0, n), -100.0f + static_cast<float>(n), 1);
    for (char ch : word) add(std::string(1, ch), -50, 1);
    word.clear();
  };
  for (char ch : text) {
    if (ch == ' ' || ch == '\n') flush();
    else word.push_back(ch);
  }
  flush();
  add("<|sep|>", 0, 4);
  v.unk = 0, v.bos = 1, v.eos = 2;
  return v;
}

TEST(Interop, GgufTokenizerSurvivesExportAndImport) {
  auto be = make_cpu_backend();
  const std::string text = "In the beginning God created the heaven and the earth.";
  const GgufVocab v = spm_vocab_for(text);
  auto tok = make_gguf_tokenizer(v, "hand-built");
  ModelConfig c = tiny(TrainMode::qat);
  c.vocab = tok->vocab_size();
  Model m(*be, c);
  m.init(5);
  const std::string path = tmp("spm.gguf");
  save_gguf(path, m, GgufType::Q4_0, tok.get());
  ImportInfo info;
  load_gguf_model(path, *be, TrainMode::qat, 32, &info);
  EXPECT_TRUE(info.vocab == v) << "the vocabulary changed on the way";
  EXPECT_TRUE(read_gguf_vocab(path) == v);
  auto back = load_gguf_tokenizer(path);
  EXPECT_EQ(back->name(), tok->name());
  EXPECT_EQ(back->encode(text + " <|sep|> and\n"), tok->encode(text + " <|sep|> and\n"));
  EXPECT_EQ(back->decode(back->encode(text)), text);
  // The tokenizer-only file a run folder keeps.
  save_gguf_tokenizer(tmp("tok_only.gguf"), v);
  EXPECT_TRUE(read_gguf_vocab(tmp("tok_only.gguf")) == v);
  EXPECT_THROW(read_gguf_config(tmp("tok_only.gguf"), TrainMode::qat, 32), Error);  // no model in it
  // A tokenizer of another size than the model is refused.
  c.vocab = 300;
  Model other(*be, c);
  other.init(1);
  EXPECT_THROW(save_gguf(tmp("x.gguf"), other, GgufType::F32, tok.get()), Error);

  // GPT-2: written as "gpt2" with its merges, read back into the same tokenizer.
  const std::string dir = default_gpt2_dir();
  if (!fs::exists(dir + "/encoder.json") || !fs::exists(dir + "/vocab.bpe")) GTEST_SKIP() << "no GPT-2 files in " << dir;
  auto gpt2 = make_tokenizer("gpt2");
  save_gguf_tokenizer(tmp("gpt2.gguf"), gpt2->gguf_vocab());
  const GgufVocab g = read_gguf_vocab(tmp("gpt2.gguf"));
  EXPECT_EQ(g.model, "gpt2");
  EXPECT_EQ(g.pre, "gpt-2");
  EXPECT_EQ(g.tokens.size(), 50257u);
  EXPECT_EQ(g.merges.size(), 50000u);
  EXPECT_EQ(g.tokens[50256], "<|endoftext|>");
  EXPECT_EQ(g.token_types[50256], 3);
  EXPECT_EQ(g.eos, 50256);
  auto g_tok = load_gguf_tokenizer(tmp("gpt2.gguf"));
  const std::string sample = "Hello world, it's 2024 -- na\xC3\xAFve caf\xC3\xA9\n\n  \xF0\x9F\x98\x80 <|endoftext|>";
  EXPECT_EQ(g_tok->encode(sample), gpt2->encode(sample));
  EXPECT_EQ(g_tok->eot(), 50256);
}

// A GGUF file with the tensors of `model_path` (if any) and the given tokenizer keys instead of its own.
void write_with_tokenizer_keys(const std::string& out, const std::string& model_path,
                               const std::vector<std::pair<std::string, gguf::Value>>& keys) {
  gguf::Writer w;
  std::optional<gguf::File> f;
  if (!model_path.empty()) f.emplace(gguf::File::open(model_path));
  if (f) {
    for (const auto& [k, v] : f->metadata())
      if (k.rfind("tokenizer.", 0) != 0) w.add_kv(k, v);
  }
  for (const auto& [k, v] : keys) w.add_kv(k, v);
  if (f) {
    for (const gguf::TensorInfo& t : f->tensors())
      w.add_tensor(t.name, t.ne, t.type, std::vector<uint8_t>(f->data(t), f->data(t) + t.nbytes));
  }
  w.save(out);
}

TEST(Interop, GgufMalformedTokenizerMetadataIsRejected) {
  using V = gguf::Value;
  const GgufVocab good = spm_vocab_for("a b");
  const std::vector<std::string>& tokens = good.tokens;
  const size_t n = tokens.size();
  auto error_of = [&](const std::vector<std::pair<std::string, V>>& keys) -> std::string {
    const std::string path = tmp("badtok.gguf");
    write_with_tokenizer_keys(path, "", keys);
    try {
      load_gguf_tokenizer(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  auto expect = [&](const std::vector<std::pair<std::string, V>>& keys, const std::vector<std::string>& needles) {
    const std::string msg = error_of(keys);
    EXPECT_NE(msg.find("badtok.gguf"), std::string::npos) << msg;
    for (const auto& needle : needles) EXPECT_NE(msg.find(needle), std::string::npos) << msg << "\n  lacks " << needle;
  };
  const auto model = std::make_pair(std::string("tokenizer.ggml.model"), V::str("llama"));
  const auto toks = std::make_pair(std::string("tokenizer.ggml.tokens"), V::strings(tokens));
  EXPECT_EQ(error_of({model, toks}), "(no error)");
  expect({}, {"tokenizer.ggml.model"});
  expect({model}, {"tokenizer.ggml.tokens is missing"});
  expect({model, {"tokenizer.ggml.tokens", V::i32s({1, 2, 3})}}, {"'tokenizer.ggml.tokens' must be an array of strings"});
  expect({model, toks, {"tokenizer.ggml.scores", V::f32s(std::vector<float>(n - 1, 0.0f))}},
         {"tokenizer.ggml.scores has " + std::to_string(n - 1) + " entries"});
  expect({model, toks, {"tokenizer.ggml.token_type", V::f32s(std::vector<float>(n, 1.0f))}},
         {"'tokenizer.ggml.token_type' must be an array of integers"});
  std::vector<int32_t> types = good.token_types;
  types[7] = 42;
  expect({model, toks, {"tokenizer.ggml.token_type", V::i32s(types)}}, {"tokenizer.ggml.token_type[7] = 42"});
  expect({model, toks, {"tokenizer.ggml.eos_token_id", V::u32(static_cast<uint32_t>(n))}},
         {"tokenizer.ggml.eos_token_id = " + std::to_string(n), "outside the vocabulary"});
  expect({model, toks, {"tokenizer.ggml.add_space_prefix", V::u32(1)}}, {"'tokenizer.ggml.add_space_prefix' must be a bool"});
  expect({{"tokenizer.ggml.model", V::str("t5")}, toks}, {"'t5' is not supported"});
  std::vector<std::string> no_e9 = tokens;
  no_e9[3 + 0xE9] = "x";  // "<0xE9>" gone
  expect({model, {"tokenizer.ggml.tokens", V::strings(no_e9)}}, {"no byte token <0xE9>"});
  // "gpt2": the 256 byte symbols of GPT-2's alphabet (printable bytes as themselves, the others U+0100..).
  std::vector<std::string> byte_symbols;
  for (int b = 0, extra = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const int cp = printable ? b : 256 + extra++;
    byte_symbols.push_back(cp < 0x80 ? std::string(1, static_cast<char>(cp))
                                     : std::string{static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))});
  }
  const auto gpt2 = std::make_pair(std::string("tokenizer.ggml.model"), V::str("gpt2"));
  byte_symbols.push_back("ab");
  const auto gpt2_toks = std::make_pair(std::string("tokenizer.ggml.tokens"), V::strings(byte_symbols));
  EXPECT_EQ(error_of({gpt2, gpt2_toks, {"tokenizer.ggml.merges", V::strings({"a b"})}}), "(no error)");
  expect({gpt2, gpt2_toks, {"tokenizer.ggml.merges", V::strings({"a b", "a q"})}},
         {"tokenizer.ggml.merges[1]", "\"aq\"", "not a token"});
  expect({gpt2, gpt2_toks, {"tokenizer.ggml.merges", V::i32s({1})}}, {"'tokenizer.ggml.merges' must be an array of strings"});

  // The model itself still imports from a file whose tokenizer is broken, with a note saying why.
  auto be = make_cpu_backend();
  Model m(*be, tiny(TrainMode::fp32));
  m.init(2);
  save_gguf(tmp("model.gguf"), m, GgufType::F32);
  write_with_tokenizer_keys(tmp("model_badtok.gguf"), tmp("model.gguf"),
                            {model, {"tokenizer.ggml.tokens", V::i32s({1, 2, 3})}});
  ImportInfo info;
  load_gguf_model(tmp("model_badtok.gguf"), *be, TrainMode::fp32, 32, &info);
  EXPECT_TRUE(info.vocab.model.empty());
  ASSERT_EQ(info.notes.size(), 1u);
  EXPECT_NE(info.notes[0].find("tokenizer.ggml.tokens"), std::string::npos) << info.notes[0];
}

std::string run_cli(const std::string& args) {
  const std::string cmd = cli_path() + " " + args + " 2>&1";
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    for (size_t k; (k = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, k);
    const int rc = ::pclose(p);
    if (rc != 0) out += "\n(exit status " + std::to_string(rc) + ")";
  }
  return out;
}

TEST(Interop, TrainInitFromGgufUsesItsTokenizer) {
  std::string corpus_text;
  for (int i = 0; i < 40; ++i)
    corpus_text += "In the beginning God created the heaven and the earth. And God said, Let there be light.\n";
  const std::string corpus = tmp("corpus.txt");
  std::ofstream(corpus, std::ios::binary) << corpus_text;
  const GgufVocab v = spm_vocab_for(corpus_text);
  auto tok = make_gguf_tokenizer(v, "hand-built");
  auto be = make_cpu_backend();
  ModelConfig c = tiny(TrainMode::fp32);
  c.vocab = tok->vocab_size();
  Model m(*be, c);
  m.init(11);
  const std::string init = tmp("init.gguf");
  save_gguf(init, m, GgufType::F32, tok.get());

  TrainOptions o;
  o.corpus = corpus;
  o.out_dir = tmp("run_gguf");
  o.init = init;  // o.tokenizer is "auto": the file's own
  o.backend = "cpu";
  o.threads = 1;
  o.model = tiny(TrainMode::qat);
  o.optim.total_steps = 3;
  o.batch = 2;
  o.seq = 16;
  o.eval_every = 3;
  o.eval_batches = 1;
  o.checkpoint_every = 3;
  o.sample_tokens = 4;
  o.progress = false;
  TrainResult r = train(o);
  EXPECT_EQ(r.steps, 3);
  const std::string copy = fs::absolute(fs::path(o.out_dir) / "tokenizer.gguf").string();
  ASSERT_TRUE(fs::exists(copy));
  EXPECT_TRUE(read_gguf_vocab(copy) == v);
  auto meta = read_checkpoint_metadata(r.checkpoint);
  EXPECT_EQ(meta["tokenizer"], copy);
  EXPECT_NE(meta["train_options"].find(copy), std::string::npos);
  EXPECT_EQ(read_checkpoint_config(r.checkpoint).vocab, tok->vocab_size());
  // The corpus was tokenized with the file's tokenizer: the token cache holds exactly its ids.
  std::vector<int32_t> cached;
  int caches = 0;
  for (const auto& e : fs::directory_iterator(fs::path(o.out_dir) / "cache")) {
    if (e.path().filename().string().find(tok->name()) == std::string::npos) continue;
    ++caches;
    std::ifstream in(e.path(), std::ios::binary);
    for (int32_t id; in.read(reinterpret_cast<char*>(&id), 4);) cached.push_back(id);
  }
  EXPECT_EQ(caches, 1);
  EXPECT_EQ(cached, tok->encode(corpus_text));

  // --resume keeps the tokenizer; generate, eval and convert use it from the checkpoint's record.
  TrainOptions again = o;
  again.resume = true;
  again.init.clear();
  again.tokenizer = "bytes";  // ignored on resume: the run's own is recorded
  again.optim.total_steps = 4;
  again.sample_tokens = 0;
  EXPECT_EQ(train(again).steps, 4);
  EXPECT_EQ(read_checkpoint_metadata(r.checkpoint)["tokenizer"], copy);
  const std::string gen = run_cli("generate --checkpoint " + r.checkpoint +
                                  " --backend cpu --threads 1 --prompt 'And God' --max-tokens 8 --seed 1");
  EXPECT_EQ(gen.rfind("And God", 0), 0u) << gen;
  const std::string ev = run_cli("eval --checkpoint " + r.checkpoint + " --backend cpu --threads 1 --corpus " + corpus +
                                 " --seq 16 --batches 1");
  EXPECT_NE(ev.find("perplexity"), std::string::npos) << ev;
  const std::string conv = run_cli("convert " + r.checkpoint + " " + tmp("out.gguf") + " --to gguf-q4_0");
  EXPECT_NE(conv.find("wrote"), std::string::npos) << conv;
  EXPECT_TRUE(read_gguf_vocab(tmp("out.gguf")) == v) << "convert did not write the tokenizer back unchanged";

  // A vocabulary that does not fit the model's embedding, and "gguf" without a GGUF --init: clear errors.
  Model small(*be, tiny(TrainMode::fp32));  // vocab 64
  small.init(1);
  save_gguf(tmp("init64.gguf"), small, GgufType::F32);
  TrainOptions bad = o;
  bad.out_dir = tmp("run_bad");
  bad.init = tmp("init64.gguf");
  bad.tokenizer = init;  // 300-odd tokens
  try {
    train(bad);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("64 token embedding rows"), std::string::npos) << e.what();
  }
  bad.tokenizer = "gguf";
  bad.init = r.checkpoint;
  try {
    train(bad);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--tokenizer gguf"), std::string::npos) << e.what();
  }
  // With "auto", a GGUF file without tokenizer metadata trains with the byte tokenizer (vocab 256 needed).
  ModelConfig c256 = tiny(TrainMode::fp32);
  c256.vocab = 256;
  Model bytes_model(*be, c256);
  bytes_model.init(3);
  save_gguf(tmp("init256.gguf"), bytes_model, GgufType::F32);
  TrainOptions plain = o;
  plain.out_dir = tmp("run_plain");
  plain.init = tmp("init256.gguf");
  plain.optim.total_steps = 1;
  plain.sample_tokens = 0;
  train(plain);
  EXPECT_EQ(read_checkpoint_metadata(plain.out_dir + "/checkpoint.safetensors")["tokenizer"], "bytes");
}

}  // namespace
}  // namespace edgetrain::test
