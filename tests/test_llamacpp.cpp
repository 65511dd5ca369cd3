// llama.cpp (node-llama-cpp 3.21.1's prebuilt CPU build, tests/llamacpp/llama_ref.mjs) as the reference
// consumer of our GGUF exports: briefly trained tiny models with the byte tokenizer are exported with
// save_gguf, and llama.cpp's tokenization of a prompt, its next-token distribution after every position and
// its greedy continuation must match what edgetrain computes (Model::next_logits, generate at temperature
// 0). llama.cpp only hands out softmax probabilities (see llama_ref.mjs), so the logits are compared as
// log-softmax: logits up to one constant per position. Skipped only when scripts/setup.sh has not installed
// the pinned node-llama-cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <sstream>

#include "edgetrain/backends.h"
#include "edgetrain/interop.h"
#include "edgetrain/tokenizer.h"
#include "edgetrain/trainer.h"
#include "harness/temp_files.h"
#include "harness/llamacpp.h"
#include "harness/model_helpers.h"

namespace fs = std::filesystem;

namespace edgetrain::test {
namespace {

#define SKIP_WITHOUT_LLAMACPP()                                                      \
  do {                                                                               \
    if (std::string why = llamacpp_missing_reason(); !why.empty()) GTEST_SKIP() << why; \
  } while (0)

std::string tmp(const std::string& name) { return temp_path("llamacpp", name); }

const char kText[] =
    "In the beginning God created the heaven and the earth. And the earth was without form, and void; and "
    "darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters. And God "
    "said, Let there be light: and there was light. And God saw the light, that it was good: and God divided "
    "the light from the darkness. And God called the light Day, and the darkness he called Night.\n";

// The prompt: UTF-8 'é' (byte tokens <0xC3><0xA9> in llama.cpp), a tab, printable ASCII and spaces (the '▁'
// token), so both tokenizers' byte fallback is exercised; it ends in training text, whose continuation the
// models have learnt well enough for decisive greedy picks. 30 bytes + kGenerate <= kContext.
const std::string kPrompt = "\xC3\xA9\tAnd God said, Let there be";
constexpr int kGenerate = 12;
constexpr int64_t kContext = 64;

// A briefly trained `tiny` model (byte vocabulary, context kContext): AdamW on random windows of kText, so
// its weights and logits are far from their initial values.
std::unique_ptr<Model> trained_tiny(Backend& be, TrainMode mode, int steps, float lr) {
  ModelConfig c = ModelConfig::preset("tiny");
  c.mode = mode;
  c.max_seq = kContext;
  auto m = std::make_unique<Model>(be, c);
  m->init(7);
  OptimConfig opt;
  opt.lr = lr;
  opt.warmup_steps = 0;
  opt.total_steps = steps;
  const std::string text = kText;
  const int64_t B = 4, T = c.max_seq;
  std::mt19937 rng(3);
  std::vector<int32_t> tokens(static_cast<size_t>(B * T)), labels(tokens.size());
  for (int step = 1; step <= steps; ++step) {
    for (int64_t b = 0; b < B; ++b) {
      const size_t off = rng() % (text.size() - static_cast<size_t>(T) - 1);
      for (int64_t t = 0; t < T; ++t) {
        tokens[static_cast<size_t>(b * T + t)] = static_cast<unsigned char>(text[off + static_cast<size_t>(t)]);
        labels[static_cast<size_t>(b * T + t)] = static_cast<unsigned char>(text[off + static_cast<size_t>(t) + 1]);
      }
    }
    m->accumulate(tokens, labels, B, T, B * T);
    m->update(opt, step);
  }
  return m;
}

std::vector<double> log_softmax(const float* x, int64_t V) {
  const double mx = *std::max_element(x, x + V);
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(x[v]) - mx);
  std::vector<double> out(static_cast<size_t>(V));
  for (int64_t v = 0; v < V; ++v) out[static_cast<size_t>(v)] = x[v] - mx - std::log(sum);
  return out;
}

// Gap between the largest and the second largest entry.
double top2_gap(const float* x, int64_t V) {
  float a = -INFINITY, b = -INFINITY;
  for (int64_t v = 0; v < V; ++v) {
    if (x[v] > a) {
      b = a, a = x[v];
    } else if (x[v] > b) {
      b = x[v];
    }
  }
  return static_cast<double>(a) - b;
}

double range_of(const float* x, int64_t V) {
  auto [lo, hi] = std::minmax_element(x, x + V);
  return static_cast<double>(*hi) - *lo;
}

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
constexpr Tol kF32{1.0 / 65536};
// F16: the export rounds every linear weight to fp16, and llama.cpp's F16 matmul rounds its input
// activations to fp16 as well: two relative errors of up to 2^-11 per linear. 2^-9 R is 4 such units;
// measured: 1.1.
constexpr Tol kF16{1.0 / 512};
// Q4_0: the 4-bit codes are written as they are; the export rounds each group's scale and the output head
// (not quantized in edgetrain) to fp16 (2^-11), but the bulk comes from llama.cpp's Q4_0 matmul, which
// quantizes its input activations to Q8_0: steps of 1/127 of each block of 32's largest |activation|, so
// errors of up to 2^-8 of that maximum per element, several times 2^-8 of a dot product when a block has
// an outlier. 2^-5 R is 8 * 2^-8; measured: 3.7 * 2^-8, the same with the model's scales rounded to fp16
// (so it is llama.cpp's arithmetic, not the export).
constexpr Tol kQ4_0{1.0 / 32};

struct Stats {
  double max_abs = 0, max_rel = 0, max_of_range = 0;
  int64_t compared = 0, outside = 0;
  std::string worst;
};

// Compares edgetrain's logits rows [rows, V] (as log-softmax) with llama.cpp's log-probability rows.
void compare_rows(const std::vector<float>& logits, int64_t V, const std::vector<std::vector<double>>& ref,
                  int64_t first_pos, Tol tol, Stats& s) {
  ASSERT_EQ(logits.size(), ref.size() * static_cast<size_t>(V));
  for (size_t r = 0; r < ref.size(); ++r) {
    const float* row = logits.data() + r * static_cast<size_t>(V);
    const std::vector<double> ours = log_softmax(row, V);
    const double range = range_of(row, V);
    for (int64_t v = 0; v < V; ++v) {
      const double a = ref[r][static_cast<size_t>(v)], b = ours[static_cast<size_t>(v)];
      const double d = std::fabs(a - b);  // inf when llama.cpp's probability underflowed: counts as outside
      if (d > s.max_abs) {
        s.max_abs = d;
        std::ostringstream w;
        w << "position " << first_pos + static_cast<int64_t>(r) << ", token " << v << ": llama.cpp " << a
          << ", edgetrain " << b << " (logit range " << range << ")";
        s.worst = w.str();
      }
      s.max_rel = std::max(s.max_rel, d / std::fabs(b));
      s.max_of_range = std::max(s.max_of_range, d / range);
      s.outside += !(d <= tol.at(range));
      ++s.compared;
    }
  }
}

// Exports `m` as `type` with the byte tokenizer and checks llama.cpp against edgetrain on kPrompt:
// the prompt's tokenization, the log-softmax after every prompt and generated position within `tol`, the
// argmax after every prompt position and the greedy continuation, token for token as long as edgetrain's
// top-2 gap exceeds twice the tolerance (two logits that may each be off by it cannot swap).
void expect_llamacpp_agrees(Model& m, GgufType type, const std::string& name, Tol tol) {
  auto tok = make_byte_tokenizer();
  const std::string path = tmp(name + ".gguf");
  save_gguf(path, m, type, tok.get());
  LlamaRef ref;
  try {
    ref = run_llama_ref(path, {kPrompt, {}, kGenerate});
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  const int64_t V = m.config().vocab;
  ASSERT_EQ(ref.n_vocab, V) << ref.reference;
  auto decisive = [&](const float* row) { return top2_gap(row, V) > 2 * tol.at(range_of(row, V)); };

  // The same ids from both tokenizers: the byte tokenizer's 256-token "llama" vocabulary.
  const std::vector<int32_t> ids = tok->encode(kPrompt);
  EXPECT_EQ(ref.prompt_tokens, ids) << "llama.cpp tokenizes the prompt differently";
  ASSERT_EQ(ref.tokens, ids);
  ASSERT_EQ(ref.logprobs.size(), ids.size());
  ASSERT_EQ(ref.argmax.size(), ids.size());

  // Every prompt position, in one forward.
  Stats s;
  m.reset_cache();
  const std::vector<float> prompt_logits = m.next_logits(ids);
  compare_rows(prompt_logits, V, ref.logprobs, 0, tol, s);
  std::ostringstream argmax_differs;
  for (size_t i = 0; i < ids.size(); ++i) {
    const float* row = prompt_logits.data() + i * static_cast<size_t>(V);
    const int64_t ours = std::max_element(row, row + V) - row;
    if (decisive(row) && ref.argmax[i] != ours) argmax_differs << " " << i << " (" << ref.argmax[i] << " vs " << ours << ")";
  }
  EXPECT_EQ(argmax_differs.str(), "") << "llama.cpp's argmax differs after these positions (llama.cpp vs edgetrain)";

  // Greedy continuation through the KV cache; after each token llama.cpp also evaluated, the next
  // position's distributions are compared too.
  ASSERT_EQ(ref.generated.size(), static_cast<size_t>(kGenerate));
  std::vector<int32_t> ours;
  std::vector<float> last(prompt_logits.end() - V, prompt_logits.end());
  size_t certain = 0;  // leading generated tokens whose argmax is beyond doubt
  for (int i = 0; i < kGenerate; ++i) {
    const int32_t next = static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
    if (certain == ours.size() && decisive(last.data())) ++certain;
    ours.push_back(next);
    if (i + 1 == kGenerate) break;
    last = m.next_logits({next});
    if (ref.generated[static_cast<size_t>(i)] == next)  // llama.cpp's row i followed the same tokens
      compare_rows(last, V, {ref.generated_logprobs.at(static_cast<size_t>(i))},
                   static_cast<int64_t>(ids.size()) + i, tol, s);
  }
  EXPECT_GE(certain, 4u) << "top-2 logit gaps too small to compare greedy tokens: make the test model decisive";
  EXPECT_EQ(std::vector<int32_t>(ref.generated.begin(), ref.generated.begin() + static_cast<long>(certain)),
            std::vector<int32_t>(ours.begin(), ours.begin() + static_cast<long>(certain)))
      << "greedy continuation differs (" << certain << " leading tokens are beyond doubt)";
  // The public generate() at temperature 0 is the same greedy loop.
  SampleOptions greedy;
  greedy.temperature = 0;
  greedy.max_tokens = kGenerate;
  EXPECT_EQ(generate(m, *tok, kPrompt, greedy), tok->decode(ours));
  if (certain == ours.size()) {
    EXPECT_EQ(ref.generated_text, tok->decode(ours)) << "llama.cpp's detokenizer";
  }

  std::printf("[ llama.cpp ] %-8s %lld log-probs at %lld positions: max |diff| %.3g, max |diff|/|log-prob| %.3g, "
              "max |diff|/logit range %.3g (tolerance %.3g); greedy \"%s\", %zu/%d tokens beyond doubt\n",
              name.c_str(), static_cast<long long>(s.compared), static_cast<long long>(s.compared / V), s.max_abs,
              s.max_rel, s.max_of_range, tol.of_range, tok->decode(ours).c_str(), certain, kGenerate);
  EXPECT_EQ(s.outside, 0) << s.outside << " of " << s.compared << " log-probabilities outside the tolerance; worst: "
                          << s.worst;
}

}  // namespace

TEST(LlamaCpp, Fp32TinyExportsMatch) {
  SKIP_WITHOUT_LLAMACPP();
  auto be = make_cpu_backend();
  auto m = trained_tiny(*be, TrainMode::fp32, 200, 1e-2f);
  expect_llamacpp_agrees(*m, GgufType::F32, "fp32_f32", kF32);
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

// The script's own checks: one line naming the problem and a non-zero exit, which run_llama_ref reports.
TEST(LlamaCpp, ScriptReportsBadInput) {
  SKIP_WITHOUT_LLAMACPP();
  auto expect_error = [](const std::string& gguf, const LlamaRefRequest& req, const std::string& needle) {
    try {
      run_llama_ref(gguf, req);
      ADD_FAILURE() << "no error for " << gguf << ", expected one containing '" << needle << "'";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(tmp("missing.gguf"), {"x", {}, 0}, "missing.gguf does not exist");
  auto be = make_cpu_backend();
  Model m(*be, ModelConfig::preset("tiny"));
  m.init(1);
  auto tok = make_byte_tokenizer();
  const std::string path = tmp("untrained.gguf");
  save_gguf(path, m, GgufType::F32, tok.get());
  expect_error(path, {"", {1, 256}, 0}, "token id 256 is outside the vocabulary of 256");
}

}  // namespace edgetrain::test
