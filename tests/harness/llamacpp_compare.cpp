// What harness/llamacpp_compare.h declares (its comments say what each does).
#include "harness/llamacpp_compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>

#include "edgetrain/tokenizer.h"
#include "edgetrain/trainer.h"
#include "harness/temp_files.h"

namespace edgetrain::test {

std::string llamacpp_tmp(const std::string& name) { return temp_path("llamacpp", name); }

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

std::vector<double> log_softmax(const float* x, int64_t V) {
  const double mx = *std::max_element(x, x + V);
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(x[v]) - mx);
  std::vector<double> out(static_cast<size_t>(V));
  for (int64_t v = 0; v < V; ++v) out[static_cast<size_t>(v)] = x[v] - mx - std::log(sum);
  return out;
}

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

std::vector<double> compare_rows(const std::vector<float>& logits, int64_t V, const std::vector<std::vector<double>>& ref,
                                 int64_t first_pos, Tol tol, Stats& s, double* max_shift) {
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

size_t expect_llamacpp_agrees(Model& m, GgufType type, const std::string& name, Tol tol) {
  auto tok = make_byte_tokenizer();
  const std::string path = llamacpp_tmp(name + ".gguf");
  save_gguf(path, m, type, tok.get());
  return expect_llamacpp_agrees_on(m, path, name, tol);
}

}  // namespace edgetrain::test
