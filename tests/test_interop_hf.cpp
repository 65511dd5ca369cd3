// Hugging Face folders written here (single and sharded safetensors, rotate_half order, grouped-query
// attention) import with the logits of the model that wrote them; a bad key/value head count is refused.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "edgetrain/backends.h"
#include "edgetrain/interop.h"
#include "edgetrain/safetensors.h"
#include "harness/interop_helpers.h"

namespace fs = std::filesystem;

namespace edgetrain::test {
namespace {

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
      std::string dir = interop_tmp("hf" + std::to_string(shards));
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
  auto masters = import_masters(interop_tmp("hf3"), &c);
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
    std::string dir = interop_tmp("hfgqa");
    write_hf(m, dir, 2);
    ASSERT_EQ(nlohmann::json::parse(std::ifstream(dir + "/config.json"))["num_key_value_heads"], 2);
    EXPECT_EQ(read_hf_config(dir, mode, 32).kv_heads(), 2);
    auto back = load_hf_llama(dir, *be, mode, 32);
    EXPECT_EQ(back->config().to_json(), m.config().to_json());
    expect_same_masters(m, *back, /*exported=*/false);  // write_hf writes masters
    expect_same_logits(m, *back);
  }
  ModelConfig c;
  auto masters = import_masters(interop_tmp("hfgqa"), &c);
  EXPECT_EQ(c.kv_heads(), 2);
  EXPECT_EQ(masters.at("layers.1.attention.wk.weight").size(), 16u * 32u);
}

TEST(Interop, HfBadKvHeadCountIsRejected) {
  auto be = make_cpu_backend();
  Model m(*be, tiny(TrainMode::fp32));  // 2 heads
  m.init(1);
  std::string dir = interop_tmp("hfbadkv");
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

}  // namespace
}  // namespace edgetrain::test
