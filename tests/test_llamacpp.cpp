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
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <unordered_set>

#include "edgetrain/backends.h"
#include "edgetrain/interop.h"
#include "edgetrain/tokenizer.h"
#include "edgetrain/trainer.h"
#include "io/gguf.h"
#include "io/llama_names.h"
#include "harness/ggml_ref.h"
#include "harness/temp_files.h"
#include "harness/llamacpp.h"
#include "harness/model_helpers.h"
#include "harness/cli_child.h"
#include "harness/pretokenize_texts.h"
#include "text/bpe.h"
#include "text/pretokenize.h"
#include "text/unicode.h"

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
constexpr int kGenerate = 32;
constexpr int64_t kContext = 64;

// A briefly trained model of config `c` (byte vocabulary, context kContext): AdamW on random windows of
// kText, so its weights and logits are far from their initial values.
std::unique_ptr<Model> trained(Backend& be, ModelConfig c, TrainMode mode, int steps, float lr) {
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

std::unique_ptr<Model> trained_tiny(Backend& be, TrainMode mode, int steps, float lr) {
  return trained(be, ModelConfig::preset("tiny"), mode, steps, lr);
}

// A model whose linears' rows are whole K-quant super-blocks (K = 256 or 512), as llama.cpp needs to write
// Q4_K/Q6_K instead of falling back to 32-blocks.
ModelConfig kquant_config() {
  ModelConfig c;
  c.vocab = 256, c.dim = 256, c.n_layers = 2, c.n_heads = 4, c.ffn_dim = 512;
  return c;
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

// Compares edgetrain's logits rows [rows, V] (as log-softmax) with llama.cpp's log-probability rows;
// returns each row's largest |difference|. With max_shift, up to one constant per row: node-llama-cpp
// normalizes the probabilities it hands out with a float sum over the vocabulary (llama/addon/AddonContext.cpp: `float sum = 0.0f; ... sum += prob;`), whose
// rounding error grows with the vocabulary: over 128,256 terms it shifts a whole row of llama.cpp's
// log-probabilities by log(sum_fp32 / sum), measured up to 2e-3 (1.4e-4 R, 9 times kF32) where edgetrain's
// logits agree to 1e-5 R. So each row is compared after removing that shift, read off at edgetrain's top
// token (log p = -log(sum) there in llama.cpp, exp(0) being exact), and the shift itself must stay within the
// bound of a float sum of n positive terms, (n - 1) 2^-24 relative; *max_shift gets the largest.
std::vector<double> compare_rows(const std::vector<float>& logits, int64_t V, const std::vector<std::vector<double>>& ref,
                                 int64_t first_pos, Tol tol, Stats& s, double* max_shift = nullptr) {
  std::vector<double> row_max(ref.size(), INFINITY);
  if (logits.size() != ref.size() * static_cast<size_t>(V)) {
    ADD_FAILURE() << "llama.cpp gave " << ref.size() << " rows for " << logits.size() / V << " positions";
    return row_max;
  }
  const double shift_bound = static_cast<double>(V - 1) * std::ldexp(1.0, -24) + 1e-6;
  for (size_t r = 0; r < ref.size(); ++r) {
    const float* row = logits.data() + r * static_cast<size_t>(V);
    const std::vector<double> ours = log_softmax(row, V);
    const double range = range_of(row, V);
    const size_t top = static_cast<size_t>(std::max_element(row, row + V) - row);
    const double shift = max_shift ? ref[r][top] - ours[top] : 0.0;
    if (max_shift) *max_shift = std::max(*max_shift, std::fabs(shift));
    EXPECT_LE(std::fabs(shift), shift_bound) << "position " << first_pos + static_cast<int64_t>(r)
                                             << ": llama.cpp's log-probabilities are shifted by more than its float "
                                                "normalization can account for";
    row_max[r] = 0;
    for (int64_t v = 0; v < V; ++v) {
      const double a = ref[r][static_cast<size_t>(v)] - shift, b = ours[static_cast<size_t>(v)];
      const double d = std::fabs(a - b);  // inf when llama.cpp's probability underflowed: counts as outside
      row_max[r] = std::max(row_max[r], d);
      if (d > s.max_abs) {
        s.max_abs = d;
        std::ostringstream w;
        w << "position " << first_pos + static_cast<int64_t>(r) << ", token " << v << ": llama.cpp " << a
          << (max_shift ? " (shifted by " + std::to_string(-shift) + ")" : std::string()) << ", edgetrain " << b
          << " (logit range " << range << ")";
        s.worst = w.str();
      }
      s.max_rel = std::max(s.max_rel, d / std::fabs(b));
      s.max_of_range = std::max(s.max_of_range, d / range);
      s.outside += !(d <= tol.at(range));
      ++s.compared;
    }
  }
  return row_max;
}

// Checks llama.cpp on the GGUF file `path` (byte tokenizer) against edgetrain's model `m` on kPrompt:
// the prompt's tokenization, the log-softmax after every prompt and generated position within `tol`, the
// argmax after every prompt position and the greedy continuation, token for token as long as edgetrain's
// top-2 gap at that position exceeds twice the largest difference measured there (two log-probabilities
// that each differ by at most that much cannot swap, so llama.cpp must pick the same token). Returns the
// number of leading greedy tokens beyond doubt (all of them compared equal).
size_t expect_llamacpp_agrees_on(Model& m, const std::string& path, const std::string& name, Tol tol) {
  auto tok = make_byte_tokenizer();
  LlamaRef ref;
  try {
    ref = run_llama_ref(path, {kPrompt, {}, kGenerate, "", 1.0});
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
    return 0;
  }
  const int64_t V = m.config().vocab;
  if (ref.n_vocab != V) {
    ADD_FAILURE() << "llama.cpp's vocabulary has " << ref.n_vocab << " tokens, the model " << V;
    return 0;
  }
  auto decisive = [&](const float* row, double dev) { return top2_gap(row, V) > 2 * dev; };

  // The same ids from both tokenizers: the byte tokenizer's 256-token "llama" vocabulary.
  const std::vector<int32_t> ids = tok->encode(kPrompt);
  EXPECT_EQ(ref.prompt_tokens, ids) << "llama.cpp tokenizes the prompt differently";
  if (ref.tokens != ids || ref.logprobs.size() != ids.size() || ref.argmax.size() != ids.size() ||
      ref.generated.size() != static_cast<size_t>(kGenerate)) {
    ADD_FAILURE() << "llama.cpp evaluated other tokens than the prompt's, or returned other counts";
    return 0;
  }

  // Every prompt position, in one forward.
  Stats s;
  m.reset_cache();
  const std::vector<float> prompt_logits = m.next_logits(ids);
  const std::vector<double> prompt_dev = compare_rows(prompt_logits, V, ref.logprobs, 0, tol, s);
  std::ostringstream argmax_differs;
  for (size_t i = 0; i < ids.size(); ++i) {
    const float* row = prompt_logits.data() + i * static_cast<size_t>(V);
    const int64_t ours = std::max_element(row, row + V) - row;
    if (decisive(row, prompt_dev[i]) && ref.argmax[i] != ours)
      argmax_differs << " " << i << " (" << ref.argmax[i] << " vs " << ours << ")";
  }
  EXPECT_EQ(argmax_differs.str(), "") << "llama.cpp's argmax differs after these positions (llama.cpp vs edgetrain)";

  // Greedy continuation through the KV cache; after each token llama.cpp also evaluated, the next
  // position's distributions are compared too.
  std::vector<int32_t> ours;
  std::vector<float> last(prompt_logits.end() - V, prompt_logits.end());
  size_t certain = 0;  // leading generated tokens whose argmax is beyond doubt
  double dev = prompt_dev.back();  // the largest difference at the position generating the next token
  bool same_history = true;        // llama.cpp's greedy tokens so far are all ours
  for (int i = 0; i < kGenerate; ++i) {
    const int32_t next = static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
    if (certain == ours.size() && decisive(last.data(), dev)) ++certain;
    ours.push_back(next);
    same_history = same_history && ref.generated[static_cast<size_t>(i)] == next;
    if (i + 1 == kGenerate) break;
    last = m.next_logits({next});
    dev = INFINITY;
    if (same_history)  // llama.cpp's row i followed the same tokens (all of them, not only the last)
      dev = compare_rows(last, V, {ref.generated_logprobs.at(static_cast<size_t>(i))},
                         static_cast<int64_t>(ids.size()) + i, tol, s)[0];
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
  return certain;
}

// Exports `m` as `type` with the byte tokenizer and checks llama.cpp on that file against `m`.
size_t expect_llamacpp_agrees(Model& m, GgufType type, const std::string& name, Tol tol) {
  auto tok = make_byte_tokenizer();
  const std::string path = tmp(name + ".gguf");
  save_gguf(path, m, type, tok.get());
  return expect_llamacpp_agrees_on(m, path, name, tol);
}

}  // namespace

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
    const std::string path = tmp(name + ".gguf");
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
  const std::string f32 = tmp("for_q4_k_m.gguf"), q4km = tmp("q4_k_m.gguf");
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
  const gguf::File f = gguf::File::open(tmp("rope_freqs_f32.gguf"));
  ASSERT_NE(f.tensor("rope_freqs.weight"), nullptr);
  EXPECT_EQ(f.to_f32(*f.tensor("rope_freqs.weight")), m->config().rope_factors);
  expect_gguf_round_trip(*be, *m, tmp("rope_freqs_f32.gguf"));
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
  EXPECT_EQ(gguf::File::open(tmp("tied_f32.gguf")).tensor("output.weight"), nullptr);
  expect_gguf_round_trip(*be, *m, tmp("tied_f32.gguf"));
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
  const gguf::File f = gguf::File::open(tmp("wide_heads_f32.gguf"));
  EXPECT_EQ(f.tensor("blk.0.attn_q.weight")->ne, (std::vector<uint64_t>{32, 48}));
  expect_gguf_round_trip(*be, *m, tmp("wide_heads_f32.gguf"));
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
  const gguf::File f = gguf::File::open(tmp(name + "_f32.gguf"));
  EXPECT_EQ(f.find("general.architecture")->s, m.config().arch);
  expect_gguf_round_trip(be, m, tmp(name + "_f32.gguf"));
  if (qat) {
    auto tok = make_byte_tokenizer();
    const GgufExportReport rep = save_gguf(tmp(name + "_q4_0.gguf"), m, GgufType::Q4_0, tok.get());
    EXPECT_EQ(rep.requantized, 0) << "every linear's codes written as they are";
    expect_llamacpp_agrees_on(m, tmp(name + "_q4_0.gguf"), name + "_q4_0", kQ4_0);
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

// ---- Llama 3's vocabulary size through the CLI ----
// A Llama 3-style GGUF file with Llama 3's 128,256-token vocabulary (byte-level BPE, tokenizer.ggml.pre
// llama-bpe, 128,000 regular tokens with their merges, then Llama 3.1's 256 control tokens at their ids),
// a tied head (no output.weight) and rope base 500000, on a tiny body, through what a user runs:
// `train --init FILE.gguf` (qat, then qlora from the qat run's export) on a corpus tokenized by the file's
// own tokenizer, `convert --to gguf-f32`, and llama.cpp on the exported file against `generate --logits`
// of the trained checkpoint (and the checkpoint's logits after every prompt position).

namespace {

constexpr int64_t kLlama3Vocab = 128256, kLlama3Regular = 128000;
constexpr int kLargeGenerate = 12;

// The vocabulary: the 256 bytes in GPT-2's alphabet (id = byte), 1000 merges learned on text like the
// prompt (learned_bpe_vocab, without its <|endoftext|>), then up to 128,000 regular tokens: merges of a
// random earlier token with a random one of those first ids (most of them never apply to real text), and
// spread among them, at ids up to 127,9xx, the merges that build the words of kText and kPrompt (llama-bpe
// pieces of 4 bytes or more that are not tokens yet) left to right from what the first merges make of them,
// so that the corpus and the prompt are made mostly of high ids; then <|begin_of_text|> (128000, BOS),
// <|end_of_text|> (128001, EOS), <|start_header_id|> (128006), <|eot_id|> (128009), ... and the reserved
// tokens up to 128255, all control tokens, as Llama 3.1's tokenizer has them; add_bos_token true.
// `first_late`: the id after the learned ones.
GgufVocab llama3_sized_vocab(int32_t& first_late) {
  GgufVocab v = learned_bpe_vocab(training_text(), 1000);
  v.tokens.pop_back(), v.token_types.pop_back();  // its <|endoftext|>
  v.bos = v.eos = -1;
  v.pre = "llama-bpe";
  const size_t base = v.tokens.size();
  first_late = static_cast<int32_t>(base);
  std::unordered_set<std::string> have(v.tokens.begin(), v.tokens.end());
  // The words' merges, one list per word.
  std::vector<std::vector<std::pair<std::string, std::string>>> words;
  {
    auto learned = make_gguf_tokenizer(v, "learned");
    const std::string text = std::string(kText) + kPrompt;
    std::unordered_set<std::string> seen;
    auto each = [&](size_t b, size_t e) {
      const std::string w = text.substr(b, e - b);
      if (w.size() < 4 || !seen.insert(w).second || have.count(text::bytes_to_symbol(w))) return;
      std::vector<std::pair<std::string, std::string>> chain;
      std::string left;
      for (int32_t id : learned->encode(w)) {
        if (!left.empty()) chain.emplace_back(left, v.tokens[static_cast<size_t>(id)]);
        left += v.tokens[static_cast<size_t>(id)];
      }
      words.push_back(chain);
    };
    text::pre_tokenize(*text::pre_tokenizer_named("llama-bpe"), text, each);
  }
  auto add = [&](const std::string& a, const std::string& b) {
    if (!have.insert(a + b).second) return;
    v.merges.push_back(a + " " + b);
    v.tokens.push_back(a + b);
    v.token_types.push_back(1);
  };
  std::mt19937 rng(2024);
  size_t next_word = 0;
  while (static_cast<int64_t>(v.tokens.size()) < kLlama3Regular) {
    const size_t slot = base + (next_word + 1) * (static_cast<size_t>(kLlama3Regular) - base - 64) / (words.size() + 1);
    if (next_word < words.size() && v.tokens.size() >= slot) {
      for (const auto& [a, b] : words[next_word]) add(a, b);
      ++next_word;
    }
    const std::string a = v.tokens[rng() % v.tokens.size()], b = v.tokens[rng() % base];
    add(a, b);
  }
  const char* named[] = {"<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                         "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|reserved_special_token_2|>",
                         "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"};
  for (const char* t : named) v.tokens.push_back(t);
  for (int r = 3; static_cast<int64_t>(v.tokens.size()) < kLlama3Vocab; ++r)
    v.tokens.push_back("<|reserved_special_token_" + std::to_string(r) + "|>");
  v.token_types.resize(v.tokens.size(), 3);
  v.bos = 128000, v.eos = 128001;
  v.add_bos = 1;
  return v;
}

// A float32 [rows, cols] NumPy file as `generate --logits` writes it.
std::vector<float> read_npy_f32(const std::string& path, int64_t& rows, int64_t& cols) {
  const std::string s = slurp(path);
  rows = cols = 0;
  if (s.size() < 10 || s.compare(0, 6, "\x93NUMPY") != 0) throw std::runtime_error(path + " is not a .npy file");
  const size_t n = static_cast<unsigned char>(s[8]) | static_cast<size_t>(static_cast<unsigned char>(s[9])) << 8;
  const std::string header = s.substr(10, n);
  const size_t at = header.find("'shape': (");
  long long r = 0, c = 0;
  if (header.find("'descr': '<f4'") == std::string::npos || header.find("'fortran_order': False") == std::string::npos ||
      at == std::string::npos || std::sscanf(header.c_str() + at + 10, "%lld, %lld", &r, &c) != 2)
    throw std::runtime_error(path + ": unexpected header " + header);
  rows = r, cols = c;
  if (s.size() - 10 - n != static_cast<size_t>(r * c) * sizeof(float))
    throw std::runtime_error(path + ": " + std::to_string(s.size() - 10 - n) + " data bytes for shape " + header);
  std::vector<float> v(static_cast<size_t>(r * c));
  std::memcpy(v.data(), s.data() + 10 + n, v.size() * sizeof(float));
  return v;
}

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0, len = 0;
    if (!text::decode_utf8(reinterpret_cast<const unsigned char*>(s.data()), s.size(), i, cp, len)) return false;
    i += len;
  }
  return true;
}


// The CLI, its output (stdout and stderr) kept in `dir`/log<n>.txt.
struct Cli {
  std::string dir;
  int runs = 0;
  Outcome operator()(const std::vector<std::string>& args, double limit_s = 300) {
    ChildOptions o;
    o.log = dir + "/log" + std::to_string(++runs) + ".txt";
    return wait_child(spawn_cli(args, o), o.log, limit_s);
  }
};

// llama.cpp on `gguf` (the export of the checkpoint `ckpt`) against edgetrain on `ckpt`: the prompt's
// tokenization by the file's tokenizer; the log-softmax after every prompt position (the checkpoint loaded
// here, one forward) and after the prompt and each generated token (`generate --temperature 0 --logits`
// of the CLI) within kF32; the argmaxes and the greedy continuation, token for token as far as edgetrain's
// top-2 gaps are beyond doubt (see expect_llamacpp_agrees_on), which must be all of them.
void expect_llamacpp_agrees_cli(Cli& cli, const std::string& ckpt, const std::string& gguf, const std::string& name) {
  const std::string npy = cli.dir + "/" + name + "_logits.npy";
  const Outcome gen = cli({"generate", "--checkpoint", ckpt, "--backend", "cpu", "--threads", "1", "--temperature", "0",
                           "--max-tokens", std::to_string(kLargeGenerate), "--prompt", kPrompt, "--logits", npy});
  ASSERT_EQ(gen.code(), 0) << gen.describe();
  int64_t rows = 0, V = 0;
  const std::vector<float> ours_rows = read_npy_f32(npy, rows, V);
  ASSERT_EQ(V, kLlama3Vocab);
  ASSERT_EQ(rows, kLargeGenerate) << "generate stopped early (end of text?)";
  LlamaRef ref;
  try {
    ref = run_llama_ref(gguf, {kPrompt, {}, kLargeGenerate, "", 1.0});
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  ASSERT_EQ(ref.n_vocab, kLlama3Vocab);
  auto tok = load_gguf_tokenizer(gguf);
  ASSERT_EQ(tok->vocab_size(), kLlama3Vocab);
  const std::vector<int32_t> ids = tok->encode(kPrompt);
  ASSERT_EQ(ref.prompt_tokens, ids) << "llama.cpp tokenizes the prompt differently";
  ASSERT_EQ(ref.logprobs.size(), ids.size());
  ASSERT_EQ(ref.generated.size(), static_cast<size_t>(kLargeGenerate));

  Stats s;
  // Every prompt position, from the checkpoint.
  auto be = make_cpu_backend();
  auto m = load_model_file(ckpt, *be);
  m->reset_cache();
  const std::vector<float> prompt_logits = m->next_logits(ids);
  double max_shift = 0;
  const std::vector<double> prompt_dev = compare_rows(prompt_logits, V, ref.logprobs, 0, kF32, s, &max_shift);
  std::ostringstream argmax_differs;
  for (size_t i = 0; i < ids.size(); ++i) {
    const float* row = prompt_logits.data() + i * static_cast<size_t>(V);
    const int64_t best = std::max_element(row, row + V) - row;
    if (ref.argmax[i] != best) argmax_differs << " " << i << " (" << ref.argmax[i] << " vs " << best << ")";
  }
  EXPECT_EQ(argmax_differs.str(), "") << "llama.cpp's argmax differs after these positions (llama.cpp vs edgetrain)";
  // The CLI's first row is the last prompt position's, the same forward as above.
  EXPECT_EQ(std::vector<float>(ours_rows.begin(), ours_rows.begin() + V),
            std::vector<float>(prompt_logits.end() - V, prompt_logits.end()));

  // The CLI's greedy continuation: row i picked token i; llama.cpp's row i (after the prompt and its
  // generated tokens 0..i-1) is compared while both picked the same tokens.
  std::vector<int32_t> ours;
  size_t certain = 0;
  double dev = prompt_dev.back();
  for (int64_t i = 0; i < rows; ++i) {
    const float* row = ours_rows.data() + i * V;
    if (i > 0) {
      dev = INFINITY;
      if (std::equal(ours.begin(), ours.end(), ref.generated.begin()))
        dev = compare_rows(std::vector<float>(row, row + V), V, {ref.generated_logprobs.at(static_cast<size_t>(i - 1))},
                           static_cast<int64_t>(ids.size()) + i - 1, kF32, s, &max_shift)[0];
    }
    if (certain == ours.size() && top2_gap(row, V) > 2 * dev) ++certain;
    ours.push_back(static_cast<int32_t>(std::max_element(row, row + V) - row));
  }
  EXPECT_EQ(certain, ours.size()) << "top-2 logit gaps too small to compare every greedy token";
  EXPECT_EQ(std::vector<int32_t>(ref.generated.begin(), ref.generated.begin() + static_cast<long>(certain)),
            std::vector<int32_t>(ours.begin(), ours.begin() + static_cast<long>(certain)))
      << "greedy continuation differs (" << certain << " leading tokens are beyond doubt)";
  const std::string text = tok->decode(ours);
  EXPECT_NE(gen.output.find(kPrompt + text), std::string::npos) << "generate printed something else:\n" << gen.output;
  if (ref.generated == ours && valid_utf8(text)) {
    EXPECT_EQ(ref.generated_text, text) << "llama.cpp's detokenizer";
  }
  std::string shown;
  for (int32_t t : ours) shown += std::to_string(t) + " ";
  std::printf("[ llama.cpp ] %-8s %zu prompt tokens; %lld log-probs at %lld positions: max |diff| %.3g, "
              "max |diff|/logit range %.3g (tolerance %.3g), rows shifted by up to %.3g; greedy %s(\"%s\"), "
              "%zu/%d tokens beyond doubt\n",
              name.c_str(), ids.size(), static_cast<long long>(s.compared), static_cast<long long>(s.compared / V),
              s.max_abs, s.max_of_range, kF32.of_range, max_shift, shown.c_str(), valid_utf8(text) ? text.c_str() : "(not UTF-8)",
              certain, kLargeGenerate);
  EXPECT_EQ(s.outside, 0) << s.outside << " of " << s.compared << " log-probabilities outside the tolerance; worst: "
                          << s.worst;
}

// The exported file: Llama 3's vocabulary as it went in, a tied head, rope base 500000, F32 weights.
void expect_llama3_file(const std::string& path, const GgufVocab& vocab) {
  EXPECT_EQ(read_gguf_vocab(path), vocab) << path << ": the vocabulary changed on its way through";
  const gguf::File f = gguf::File::open(path);
  EXPECT_EQ(f.tensor("output.weight"), nullptr) << path << ": an untied head";
  ASSERT_NE(f.tensor("token_embd.weight"), nullptr);
  EXPECT_EQ(f.tensor("token_embd.weight")->ne, (std::vector<uint64_t>{64, static_cast<uint64_t>(kLlama3Vocab)}));
  EXPECT_EQ(f.tensor("token_embd.weight")->type, static_cast<uint32_t>(gguf::F32));
  ASSERT_NE(f.find("llama.rope.freq_base"), nullptr);
  EXPECT_EQ(f.find("llama.rope.freq_base")->f, 500000.0);
  EXPECT_EQ(f.tensor("blk.1.attn_k.weight")->ne, (std::vector<uint64_t>{64, 32}));  // 2 kv heads of 16
}

}  // namespace

TEST(LlamaCpp, Llama3VocabularyTrainedThroughCli) {
  SKIP_WITHOUT_LLAMACPP();
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto secs = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  TempDir dir("llamacpp", "llama3_vocab");
  fs::create_directories(dir.path);
  Cli cli{dir.str()};

  int32_t first_late = 0;
  const GgufVocab vocab = llama3_sized_vocab(first_late);
  auto tok = make_gguf_tokenizer(vocab, "test");
  ASSERT_EQ(tok->vocab_size(), kLlama3Vocab);
  ASSERT_EQ(tok->bos(), 128000);
  ASSERT_EQ(tok->eot(), 128001);
  // The untrained model a user would download: a tiny body under Llama 3's vocabulary.
  const std::string init = dir.str() + "/llama3-tiny.gguf";
  {
    auto be = make_cpu_backend();
    ModelConfig c;
    c.vocab = kLlama3Vocab, c.dim = 64, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.ffn_dim = 128;
    c.tied_head = true, c.rope_theta = 500000.0f, c.max_seq = 128, c.mode = TrainMode::fp32;
    Model m(*be, c);
    m.init(5);
    save_gguf(init, m, GgufType::F32, tok.get());
  }
  expect_llama3_file(init, vocab);
  const std::string corpus = dir.str() + "/corpus.txt";
  {
    std::ofstream out(corpus);
    for (int i = 0; i < 40; ++i) out << kText;
  }
  const std::vector<int32_t> corpus_ids = tok->encode(slurp(corpus)), prompt_ids = tok->encode(kPrompt);
  auto late = [&](const std::vector<int32_t>& ids) {
    return std::count_if(ids.begin(), ids.end(), [&](int32_t t) { return t >= first_late; });
  };
  std::string shown;
  for (int32_t t : prompt_ids) shown += " " + std::to_string(t);
  std::printf("[ llama.cpp ] %zu-token vocabulary, %zu merges; corpus: %zu bytes, %zu tokens (%ld with ids >= %d); "
              "prompt:%s; setup %.1f s\n",
              vocab.tokens.size(), vocab.merges.size(), slurp(corpus).size(), corpus_ids.size(),
              static_cast<long>(late(corpus_ids)), first_late, shown.c_str(), secs());
  // The words' tokens are what the corpus and the prompt are mostly made of, up to the top of the range.
  EXPECT_GT(late(corpus_ids), static_cast<long>(corpus_ids.size() / 3));
  EXPECT_GT(*std::max_element(prompt_ids.begin(), prompt_ids.end()), 100000);

  auto train = [&](const std::string& from, const std::string& mode, const std::string& out, int steps,
                   std::vector<std::string> extra) {
    std::vector<std::string> a = {"train", "--init", from, "--mode", mode, "--backend", "cpu", "--corpus", corpus,
                                  "--batch", "4", "--seq", "32", "--steps", std::to_string(steps), "--warmup", "0",
                                  "--eval-every", "1000", "--eval-batches", "1", "--out", out, "--no-progress",
                                  "--sample-tokens", "0"};
    a.insert(a.end(), extra.begin(), extra.end());
    const Outcome o = cli(a);
    EXPECT_EQ(o.code(), 0) << o.describe();
    // The --init file's own tokenizer (the default, auto), all 128,256 tokens of it.
    EXPECT_NE(o.output.find("128256 tokens"), std::string::npos) << o.output;
    return o.code() == 0;
  };
  // Training moved the weights the file carries (so the comparison is of a trained model, not of --init's).
  auto differ = [](const std::string& a, const std::string& b, const std::string& tensor) {
    const gguf::File fa = gguf::File::open(a), fb = gguf::File::open(b);
    return fa.to_f32(*fa.tensor(tensor)) != fb.to_f32(*fb.tensor(tensor));
  };
  auto convert = [&](const std::string& ckpt, const std::string& out) {
    const Outcome o = cli({"convert", ckpt, out, "--to", "gguf-f32"});
    EXPECT_EQ(o.code(), 0) << o.describe();
    return o.code() == 0;
  };

  // qat from the file.
  const std::string qat = dir.str() + "/qat/checkpoint.safetensors", qat_gguf = dir.str() + "/qat.gguf";
  ASSERT_TRUE(train(init, "qat", dir.str() + "/qat", 60, {"--lr", "1e-2"}));
  ASSERT_TRUE(convert(qat, qat_gguf));
  std::printf("[ llama.cpp ] qat trained and exported: %.1f s\n", secs());
  expect_llama3_file(qat_gguf, vocab);
  EXPECT_TRUE(differ(init, qat_gguf, "token_embd.weight"));
  EXPECT_TRUE(differ(init, qat_gguf, "blk.1.ffn_down.weight"));
  expect_llamacpp_agrees_cli(cli, qat, qat_gguf, "qat");
  std::printf("[ llama.cpp ] qat compared: %.1f s\n", secs());

  // qlora on top of the qat run's export, adapters on every block linear, exported merged.
  const std::string ql = dir.str() + "/qlora/checkpoint.safetensors", ql_gguf = dir.str() + "/qlora.gguf";
  ASSERT_TRUE(train(qat_gguf, "qlora", dir.str() + "/qlora", 20,
                    {"--lr", "3e-2", "--lora-rank", "4", "--lora-targets", "q,k,v,o,gate,up,down"}));
  ASSERT_TRUE(convert(ql, ql_gguf));
  std::printf("[ llama.cpp ] qlora trained and exported: %.1f s\n", secs());
  expect_llama3_file(ql_gguf, vocab);
  EXPECT_TRUE(differ(qat_gguf, ql_gguf, "blk.1.ffn_down.weight")) << "no adapter merged into the export";
  expect_llamacpp_agrees_cli(cli, ql, ql_gguf, "qlora");
  std::printf("[ llama.cpp ] qlora compared: %.1f s\n", secs());
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
  expect_error(tmp("missing.gguf"), {"x", {}, 0, "", 1.0}, "missing.gguf does not exist");
  auto be = make_cpu_backend();
  Model m(*be, ModelConfig::preset("tiny"));
  m.init(1);
  auto tok = make_byte_tokenizer();
  const std::string path = tmp("untrained.gguf");
  save_gguf(path, m, GgufType::F32, tok.get());
  expect_error(path, {"", {1, 256}, 0, "", 1.0}, "token id 256 is outside the vocabulary of 256");
  expect_error(path, {"", {1}, 0, tmp("missing_lora.gguf"), 1.0}, "missing_lora.gguf does not exist");
}

}  // namespace edgetrain::test
