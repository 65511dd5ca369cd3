// llama.cpp as the reference for a file with Llama 3's 128,256-token vocabulary trained through the CLI, and
// the reference script's own bad-input messages (harness/llamacpp_compare.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
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
#include "harness/cli_child.h"
#include "harness/temp_files.h"
#include "harness/llamacpp_compare.h"
#include "harness/pretokenize_texts.h"
#include "text/bpe.h"
#include "text/pretokenize.h"
#include "text/unicode.h"

namespace fs = std::filesystem;

namespace edgetrain::test {

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
  expect_error(llamacpp_tmp("missing.gguf"), {"x", {}, 0, "", 1.0}, "missing.gguf does not exist");
  auto be = make_cpu_backend();
  Model m(*be, ModelConfig::preset("tiny"));
  m.init(1);
  auto tok = make_byte_tokenizer();
  const std::string path = llamacpp_tmp("untrained.gguf");
  save_gguf(path, m, GgufType::F32, tok.get());
  expect_error(path, {"", {1, 256}, 0, "", 1.0}, "token id 256 is outside the vocabulary of 256");
  expect_error(path, {"", {1}, 0, llamacpp_tmp("missing_lora.gguf"), 1.0}, "missing_lora.gguf does not exist");
}

}  // namespace edgetrain::test
