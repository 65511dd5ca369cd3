// Helpers shared by the LoRA adapter tests (test_lora_adapter*.cpp, test_llamacpp_lora.cpp): small qlora
// models of each architecture whose adapters are random and non-zero, so that an adapter that is lost,
// transposed or reordered on its way through a file changes the model's logits.
#pragma once

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "edgetrain/model.h"

namespace edgetrain::test {

// Byte vocabulary, two layers, grouped-query attention (4 query heads on 2 key/value heads), every linear
// adapted at rank 4 with alpha 8 (scale 2).
inline ModelConfig lora_test_config(const std::string& arch) {
  ModelConfig c;
  c.arch = arch;
  c.vocab = 256, c.dim = 64, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.ffn_dim = 128, c.max_seq = 64;
  c.mode = TrainMode::qlora;
  c.lora_rank = 4, c.lora_alpha = 8;
  c.lora_targets = "q,k,v,o,gate,up,down";
  return c;
}

// Every A and B of `m` drawn from N(0, sd^2) (deterministic in seed); the base is left as it is.
inline void randomize_adapters(Model& m, uint64_t seed, float sd = 0.05f) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<float> nd(0.0f, sd);
  for (Param& p : m.params()) {
    if (p.name.find(".lora_") == std::string::npos) continue;
    std::vector<float> v(static_cast<size_t>(p.value.numel()));
    for (float& x : v) x = nd(rng);
    m.backend().upload(p.value, v.data(), v.size() * sizeof(float));
  }
}

// A qlora model of lora_test_config(arch): random base (init(seed)) and random non-zero adapters.
inline std::unique_ptr<Model> lora_test_model(Backend& be, const std::string& arch, uint64_t seed = 5) {
  auto m = std::make_unique<Model>(be, lora_test_config(arch));
  m->init(seed);
  randomize_adapters(*m, seed + 1);
  return m;
}

// The logits of every position of `tokens` from a fresh KV cache.
inline std::vector<float> all_logits(Model& m, const std::vector<int32_t>& tokens) {
  m.reset_cache();
  return m.next_logits(tokens);
}

inline const std::vector<int32_t>& lora_test_tokens() {
  static const std::vector<int32_t> t = {72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33, 10, 200, 3};
  return t;
}

// Bit-for-bit equality of two float vectors (NaN payloads and signed zeros included).
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace edgetrain::test
