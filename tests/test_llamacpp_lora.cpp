// llama.cpp (node-llama-cpp 3.21.1's prebuilt CPU build through tests/llamacpp/llama_ref.mjs --lora) as
// the reference consumer of our LoRA adapter GGUF: the base model exported as F32 (its 4-bit weights
// exactly) plus the adapter (save_lora_gguf) must give llama.cpp the log-probabilities edgetrain computes
// for base + adapter, and the ones llama.cpp computes on the merged export (save_gguf), for llama, qwen2
// and qwen3 models with random non-zero adapters on every linear — while the base alone must not (so an
// adapter llama.cpp ignored or applied transposed, reordered or with another scale would fail). Skipped only
// when scripts/setup.sh has not installed the pinned node-llama-cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "edgetrain/backends.h"
#include "edgetrain/interop.h"
#include "edgetrain/tokenizer.h"
#include "harness/llamacpp.h"
#include "harness/llamacpp_compare.h"
#include "harness/lora_helpers.h"
#include "harness/temp_files.h"

namespace edgetrain::test {
namespace {

std::string tmp(const std::string& name) { return temp_path("llamacpp_lora", name); }

// Largest |llama.cpp log-prob - our log-softmax| over every position and token, as a fraction of that
// position's logit range R (rounding errors scale with the values flowing through the network; R measures
// them at the output), and as a fraction of |log-prob|.
struct Deviation {
  double of_range = 0, relative = 0;
};
Deviation deviation(const std::vector<float>& logits, int64_t V, const LlamaRef& ref) {
  Deviation d;
  EXPECT_EQ(ref.logprobs.size() * static_cast<size_t>(V), logits.size()) << "llama.cpp's row count";
  for (size_t r = 0; r < ref.logprobs.size() && (r + 1) * V <= logits.size(); ++r) {
    const float* x = logits.data() + r * V;
    const std::vector<double> ours = log_softmax(x, V);
    const double range = range_of(x, V);
    for (int64_t v = 0; v < V; ++v) {
      const double diff = std::fabs(ref.logprobs[r][v] - ours[v]);
      d.of_range = std::max(d.of_range, diff / range);  // inf when llama.cpp's probability underflowed
      d.relative = std::max(d.relative, diff / std::fabs(ours[v]));
    }
  }
  return d;
}

LlamaRef llama(const std::string& model, const std::string& lora = "") {
  return run_llama_ref(model, {"", lora_test_tokens(), 0, lora, 1.0});
}

// F32 everywhere: only the order of the sums (ggml's blocked SIMD dot products against our loops) and
// exp/log differ, and llama.cpp's adapter adds scale * B (A x) in fp32 as we do: a few ulps (2^-24) per
// operation. 2^-16 R, as test_llamacpp.cpp's F32 files; measured: 9.0e-7 R (1.6e-7 of |log-prob|) with the
// adapter, 8.3e-7 R for the merged export, on all three architectures.
constexpr double kF32OfRange = 1.0 / 65536;
// An F16 adapter: our model holds the same fp16-rounded A and B, but llama.cpp's F16 matmul also rounds the
// adapter's input activations (x, then A x) to fp16: relative errors of 2^-11 on the adapter's share.
// 2^-9 R, as test_llamacpp.cpp's F16 files; measured: 1.2e-4 R.
constexpr double kF16OfRange = 1.0 / 512;
// The base alone must be farther from base + adapter than this, or the test would not see a lost adapter
// (measured: 0.37 R to 0.41 R).
constexpr double kAdapterMatters = 0.05;

TEST(LlamaCppLora, AdapterGivesOurLogProbs) {
  SKIP_WITHOUT_LLAMACPP();
  auto tok = make_byte_tokenizer();
  for (const std::string arch : {"llama", "qwen2", "qwen3"}) {
    SCOPED_TRACE(arch);
    auto be = make_cpu_backend();
    Model m(*be, lora_test_config(arch));
    m.init(5);  // B = 0: the merged export is the base model exactly
    const std::string base = tmp(arch + "_base.gguf"), lora = tmp(arch + "_lora.gguf"),
                      lora16 = tmp(arch + "_lora_f16.gguf"), merged = tmp(arch + "_merged.gguf");
    save_gguf(base, m, GgufType::F32, tok.get());
    randomize_adapters(m, 6);
    save_lora_gguf(lora, m);
    save_lora_gguf(lora16, m, GgufType::F16);
    save_gguf(merged, m, GgufType::F32, tok.get());
    const int64_t V = m.config().vocab;
    const std::vector<float> ours = all_logits(m, lora_test_tokens());

    LlamaRef with_adapter, with_merged, alone, with_f16;
    try {
      with_adapter = llama(base, lora);
      with_merged = llama(merged);
      alone = llama(base);
      with_f16 = llama(base, lora16);
    } catch (const std::exception& e) {
      FAIL() << e.what();
    }
    const Deviation a = deviation(ours, V, with_adapter), g = deviation(ours, V, with_merged),
                    b = deviation(ours, V, alone);
    // Our model with the F16 file's (rounded) adapters against llama.cpp on that file.
    auto rounded = attach_lora_adapter(m, read_lora_adapter(lora16), *be);
    const Deviation h = deviation(all_logits(*rounded, lora_test_tokens()), V, with_f16);
    std::printf("[ llama.cpp ] %-6s base + adapter: max |diff| %.3g of the logit range (%.3g relative); merged "
                "export %.3g (%.3g); F16 adapter %.3g; base alone %.3g\n",
                arch.c_str(), a.of_range, a.relative, g.of_range, g.relative, h.of_range, b.of_range);
    EXPECT_LE(a.of_range, kF32OfRange) << "llama.cpp with our adapter";
    EXPECT_LE(g.of_range, kF32OfRange) << "llama.cpp on the merged export";
    EXPECT_LE(h.of_range, kF16OfRange) << "llama.cpp with our F16 adapter";
    EXPECT_GT(b.of_range, kAdapterMatters) << "the adapter hardly changes the model: the test could not see it lost";
  }
}

}  // namespace
}  // namespace edgetrain::test
