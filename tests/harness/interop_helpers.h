// Helpers shared by the interop tests (test_interop.cpp, test_interop_hf.cpp, test_interop_corrupt_gguf.cpp,
// test_interop_tokenizer.cpp): the tiny model configs they write and read, their temp files, and model-vs-model
// comparisons of masters and logits.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "edgetrain/interop.h"
#include "edgetrain/model.h"
#include "harness/model_helpers.h"
#include "harness/temp_files.h"

namespace edgetrain::test {

// The tiny preset with a 64-token vocabulary, its head tied or its own.
inline ModelConfig tiny(TrainMode mode, bool tied = false) {
  ModelConfig c = tiny_config(mode, 64);
  c.tied_head = tied;
  return c;
}

inline std::string interop_tmp(const std::string& name) { return temp_path("interop", name); }

inline const std::vector<int32_t> kPrompt = {1, 5, 9, 33, 2, 60, 17};

// `exported`: a's side is what an export writes (interop_detail::effective_weight); otherwise a's masters.
inline void expect_same_masters(Model& a, Model& b, bool exported = true) {
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

inline void expect_same_logits(Model& a, Model& b, float tol = 0.0f) {
  a.reset_cache();
  b.reset_cache();
  auto x = a.next_logits(kPrompt), y = b.next_logits(kPrompt);
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], y[i], tol) << "logit " << i;
}

// Grouped-query attention: 4 query heads of head dim 8 sharing `kv` key/value heads.
inline ModelConfig tiny_gqa(TrainMode mode, int64_t kv) {
  ModelConfig c = tiny(mode);
  c.n_heads = 4;
  c.n_kv_heads = kv;
  return c;
}

}  // namespace edgetrain::test
