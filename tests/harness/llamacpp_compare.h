// Comparing edgetrain with llama.cpp (harness/llamacpp.h runs it) on GGUF files of briefly trained byte-
// vocabulary models, shared by test_llamacpp.cpp (F32, F16, Q4_0, K-quants), test_llamacpp_archs.cpp (Llama
// 3.x, qwen2, qwen3) and test_llamacpp_vocab.cpp (Llama 3's vocabulary through the CLI): the training text
// and prompt, the tolerances as fractions of a position's logit range, and the log-probability, argmax and
// greedy-continuation checks.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "edgetrain/backends.h"
#include "edgetrain/interop.h"
#include "edgetrain/model.h"
#include "harness/llamacpp.h"

namespace edgetrain::test {

// A temp file of the llama.cpp tests.
std::string llamacpp_tmp(const std::string& name);

inline constexpr char kText[] =
    "In the beginning God created the heaven and the earth. And the earth was without form, and void; and "
    "darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters. And God "
    "said, Let there be light: and there was light. And God saw the light, that it was good: and God divided "
    "the light from the darkness. And God called the light Day, and the darkness he called Night.\n";

// The prompt: UTF-8 'é' (byte tokens <0xC3><0xA9> in llama.cpp), a tab, printable ASCII and spaces (the '▁'
// token), so both tokenizers' byte fallback is exercised; it ends in training text, whose continuation the
// models have learnt well enough for decisive greedy picks. 30 bytes + kGenerate <= kContext.
inline const std::string kPrompt = "\xC3\xA9\tAnd God said, Let there be";
inline constexpr int kGenerate = 32;
inline constexpr int64_t kContext = 64;

// A briefly trained model of config `c` (byte vocabulary, context kContext): AdamW on random windows of
// kText, so its weights and logits are far from their initial values.
std::unique_ptr<Model> trained(Backend& be, ModelConfig c, TrainMode mode, int steps, float lr);
std::unique_ptr<Model> trained_tiny(Backend& be, TrainMode mode, int steps, float lr);

// log-softmax of a row of V logits, in double.
std::vector<double> log_softmax(const float* x, int64_t V);
// Gap between the largest and the second largest entry.
double top2_gap(const float* x, int64_t V);
// max - min of a row.
double range_of(const float* x, int64_t V);

// How far llama.cpp's log-probabilities at a position may be from edgetrain's: a fraction of that
// position's logit range R (max - min logit). Rounding errors scale with the values that flow through the
// network, and R measures those at the output whatever the training did to the weights.
struct Tol {
  double of_range;
  double at(double range) const { return of_range * range; }
};

// F32: both sides compute in fp32 (llama.cpp with an fp32 KV cache, see llama_ref.mjs); only the order of
// the sums (ggml's blocked SIMD dot products against our loops) and exp/log differ: a few ulps (2^-24) per
// operation along the path. 2^-16 R is 256 ulps of R; measured: 11 (fp32 and qat models).
inline constexpr Tol kF32{1.0 / 65536};
// F16: the export rounds every linear weight to fp16, and llama.cpp's F16 matmul rounds its input
// activations to fp16 as well: two relative errors of up to 2^-11 per linear. 2^-9 R is 4 such units;
// measured: 1.1.
inline constexpr Tol kF16{1.0 / 512};
// Q4_0: the 4-bit codes are written as they are; the export rounds each group's scale and the output head
// (not quantized in edgetrain) to fp16 (2^-11), but the bulk comes from llama.cpp's Q4_0 matmul, which
// quantizes its input activations to Q8_0: steps of 1/127 of each block of 32's largest |activation|, so
// errors of up to 2^-8 of that maximum per element, several times 2^-8 of a dot product when a block has
// an outlier. 2^-5 R is 8 * 2^-8; measured: 3.7 * 2^-8, the same with the model's scales rounded to fp16
// (so it is llama.cpp's arithmetic, not the export).
inline constexpr Tol kQ4_0{1.0 / 32};

struct Stats {
  double max_abs = 0, max_rel = 0, max_of_range = 0;
  int64_t compared = 0, outside = 0;
  std::string worst;
};

// Compares edgetrain's logits rows [rows, V] (as log-softmax) with llama.cpp's log-probability rows;
// returns each row's largest |difference|. With max_shift, up to one constant per row: node-llama-cpp
// normalizes the probabilities it hands out with a float sum over the vocabulary (llama/addon/AddonContext.cpp:
// `float sum = 0.0f; ... sum += prob;`), whose
// rounding error grows with the vocabulary: over 128,256 terms it shifts a whole row of llama.cpp's
// log-probabilities by log(sum_fp32 / sum), measured up to 2e-3 (1.4e-4 R, 9 times kF32) where edgetrain's
// logits agree to 1e-5 R. So each row is compared after removing that shift, read off at edgetrain's top
// token (log p = -log(sum) there in llama.cpp, exp(0) being exact), and the shift itself must stay within the
// bound of a float sum of n positive terms, (n - 1) 2^-24 relative; *max_shift gets the largest.
std::vector<double> compare_rows(const std::vector<float>& logits, int64_t V, const std::vector<std::vector<double>>& ref,
                                 int64_t first_pos, Tol tol, Stats& s, double* max_shift = nullptr);

// Checks llama.cpp on the GGUF file `path` (byte tokenizer) against edgetrain's model `m` on kPrompt:
// the prompt's tokenization, the log-softmax after every prompt and generated position within `tol`, the
// argmax after every prompt position and the greedy continuation, token for token as long as edgetrain's
// top-2 gap at that position exceeds twice the largest difference measured there (two log-probabilities
// that each differ by at most that much cannot swap, so llama.cpp must pick the same token). Returns the
// number of leading greedy tokens beyond doubt (all of them compared equal).
size_t expect_llamacpp_agrees_on(Model& m, const std::string& path, const std::string& name, Tol tol);

// Exports `m` as `type` with the byte tokenizer and checks llama.cpp on that file against `m`.
size_t expect_llamacpp_agrees(Model& m, GgufType type, const std::string& name, Tol tol);

}  // namespace edgetrain::test
