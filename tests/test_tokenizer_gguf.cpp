// The tokenizers of GGUF vocabularies (tokenizer.ggml.*) built here: SentencePiece-style ("llama") merges
// worked by hand, byte fallback, special tokens, random round trips, GPT-2 as a GGUF vocabulary against the
// GPT-2 files and its merge order, malformed vocabularies, factory and checkpoint specs, speed on KJV.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "edgetrain/error.h"
#include "edgetrain/interop.h"
#include "edgetrain/paths.h"
#include "edgetrain/tokenizer.h"
#include "harness/cli_child.h"
#include "harness/gguf_vocab.h"
#include "harness/gpt2_files.h"

namespace fs = std::filesystem;

namespace edgetrain::test {
namespace {

using edgetrain::GgufVocab;

const std::string kMark = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// A llama-style vocabulary: <unk>, <s>, </s>, the 256 byte tokens <0x00>..<0xFF> (ids 3..258), then the
// given normal tokens with their scores, then the given tokens of other types.
GgufVocab spm_vocab(const std::vector<std::pair<std::string, float>>& normal,
                    const std::vector<std::pair<std::string, int32_t>>& others = {}) {
  GgufVocab v = edgetrain::test::spm_vocab_head();
  auto add = [&](const std::string& t, float score, int32_t type) {
    v.tokens.push_back(t);
    v.scores.push_back(score);
    v.token_types.push_back(type);
  };
  for (const auto& [t, s] : normal) add(t, s, 1);
  for (const auto& [t, type] : others) add(t, 0, type);
  v.unk = 0, v.bos = 1, v.eos = 2;
  return v;
}

int32_t id_of(const GgufVocab& v, const std::string& t) {
  for (size_t i = 0; i < v.tokens.size(); ++i)
    if (v.tokens[i] == t) return static_cast<int32_t>(i);
  ADD_FAILURE() << "no token " << t;
  return -1;
}
int32_t byte_id(int b) { return 3 + b; }  // in spm_vocab

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const edgetrain::Error& e) {
    return e.what();
  }
  return "(no error)";
}

#define EXPECT_ERROR_HAS(expr, ...)                                                                    \
  do {                                                                                               \
    const std::string msg_ = error_of([&] { (void)(expr); });                                         \
    for (const std::string& needle_ : std::vector<std::string>{__VA_ARGS__})                           \
      EXPECT_NE(msg_.find(needle_), std::string::npos) << "message \"" << msg_ << "\" lacks \"" << needle_ << "\""; \
  } while (0)

std::vector<int32_t> ids_of(const GgufVocab& v, const std::vector<std::string>& texts) {
  std::vector<int32_t> ids;
  for (const auto& t : texts) ids.push_back(id_of(v, t));
  return ids;
}

// GPT-2's files as a GGUF vocabulary, read here independently of the tokenizer: tokens by id, merges as the
// lines of vocab.bpe, <|endoftext|> a control token and BOS/EOS.
GgufVocab gpt2_files_as_gguf() {
  const std::string dir = edgetrain::default_gpt2_dir();
  const auto enc = nlohmann::json::parse(slurp(dir + "/encoder.json"));
  GgufVocab v;
  v.model = "gpt2";
  v.pre = "gpt-2";
  v.tokens.resize(enc.size());
  for (auto it = enc.begin(); it != enc.end(); ++it) v.tokens[it.value().get<size_t>()] = it.key();
  v.token_types.assign(v.tokens.size(), 1);
  v.eos = v.bos = 50256;
  v.token_types[50256] = 3;
  std::istringstream merges(slurp(dir + "/vocab.bpe"));
  std::string line;
  std::getline(merges, line);  // "#version: 0.2" (later lines may start with '#': "# #" is a merge)
  while (std::getline(merges, line))
    if (!line.empty()) v.merges.push_back(line);
  return v;
}

TEST(GgufTokenizer, SpmMergesHighestScoreFirst) {
  using edgetrain::make_gguf_tokenizer;
  // "abc": the pair with the higher score merges first, and then the other pair is gone.
  {
    GgufVocab v = spm_vocab({{"a", -5}, {"b", -5}, {"c", -5}, {"ab", -2}, {"bc", -1}});
    v.add_space_prefix = 0;
    EXPECT_EQ(make_gguf_tokenizer(v, "t")->encode("abc"), ids_of(v, {"a", "bc"}));
  }
  {
    GgufVocab v = spm_vocab({{"a", -5}, {"b", -5}, {"c", -5}, {"ab", -1}, {"bc", -2}});
    v.add_space_prefix = 0;
    EXPECT_EQ(make_gguf_tokenizer(v, "t")->encode("abc"), ids_of(v, {"ab", "c"}));
  }
  {  // equal scores: the leftmost pair
    GgufVocab v = spm_vocab({{"a", -5}, {"b", -5}, {"c", -5}, {"ab", -1}, {"bc", -1}});
    v.add_space_prefix = 0;
    EXPECT_EQ(make_gguf_tokenizer(v, "t")->encode("abc"), ids_of(v, {"ab", "c"}));
  }
  // With the default space prefix: " the cat" -> "▁▁the▁cat". Worked by hand:
  //   pairs of "▁ ▁ t h e ▁ c a t": ▁▁ (-9), ▁t (-3), th (-1), he (-4), ▁c (-6), ca (-5), at (-2)
  //   th (-1)  -> ▁ ▁ th e ▁ c a t       new pairs: ▁th (-7), the (-0.5)
  //   the (-0.5) -> ▁ ▁ the ▁ c a t      new: ▁the (-0.1), the▁ (none)
  //   ▁the (-0.1) -> ▁ ▁the ▁ c a t      new: ▁▁the (none)
  //   at (-2)  -> ▁ ▁the ▁ c at          new: cat (-8)
  //   ca is stale (a merged), ▁c (-6)  -> ▁ ▁the ▁c at  new: ▁cat (-0.2)
  //   ▁cat (-0.2) -> ▁ ▁the ▁cat; then ▁th/cat/▁▁ are stale or absent.
  GgufVocab v = spm_vocab({{kMark, -10}, {"t", -10}, {"h", -10}, {"e", -10}, {"c", -10}, {"a", -10},
                           {kMark + kMark, -9}, {kMark + "t", -3}, {"th", -1}, {"he", -4}, {kMark + "c", -6},
                           {"ca", -5}, {"at", -2}, {kMark + "th", -7}, {"the", -0.5f}, {kMark + "the", -0.1f},
                           {"cat", -8}, {kMark + "cat", -0.2f}});
  auto tok = make_gguf_tokenizer(v, "t");
  EXPECT_EQ(tok->encode(" the cat"), ids_of(v, {kMark, kMark + "the", kMark + "cat"}));
  EXPECT_EQ(tok->decode(tok->encode(" the cat")), " the cat");
  EXPECT_EQ(tok->encode("the cat"), ids_of(v, {kMark + "the", kMark + "cat"}));
  EXPECT_EQ(tok->decode(ids_of(v, {kMark + "the", kMark + "cat"})), "the cat");  // the prefix space dropped
  EXPECT_EQ(tok->encode_continuation("the cat"), ids_of(v, {"the", kMark + "cat"}));
  EXPECT_TRUE(tok->encode("").empty());
}

TEST(GgufTokenizer, SpmByteFallbackAndSpecialTokens) {
  using edgetrain::make_gguf_tokenizer;
  GgufVocab v = spm_vocab({{kMark, -1}, {"a", -1}, {"<", -1}, {"s", -1}, {">", -1}, {"<s", -1}, {kMark + "a", -0.5f}},
                          {{"<|u|>", 4}});
  auto tok = make_gguf_tokenizer(v, "t");
  EXPECT_EQ(tok->name().rfind("gguf-llama-", 0), 0u) << tok->name();
  EXPECT_EQ(tok->vocab_size(), static_cast<int64_t>(v.tokens.size()));
  EXPECT_EQ(tok->eot(), 2);
  EXPECT_EQ(tok->bos(), 1);
  // "é" has no token: its two UTF-8 bytes; a byte that is not UTF-8 too; "\n" too.
  EXPECT_EQ(tok->encode("a\xC3\xA9"), (std::vector<int32_t>{id_of(v, kMark + "a"), byte_id(0xC3), byte_id(0xA9)}));
  EXPECT_EQ(tok->encode("a\xFF\n"), (std::vector<int32_t>{id_of(v, kMark + "a"), byte_id(0xFF), byte_id('\n')}));
  // A '▁' in the input is not a space: bytes, and it decodes back to itself.
  const std::string literal = "a" + kMark + "a";
  EXPECT_EQ(tok->encode(literal), (std::vector<int32_t>{id_of(v, kMark + "a"), byte_id(0xE2), byte_id(0x96),
                                                         byte_id(0x81), id_of(v, "a")}));
  EXPECT_EQ(tok->decode(tok->encode(literal)), literal);
  // Control tokens are never made from text ("<s" + ">" would be "<s>"), user-defined ones are.
  EXPECT_EQ(tok->encode("<s>"), ids_of(v, {kMark, "<s", ">"}));
  EXPECT_EQ(tok->encode("a<|u|>a"), ids_of(v, {kMark + "a", "<|u|>", "a"}));
  EXPECT_EQ(tok->encode("<|u|> a"), ids_of(v, {"<|u|>", kMark + "a"}));
  EXPECT_EQ(tok->decode(tok->encode("<|u|> a")), "<|u|> a");
  EXPECT_EQ(tok->decode({1, id_of(v, "a"), 2}), "<s>a</s>");  // control tokens decode to their text
  EXPECT_THROW(tok->decode({static_cast<int32_t>(v.tokens.size())}), edgetrain::Error);
  EXPECT_THROW(tok->decode({-1}), edgetrain::Error);
  // Without a space prefix nothing is added or dropped.
  v.add_space_prefix = 0;
  auto plain = make_gguf_tokenizer(v, "t");
  EXPECT_EQ(plain->encode("a a"), ids_of(v, {"a", kMark + "a"}));
  EXPECT_EQ(plain->decode(ids_of(v, {kMark + "a"})), " a");
  // A space whose '▁' has no token falls back to the byte 0x20.
  GgufVocab no_mark = spm_vocab({{"a", -1}});
  auto nm = make_gguf_tokenizer(no_mark, "t");
  EXPECT_EQ(nm->encode("a a"), (std::vector<int32_t>{byte_id(' '), id_of(no_mark, "a"), byte_id(' '), id_of(no_mark, "a")}));
  EXPECT_EQ(nm->decode(nm->encode("a a")), "a a");
  EXPECT_EQ(nm->decode(nm->encode(" a")), " a");
}

TEST(GgufTokenizer, RoundTripsRandomBytes) {
  using edgetrain::make_gguf_tokenizer;
  GgufVocab v = spm_vocab({{kMark, -1}, {"a", -1}, {"b", -1}, {"\xC3\xA9", -1}, {kMark + "a", -0.5f}, {"ab", -0.7f},
                           {kMark + "ab", -0.3f}, {"ba", -0.9f}, {kMark + kMark, -2}, {"\xC3\xA9" "a", -0.4f}},
                          {{"<|u|>", 4}, {"<x>", 3}});
  std::mt19937 rng(5);
  const std::vector<std::string> parts = {"a", "b", " ", "  ", "\xC3\xA9", kMark, "<|u|>", "<x>", "\n", "\xFF",
                                          "\xC3", "\xE2\x96", "z"};
  // The last two rounds add "b▁": a token with '▁' after a character, so no longer encoded word by word.
  int round = 0;
  for (int prefix : {-1, 0, 1, 1, 0}) {
    if (round++ == 3) {
      v.tokens.push_back("b" + kMark);
      v.scores.push_back(-0.2f);
      v.token_types.push_back(1);
    }
    v.add_space_prefix = prefix;
    auto tok = make_gguf_tokenizer(v, "t");
    for (int i = 0; i < 300; ++i) {
      std::string s = random_byte_string(rng, rng() % 40);
      if (i % 2) {
        s.clear();
        for (int k = rng() % 30; k > 0; --k) s += parts[rng() % parts.size()];
      }
      const auto ids = tok->encode(s);
      for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok->vocab_size());
      for (int32_t id : ids) ASSERT_NE(id, 1) << "control token produced";
      ASSERT_EQ(tok->decode(ids), s) << "prefix " << prefix << ", case " << i;
      // Chunks split after "\n" + non-space, later chunks as continuations: the same ids.
      const size_t cut = s.find("\na");
      if (cut != std::string::npos) {
        auto a = tok->encode(s.substr(0, cut + 1)), b = tok->encode_continuation(s.substr(cut + 1));
        a.insert(a.end(), b.begin(), b.end());
        EXPECT_EQ(a, ids) << "case " << i;
      }
    }
  }
}

TEST(GgufTokenizer, ByteTokenizerExportIsTheByteTokenizer) {
  // The 256-token "llama" vocabulary save_gguf writes for the byte tokenizer: encode is the identity on bytes.
  auto bytes = edgetrain::make_byte_tokenizer();
  const GgufVocab v = bytes->gguf_vocab();
  ASSERT_EQ(v.tokens.size(), 256u);
  EXPECT_EQ(v.model, "llama");
  EXPECT_EQ(v.tokens[' '], kMark);
  EXPECT_EQ(v.tokens['A'], "A");
  EXPECT_EQ(v.tokens['\n'], "<0x0A>");
  EXPECT_EQ(v.tokens[0xE9], "<0xE9>");
  auto tok = edgetrain::make_gguf_tokenizer(v, "t");
  std::mt19937 rng(9);
  for (int i = 0; i < 200; ++i) {
    std::string s = random_byte_string(rng, rng() % 100) + (i % 2 ? " a  b" + kMark + "\xC3\xA9" : "");
    EXPECT_EQ(tok->encode(s), bytes->encode(s)) << "case " << i;
    EXPECT_EQ(tok->decode(tok->encode(s)), s);
  }
}

TEST(GgufTokenizer, Gpt2FromGgufMatchesGpt2Files) {
  REQUIRE_GPT2();
  const GgufVocab v = gpt2_files_as_gguf();
  std::vector<std::string> warnings;
  auto tok = edgetrain::make_gguf_tokenizer(v, "gpt2-as-gguf", &warnings);
  EXPECT_TRUE(warnings.empty());
  const Tokenizer& ref = gpt2();
  EXPECT_EQ(tok->vocab_size(), ref.vocab_size());
  EXPECT_EQ(tok->eot(), ref.eot());
  EXPECT_EQ(tok->name().rfind("gguf-gpt2-", 0), 0u);
  for (const Gpt2Case& c : load_gpt2_cases()) EXPECT_EQ(tok->encode(c.text), c.ids) << "gpt2_cases.tsv:" << c.line;
  const std::string kjv_path = std::string(EDGETRAIN_SOURCE_DIR) + "/.deps/data/kjv.txt";
  std::string sample = fs::exists(kjv_path) ? slurp(kjv_path).substr(0, 200000) : std::string();
  std::mt19937 rng(3);
  sample += " na\xC3\xAFve \xE6\x97\xA5  \t\n's 12 <|endoftext|>" + random_byte_string(rng, 500);
  const auto ids = tok->encode(sample);
  EXPECT_EQ(ids, ref.encode(sample));
  EXPECT_EQ(tok->decode(ids), sample);
  EXPECT_EQ(tok->decode({50256}), "<|endoftext|>");
  // GPT-2's own export (gguf_vocab) is the same vocabulary.
  const GgufVocab exported = ref.gguf_vocab();
  EXPECT_EQ(exported.tokens, v.tokens);
  EXPECT_EQ(exported.merges, v.merges);
  EXPECT_EQ(exported.token_types, v.token_types);
  EXPECT_EQ(exported.eos, 50256);
  // Another pre-tokenizer is used as the file says (no warning), and it cuts words differently: Llama 3's
  // regex takes digits in threes and contractions in upper case.
  GgufVocab llama3ish = v;
  llama3ish.pre = "llama-bpe";
  warnings.clear();
  auto llama3 = edgetrain::make_gguf_tokenizer(llama3ish, "x.gguf", &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_NE(llama3->encode("YOU'RE 123456"), tok->encode("YOU'RE 123456"));
  EXPECT_EQ(llama3->decode(llama3->encode(sample)), sample);
}

TEST(GgufTokenizer, Gpt2MergeOrderIsTheHeapOrder) {
  // A tiny byte-level vocabulary: every byte (GPT-2 alphabet), then "ab", "bc", "abc". Merges: b c, a b,
  // a bc. "abc": b c (rank 0) first, then a bc -> one token.
  GgufVocab v;
  v.model = "gpt2";
  v.pre = "gpt-2";
  auto gpt2_symbol = [](int b) {
    // GPT-2's alphabet: printable bytes stand for themselves, the others map to U+0100.. in order.
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    int cp = b;
    if (!printable) {
      int k = 0;
      for (int x = 0; x < b; ++x)
        k += !((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE);
      cp = 256 + k;
    }
    std::string s;
    if (cp < 0x80) s += static_cast<char>(cp);
    else s += static_cast<char>(0xC0 | (cp >> 6)), s += static_cast<char>(0x80 | (cp & 0x3F));
    return s;
  };
  for (int b = 0; b < 256; ++b) v.tokens.push_back(gpt2_symbol(b));
  for (const char* t : {"ab", "bc", "abc", "<eos>"}) v.tokens.push_back(t);
  v.token_types.assign(v.tokens.size(), 1);
  v.token_types.back() = 3;
  v.eos = static_cast<int64_t>(v.tokens.size()) - 1;
  v.merges = {"b c", "a b", "a bc"};
  auto tok = edgetrain::make_gguf_tokenizer(v, "t");
  EXPECT_EQ(tok->encode("abc"), (std::vector<int32_t>{258}));
  EXPECT_EQ(tok->encode("ab"), (std::vector<int32_t>{256}));
  EXPECT_EQ(tok->encode("ab abc"), (std::vector<int32_t>{256, ' ', 258}));  // " abc": no merge with the space
  EXPECT_EQ(tok->eot(), 259);
  EXPECT_EQ(tok->encode("<eos>"), (std::vector<int32_t>{'<', 'e', 'o', 's', '>'}));
  v.merges = {"a b", "b c", "a bc"};  // a b first: "abc" -> ab c, and "ab c" is no merge
  EXPECT_EQ(edgetrain::make_gguf_tokenizer(v, "t")->encode("abc"), (std::vector<int32_t>{256, 'c'}));
  // A merge that makes a token from a missing one, a merge with one part, a repeated merge, a merge into a
  // control token, a vocabulary without some byte: clear errors naming the key and index.
  GgufVocab bad = v;
  bad.merges = {"a b", "a zz"};
  EXPECT_ERROR_HAS(edgetrain::make_gguf_tokenizer(bad, "m.gguf"), "m.gguf", "tokenizer.ggml.merges[1]", "\"zz\"",
                   "is not a token");
  bad.merges = {"ab"};
  EXPECT_ERROR_HAS(edgetrain::make_gguf_tokenizer(bad, "m.gguf"), "tokenizer.ggml.merges[0]", "two tokens");
  bad.merges = {"a b", "a b"};
  EXPECT_ERROR_HAS(edgetrain::make_gguf_tokenizer(bad, "m.gguf"), "tokenizer.ggml.merges[1]", "twice");
  bad.merges = {"a c"};
  EXPECT_ERROR_HAS(edgetrain::make_gguf_tokenizer(bad, "m.gguf"), "merged", "\"ac\"", "not a token");
  bad = v;
  bad.tokens.push_back("<e");
  bad.tokens.push_back("os>");
  bad.token_types.push_back(1);
  bad.token_types.push_back(1);
  bad.merges = {"<e os>"};
  EXPECT_ERROR_HAS(edgetrain::make_gguf_tokenizer(bad, "m.gguf"), "\"<eos>\"", "not a normal token");
  bad = v;
  bad.tokens['q'] = "qq";
  EXPECT_ERROR_HAS(edgetrain::make_gguf_tokenizer(bad, "m.gguf"), "m.gguf", "no normal token for the byte 0x71");
}

TEST(GgufTokenizer, MalformedVocabulariesAreRejected) {
  using edgetrain::make_gguf_tokenizer;
  const GgufVocab good = spm_vocab({{kMark, -1}, {"a", -1}});
  EXPECT_NO_THROW(make_gguf_tokenizer(good, "v.gguf"));
  GgufVocab v = good;
  v.model = "";
  EXPECT_ERROR_HAS(make_gguf_tokenizer(v, "v.gguf"), "file v.gguf", "tokenizer.ggml.model");
  v.model = "bert";
  EXPECT_ERROR_HAS(make_gguf_tokenizer(v, "v.gguf"), "tokenizer.ggml.model 'bert' is not supported");
  v = good;
  v.tokens.clear(), v.scores.clear(), v.token_types.clear();
  v.bos = v.eos = v.unk = -1;
  EXPECT_ERROR_HAS(make_gguf_tokenizer(v, "v.gguf"), "tokenizer.ggml.tokens is missing or empty");
  v = good;
  v.scores.pop_back();
  EXPECT_ERROR_HAS(make_gguf_tokenizer(v, "v.gguf"), "tokenizer.ggml.scores has 260 entries", "261");
  v = good;
  v.token_types.push_back(1);
  EXPECT_ERROR_HAS(make_gguf_tokenizer(v, "v.gguf"), "tokenizer.ggml.token_type has 262 entries");
  v = good;
  v.token_types[100] = 9;
  EXPECT_ERROR_HAS(make_gguf_tokenizer(v, "v.gguf"), "tokenizer.ggml.token_type[100] = 9");
  v = good;
  v.eos = 261;
  EXPECT_ERROR_HAS(make_gguf_tokenizer(v, "v.gguf"), "tokenizer.ggml.eos_token_id = 261", "[0, 261)");
  v = good;
  v.bos = -7;
  EXPECT_ERROR_HAS(make_gguf_tokenizer(v, "v.gguf"), "tokenizer.ggml.bos_token_id = -7");
  v = good;
  v.tokens[260] = "<0x41>";  // a second token with the text of id 68
  EXPECT_ERROR_HAS(make_gguf_tokenizer(v, "v.gguf"), "tokenizer.ggml.tokens[260]", "repeats tokenizer.ggml.tokens[68]");
  v = good;
  v.tokens[3 + 0x41] = "<0xZZ>";
  EXPECT_ERROR_HAS(make_gguf_tokenizer(v, "v.gguf"), "tokenizer.ggml.tokens[68]", "type 6 (byte)", "<0xNN>");
  v = good;
  v.scores[259] = std::nanf("");
  EXPECT_ERROR_HAS(make_gguf_tokenizer(v, "v.gguf"), "tokenizer.ggml.scores[259] is NaN");
  // A vocabulary without some byte token cannot encode every input: rejected when loaded.
  v = good;
  v.token_types[3 + 0xE9] = 5;  // <0xE9> unused
  EXPECT_ERROR_HAS(make_gguf_tokenizer(v, "v.gguf"), "file v.gguf", "no byte token <0xE9>", "all 256");
  v = good;
  v.token_types[3 + 'q'] = 5;  // 'q' has no normal token either
  v.token_types[3 + 'r'] = 5;
  EXPECT_ERROR_HAS(make_gguf_tokenizer(v, "v.gguf"), "<0x71>", "2 bytes lack one");
  v.tokens.push_back("q");  // ... but a normal "q" token serves for the byte 'q'
  v.scores.push_back(0);
  v.token_types.push_back(1);
  EXPECT_ERROR_HAS(make_gguf_tokenizer(v, "v.gguf"), "<0x72>");
}

TEST(GgufTokenizer, FactoryAndCheckpointSpecs) {
  EXPECT_EQ(edgetrain::checkpoint_tokenizer_spec("", "/x/c.safetensors"), "bytes");
  EXPECT_EQ(edgetrain::checkpoint_tokenizer_spec("gpt2", "/x/c.safetensors"), "gpt2");
  const fs::path dir = fs::temp_directory_path() / ("edgetrain_tokspec_" + std::to_string(::getpid()));
  fs::create_directories(dir / "moved");
  std::ofstream(dir / "moved" / "tokenizer.gguf") << "GGUF";
  // A recorded GGUF file that is gone is looked for beside the checkpoint.
  EXPECT_EQ(edgetrain::checkpoint_tokenizer_spec("/old/run/tokenizer.gguf", (dir / "moved" / "c.safetensors").string()),
            (dir / "moved" / "tokenizer.gguf").string());
  EXPECT_EQ(edgetrain::checkpoint_tokenizer_spec("/old/run/other.gguf", (dir / "moved" / "c.safetensors").string()),
            "/old/run/other.gguf");
  EXPECT_TRUE(edgetrain::is_gguf_file((dir / "moved" / "tokenizer.gguf").string()));
  EXPECT_FALSE(edgetrain::is_gguf_file(dir.string()));
  EXPECT_ERROR_HAS(edgetrain::make_tokenizer((dir / "moved" / "tokenizer.gguf").string()), "tokenizer.gguf");
  fs::remove_all(dir);
}

TEST(GgufTokenizer, SpmKjvRoundTripChunksAndSpeed) {
  const std::string path = std::string(EDGETRAIN_SOURCE_DIR) + "/.deps/data/kjv.txt";
  if (!fs::exists(path)) GTEST_SKIP() << path << " missing (run scripts/setup.sh)";
  const std::string kjv = slurp(path);
  // A SentencePiece-like vocabulary: the substrings (2..8 bytes) of the 800 most frequent '▁'-words with
  // seeded random scores, so that the order of merges matters everywhere.
  std::map<std::string, int> freq;
  std::string word;
  for (char ch : kjv.substr(0, 1 << 20)) {
    if (ch == ' ' || ch == '\n') {
      if (!word.empty()) ++freq[word];
      word.clear();
    } else {
      word.push_back(ch);
    }
  }
  std::vector<std::pair<int, std::string>> top;
  for (const auto& [w, n] : freq) top.push_back({-n, w});
  std::sort(top.begin(), top.end());
  std::vector<std::pair<std::string, float>> normal = {{kMark, -40}};
  std::set<std::string> seen = {kMark};
  std::mt19937 rng(42);
  for (size_t i = 0; i < top.size() && i < 800; ++i) {
    const std::string w = kMark + top[i].second;
    for (size_t a = 0; a < w.size(); ++a)
      for (size_t n = 2; a + n <= w.size() && n <= 8; ++n) {
        const std::string sub = w.substr(a, n);
        const bool cuts_mark = (a > 0 && a < kMark.size()) || (a < kMark.size() && a + n < kMark.size());
        if (!cuts_mark && seen.insert(sub).second)
          normal.push_back({sub, -std::uniform_real_distribution<float>(0, 30)(rng)});
      }
  }
  auto tok = edgetrain::make_gguf_tokenizer(spm_vocab(normal), "kjv-vocab");
  const auto t0 = std::chrono::steady_clock::now();
  const auto ids = tok->encode(kjv);
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "[ info ] KJV " << kjv.size() / 1e6 << " MB -> " << ids.size() << " tokens (" << tok->vocab_size()
            << "-token SentencePiece vocabulary): " << kjv.size() / 1e6 / sec << " MB/s\n";
  EXPECT_LT(ids.size(), kjv.size() / 2);
  EXPECT_EQ(tok->decode(ids), kjv);
  // The token cache encodes in chunks cut where is_chunk_boundary says: the same ids.
  std::vector<int32_t> chunked;
  for (size_t pos = 0; pos < kjv.size();) {
    size_t end = std::min(kjv.size(), pos + 300000);
    while (end < kjv.size() && !edgetrain::is_chunk_boundary(kjv, end)) ++end;
    const auto part = pos == 0 ? tok->encode(kjv.substr(pos, end - pos)) : tok->encode_continuation(kjv.substr(pos, end - pos));
    chunked.insert(chunked.end(), part.begin(), part.end());
    pos = end;
  }
  EXPECT_TRUE(chunked == ids);
}

}  // namespace
}  // namespace edgetrain::test
