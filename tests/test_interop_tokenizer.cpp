// GGUF tokenizer metadata: export -> import keeps it, malformed metadata is rejected naming the key, and
// `train --init x.gguf` trains, generates and converts with the file's own tokenizer.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "edgetrain/backends.h"
#include "edgetrain/checkpoint.h"
#include "edgetrain/interop.h"
#include "edgetrain/safetensors.h"
#include "edgetrain/tokenizer.h"
#include "edgetrain/trainer.h"
#include "io/gguf.h"
#include "harness/cli_child.h"
#include "harness/gguf_vocab.h"
#include "harness/interop_helpers.h"

namespace fs = std::filesystem;

namespace edgetrain::test {
namespace {

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
  const std::string path = interop_tmp("spm.gguf");
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
  save_gguf_tokenizer(interop_tmp("tok_only.gguf"), v);
  EXPECT_TRUE(read_gguf_vocab(interop_tmp("tok_only.gguf")) == v);
  EXPECT_THROW(read_gguf_config(interop_tmp("tok_only.gguf"), TrainMode::qat, 32), Error);  // no model in it
  // A tokenizer of another size than the model is refused.
  c.vocab = 300;
  Model other(*be, c);
  other.init(1);
  EXPECT_THROW(save_gguf(interop_tmp("x.gguf"), other, GgufType::F32, tok.get()), Error);

  // GPT-2: written as "gpt2" with its merges, read back into the same tokenizer.
  const std::string dir = default_gpt2_dir();
  if (!fs::exists(dir + "/encoder.json") || !fs::exists(dir + "/vocab.bpe")) GTEST_SKIP() << "no GPT-2 files in " << dir;
  auto gpt2 = make_tokenizer("gpt2");
  save_gguf_tokenizer(interop_tmp("gpt2.gguf"), gpt2->gguf_vocab());
  const GgufVocab g = read_gguf_vocab(interop_tmp("gpt2.gguf"));
  EXPECT_EQ(g.model, "gpt2");
  EXPECT_EQ(g.pre, "gpt-2");
  EXPECT_EQ(g.tokens.size(), 50257u);
  EXPECT_EQ(g.merges.size(), 50000u);
  EXPECT_EQ(g.tokens[50256], "<|endoftext|>");
  EXPECT_EQ(g.token_types[50256], 3);
  EXPECT_EQ(g.eos, 50256);
  auto g_tok = load_gguf_tokenizer(interop_tmp("gpt2.gguf"));
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
    const std::string path = interop_tmp("badtok.gguf");
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
  save_gguf(interop_tmp("model.gguf"), m, GgufType::F32);
  write_with_tokenizer_keys(interop_tmp("model_badtok.gguf"), interop_tmp("model.gguf"),
                            {model, {"tokenizer.ggml.tokens", V::i32s({1, 2, 3})}});
  ImportInfo info;
  load_gguf_model(interop_tmp("model_badtok.gguf"), *be, TrainMode::fp32, 32, &info);
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
  const std::string corpus = interop_tmp("corpus.txt");
  std::ofstream(corpus, std::ios::binary) << corpus_text;
  const GgufVocab v = spm_vocab_for(corpus_text);
  auto tok = make_gguf_tokenizer(v, "hand-built");
  auto be = make_cpu_backend();
  ModelConfig c = tiny(TrainMode::fp32);
  c.vocab = tok->vocab_size();
  Model m(*be, c);
  m.init(11);
  const std::string init = interop_tmp("init.gguf");
  save_gguf(init, m, GgufType::F32, tok.get());

  TrainOptions o;
  o.corpus = corpus;
  o.out_dir = interop_tmp("run_gguf");
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
  const std::string conv = run_cli("convert " + r.checkpoint + " " + interop_tmp("out.gguf") + " --to gguf-q4_0");
  EXPECT_NE(conv.find("wrote"), std::string::npos) << conv;
  EXPECT_TRUE(read_gguf_vocab(interop_tmp("out.gguf")) == v) << "convert did not write the tokenizer back unchanged";

  // A vocabulary that does not fit the model's embedding, and "gguf" without a GGUF --init: clear errors.
  Model small(*be, tiny(TrainMode::fp32));  // vocab 64
  small.init(1);
  save_gguf(interop_tmp("init64.gguf"), small, GgufType::F32);
  TrainOptions bad = o;
  bad.out_dir = interop_tmp("run_bad");
  bad.init = interop_tmp("init64.gguf");
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
  save_gguf(interop_tmp("init256.gguf"), bytes_model, GgufType::F32);
  TrainOptions plain = o;
  plain.out_dir = interop_tmp("run_plain");
  plain.init = interop_tmp("init256.gguf");
  plain.optim.total_steps = 1;
  plain.sample_tokens = 0;
  train(plain);
  EXPECT_EQ(read_checkpoint_metadata(plain.out_dir + "/checkpoint.safetensors")["tokenizer"], "bytes");
}

}  // namespace
}  // namespace edgetrain::test
