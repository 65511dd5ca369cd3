// Tests of the pre-tokenizers (src/text/pretokenize.h): the pieces of hand-picked strings, worked out from
// each regex by hand; which tokenizer.ggml.pre values are known and what an unknown or absent one does;
// and byte-level BPE over each pre-tokenizer against llama.cpp (node-llama-cpp 3.21.1, the consumer of the
// files we write) on the same GGUF vocabulary, for 600 texts each: KJV windows, code, CJK, emoji, digit
// runs, contractions in any case, whitespace runs, newlines, other scripts and random code points; the
// pieces themselves against llama.cpp's pre-tokenizer function (20000 texts each) and the Unicode classes
// against llama.cpp's for every code point.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "edgetrain/backends.h"
#include "edgetrain/error.h"
#include "edgetrain/interop.h"
#include "edgetrain/model.h"
#include "edgetrain/paths.h"
#include "edgetrain/tokenizer.h"
#include "harness/ggml_ref.h"
#include "harness/llamacpp.h"
#include "io/gguf.h"
#include "harness/pretokenize_texts.h"
#include "harness/temp_files.h"
#include "text/bpe.h"
#include "text/pretokenize.h"
#include "text/unicode.h"

namespace edgetrain::test {
namespace {

using text::PreTokenizer;

std::vector<std::string> pieces(PreTokenizer p, const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  auto emit = [&](size_t b, size_t e) {
    EXPECT_EQ(b, at) << "pieces must tile the text";
    EXPECT_LT(b, e) << "empty piece";
    out.push_back(s.substr(b, e - b));
    at = e;
  };
  text::pre_tokenize(p, s, emit);
  EXPECT_EQ(at, s.size()) << "pieces must cover the text";
  return out;
}

using Pieces = std::vector<std::string>;

TEST(PreTokenizer, Gpt2Pieces) {
  const PreTokenizer p = PreTokenizer::kGpt2;
  EXPECT_EQ(pieces(p, "Hello world"), (Pieces{"Hello", " world"}));
  // Contractions are lower case only: "'T" is other, then a letter.
  EXPECT_EQ(pieces(p, "I'm DON'T you're"), (Pieces{"I", "'m", " DON", "'", "T", " you", "'re"}));
  // \s+(?!\S) leaves the last space to the word; a lone '\n' before a letter is \s+.
  EXPECT_EQ(pieces(p, "abc  def"), (Pieces{"abc", " ", " def"}));
  EXPECT_EQ(pieces(p, "x\n\ny"), (Pieces{"x", "\n", "\n", "y"}));
  EXPECT_EQ(pieces(p, "end  "), (Pieces{"end", "  "}));
  EXPECT_EQ(pieces(p, "2024 12345"), (Pieces{"2024", " 12345"}));
  EXPECT_EQ(pieces(p, "a,b!? c"), (Pieces{"a", ",", "b", "!?", " c"}));
  EXPECT_EQ(pieces(p, "caf\xC3\xA9 \xE4\xB8\x96\xE7\x95\x8C \xD9\xA1\xD9\xA2"),  // café 世界 ١٢
            (Pieces{"caf\xC3\xA9", " \xE4\xB8\x96\xE7\x95\x8C", " \xD9\xA1\xD9\xA2"}));
  EXPECT_EQ(pieces(p, "\xF0\x9F\x98\x80\xF0\x9F\x98\x80 x"), (Pieces{"\xF0\x9F\x98\x80\xF0\x9F\x98\x80", " x"}));
}

TEST(PreTokenizer, Llama3Pieces) {
  const PreTokenizer p = PreTokenizer::kLlama3;
  EXPECT_EQ(pieces(p, "Hello world"), (Pieces{"Hello", " world"}));
  // Contractions in any case.
  EXPECT_EQ(pieces(p, "I'M DON'T YOU'RE we'Ll"), (Pieces{"I", "'M", " DON", "'T", " YOU", "'RE", " we", "'Ll"}));
  EXPECT_EQ(pieces(p, "'sup 'hello x'yz"), (Pieces{"'s", "up", " '", "hello", " x", "'yz"}));
  // Numbers in runs of up to three, never with the space before them.
  EXPECT_EQ(pieces(p, "1234567"), (Pieces{"123", "456", "7"}));
  EXPECT_EQ(pieces(p, " 12345"), (Pieces{" ", "123", "45"}));
  EXPECT_EQ(pieces(p, "abc12"), (Pieces{"abc", "12"}));
  // Any one character but \r \n and numbers may lead letters; " (" is " ?[^\s\p{L}\p{N}]+".
  EXPECT_EQ(pieces(p, "\thello (world)"), (Pieces{"\thello", " (", "world", ")"}));
  EXPECT_EQ(pieces(p, "(world)\nx"), (Pieces{"(world", ")\n", "x"}));
  EXPECT_EQ(pieces(p, " ((x"), (Pieces{" ((", "x"}));
  // Newlines: \s*[\r\n]+ up to the last of them, and after punctuation [\r\n]*.
  EXPECT_EQ(pieces(p, "x\n\ny"), (Pieces{"x", "\n\n", "y"}));
  EXPECT_EQ(pieces(p, "a \n b"), (Pieces{"a", " \n", " b"}));
  EXPECT_EQ(pieces(p, "a.\r\n\nb"), (Pieces{"a", ".\r\n\n", "b"}));
  EXPECT_EQ(pieces(p, "  hello"), (Pieces{" ", " hello"}));
  EXPECT_EQ(pieces(p, "end  "), (Pieces{"end", "  "}));
  EXPECT_EQ(pieces(p, "\xE4\xB8\x96\xE7\x95\x8C\xEF\xBC\x81"),  // 世界！ (a fullwidth '!': punctuation)
            (Pieces{"\xE4\xB8\x96\xE7\x95\x8C", "\xEF\xBC\x81"}));
}

TEST(PreTokenizer, Qwen2Pieces) {
  const PreTokenizer p = PreTokenizer::kQwen2;
  EXPECT_EQ(pieces(p, "12345"), (Pieces{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(pieces(p, "x 12"), (Pieces{"x", " ", "1", "2"}));
  EXPECT_EQ(pieces(p, "I'M here"), (Pieces{"I", "'M", " here"}));
  EXPECT_EQ(pieces(p, "x\n\n y"), (Pieces{"x", "\n\n", " y"}));
}

TEST(PreTokenizer, SmollmPieces) {
  const PreTokenizer p = PreTokenizer::kSmollm;
  // Every number character alone, GPT-2's regex between them.
  EXPECT_EQ(pieces(p, "abc123 x4"), (Pieces{"abc", "1", "2", "3", " x", "4"}));
  EXPECT_EQ(pieces(p, " 2024!"), (Pieces{" ", "2", "0", "2", "4", "!"}));
  EXPECT_EQ(pieces(p, "I'M it's"), (Pieces{"I", "'", "M", " it", "'s"}));
}

TEST(PreTokenizer, DefaultPieces) {
  const PreTokenizer p = PreTokenizer::kDefault;
  // Punctuation and $+<=>^~| runs first (so contractions fall apart), GPT-2's regex on the pieces, then
  // number runs, then triples of ASCII digits from the left.
  EXPECT_EQ(pieces(p, "Hello, world! 12345 it's $x+1"),
            (Pieces{"Hello", ",", " world", "!", " ", "123", "45", " it", "'", "s", " ", "$", "x", "+", "1"}));
  EXPECT_EQ(pieces(p, "a<=b||c`d"), (Pieces{"a", "<=", "b", "||", "c", "`", "d"}));
  EXPECT_EQ(pieces(p, "x1234567y"), (Pieces{"x", "123", "456", "7", "y"}));
  EXPECT_EQ(pieces(p, "12\xD9\xA3" "456"), (Pieces{"12\xD9\xA3", "456"}));  // ٣ is \p{N}, not [0-9]
}

// Any byte string tiles, invalid UTF-8 included, for every pre-tokenizer.
TEST(PreTokenizer, AnyBytesTile) {
  std::mt19937 rng(11);
  for (PreTokenizer p : {PreTokenizer::kGpt2, PreTokenizer::kLlama3, PreTokenizer::kQwen2, PreTokenizer::kSmollm,
                         PreTokenizer::kDefault})
    for (int i = 0; i < 200; ++i) {
      std::string s(rng() % 64, '\0');
      for (auto& c : s) c = static_cast<char>(rng() % 3 == 0 ? " \n1a'."[rng() % 6] : rng() & 0xFF);
      pieces(p, s);
    }
}

// A "gpt2" vocabulary with tokenizer.ggml.pre `pre`: the bytes, merges learned on text like the test texts,
// and whole words that no merge makes (only llama-bpe, which takes a word that is a token whole, uses them).
GgufVocab bpe_vocab(const std::string& pre) {
  static const GgufVocab learned = [] {
    GgufVocab v = learned_bpe_vocab(training_text(), 1000);
    for (const char* w : {" beginning", " earth", "And", "123", " the", "hello", "\xE4\xB8\x96\xE7\x95\x8C", "'S",
                          ".\n\n", "  ", " 2024", "ing", "\n\n"}) {
      const std::string sym = text::bytes_to_symbol(w);
      if (std::find(v.tokens.begin(), v.tokens.end(), sym) != v.tokens.end()) continue;
      v.tokens.push_back(sym);
      v.token_types.push_back(1);
    }
    return v;
  }();
  GgufVocab v = learned;
  v.pre = pre;
  return v;
}

// A small random fp32 model with `tok`'s vocabulary, as a GGUF file llama.cpp loads.
void write_model(const std::string& path, const Tokenizer& tok) {
  auto be = make_cpu_backend();
  ModelConfig c = ModelConfig::preset("tiny");
  c.vocab = tok.vocab_size(), c.dim = 64, c.n_layers = 1, c.n_heads = 2, c.ffn_dim = 128, c.mode = TrainMode::fp32;
  Model m(*be, c);
  m.init(1);
  save_gguf(path, m, GgufType::F32, &tok);
}

TEST(PreTokenizer, KnownNamesUnknownIsAnError) {
  EXPECT_EQ(text::known_pre_tokenizer_names(), "default, gpt-2, llama-bpe, llama3, llama-v3, qwen2, smollm");
  GgufVocab v = bpe_vocab("llama-bpe");
  EXPECT_NO_THROW(make_gguf_tokenizer(v, "test"));
  for (const char* bad : {"gpt2", "Llama-bpe", "qwen35", "tekken"}) {
    v.pre = bad;
    try {
      make_gguf_tokenizer(v, "test");
      ADD_FAILURE() << "pre '" << bad << "' was accepted";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("tokenizer.ggml.pre"), std::string::npos) << msg;
      EXPECT_NE(msg.find(bad), std::string::npos) << msg;
      EXPECT_NE(msg.find(text::known_pre_tokenizer_names()), std::string::npos) << msg;
    }
  }
  // Absent: llama.cpp's "default", with a warning.
  v.pre = "";
  std::vector<std::string> warnings;
  auto tok = make_gguf_tokenizer(v, "test", &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("'default'"), std::string::npos) << warnings[0];
  v.pre = "default";
  EXPECT_EQ(make_gguf_tokenizer(v, "test")->encode("x, 12345!"), tok->encode("x, 12345!"));
}

// llama-bpe takes a word that is a token whole; the others merge it.
TEST(PreTokenizer, Llama3TakesWholeWords) {
  const std::string text = "In the beginning";
  auto llama3 = make_gguf_tokenizer(bpe_vocab("llama-bpe"), "test");
  auto gpt2 = make_gguf_tokenizer(bpe_vocab("gpt-2"), "test");
  const auto ids = llama3->encode(text), merged = gpt2->encode(text);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(llama3->decode({ids.back()}), " beginning");
  EXPECT_NE(gpt2->decode({merged.back()}), " beginning");
  EXPECT_EQ(llama3->decode(ids), text);
}

// The corpus cache encodes long texts in chunks cut where is_chunk_boundary says (src/train/data.cpp),
// relying on every pre-tokenizer cutting there too.
TEST(PreTokenizer, EveryPreCutsAtChunkBoundaries) {
  EXPECT_TRUE(is_chunk_boundary("a\nb", 2));
  EXPECT_TRUE(is_chunk_boundary("\xE4\xB8\x96\n\xE7\x95\x8C", 4));  // 世\n界
  EXPECT_FALSE(is_chunk_boundary("a\nb", 1));
  EXPECT_FALSE(is_chunk_boundary("a\nb", 3));
  EXPECT_FALSE(is_chunk_boundary("a\n\nb", 3));
  EXPECT_FALSE(is_chunk_boundary("a \nb", 3));
  EXPECT_FALSE(is_chunk_boundary("a\n b", 2));
  EXPECT_FALSE(is_chunk_boundary("a\n\xC2\xA0\xC2\xA0x", 2));  // U+00A0 after
  EXPECT_FALSE(is_chunk_boundary("a\xE3\x80\x80\nb", 5));       // U+3000 before
  const std::vector<std::string> texts = comparison_texts(400, 5);
  std::string all;
  for (const std::string& t : texts) all += t + (t.size() % 3 == 0 ? "\n" : "");
  for (const char* name : {"gpt-2", "llama-bpe", "qwen2", "smollm", "default"}) {
    auto tok = make_gguf_tokenizer(bpe_vocab(name), "test");
    const std::vector<int32_t> whole = tok->encode(all);
    std::vector<int32_t> chunked;
    size_t pos = 0, cuts = 0;
    for (size_t i = 1; i <= all.size(); ++i) {
      if (i < all.size() && !is_chunk_boundary(all, i)) continue;
      const std::string chunk = all.substr(pos, i - pos);
      const auto ids = pos == 0 ? tok->encode(chunk) : tok->encode_continuation(chunk);
      chunked.insert(chunked.end(), ids.begin(), ids.end());
      pos = i, ++cuts;
    }
    EXPECT_GT(cuts, 100u);
    EXPECT_EQ(chunked, whole) << name;
  }
}

std::string escaped(const std::string& s) { return nlohmann::json(s).dump(); }

// Byte-level BPE over `pre` against llama.cpp on a GGUF model file carrying the vocabulary.
void expect_llamacpp_tokenizes_alike(const std::string& pre) {
  SKIP_WITHOUT_LLAMACPP();
  const GgufVocab v = bpe_vocab(pre);
  auto tok = make_gguf_tokenizer(v, "test");
  const std::string path = temp_path("pretokenize", pre + ".gguf");
  write_model(path, *tok);
  const std::vector<std::string> texts = comparison_texts(600, 29);
  std::string reference;
  const auto ref = run_llama_tokenize(path, texts, &reference);
  size_t differ = 0, tokens = 0, bytes = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto ours = tok->encode(texts[i]);
    tokens += ours.size(), bytes += texts[i].size();
    EXPECT_EQ(tok->decode(ours), texts[i]);
    if (ours == ref[i]) continue;
    if (++differ > 3) continue;
    std::ostringstream a, b, w;
    for (int32_t id : ref[i]) a << id << ' ';
    for (int32_t id : ours) b << id << ' ';
    for (const auto& piece : pieces(*text::pre_tokenizer_named(pre), texts[i])) w << escaped(piece) << ' ';
    ADD_FAILURE() << pre << ": text " << i << " " << escaped(texts[i]) << "\n  llama.cpp: " << a.str()
                  << "\n  edgetrain: " << b.str() << "\n  our pieces: " << w.str();
  }
  EXPECT_EQ(differ, 0u) << pre << ": " << differ << " of " << texts.size() << " texts tokenize differently";
  std::cout << "[ info ] " << pre << ": " << texts.size() << " texts, " << bytes << " bytes, " << tokens
            << " tokens, " << texts.size() - differ << " identical to " << reference << "\n";
}

TEST(PreTokenizerLlamaCpp, Gpt2) { expect_llamacpp_tokenizes_alike("gpt-2"); }
TEST(PreTokenizerLlamaCpp, LlamaBpe) { expect_llamacpp_tokenizes_alike("llama-bpe"); }
TEST(PreTokenizerLlamaCpp, Qwen2) { expect_llamacpp_tokenizes_alike("qwen2"); }
TEST(PreTokenizerLlamaCpp, Smollm) { expect_llamacpp_tokenizes_alike("smollm"); }
TEST(PreTokenizerLlamaCpp, Default) { expect_llamacpp_tokenizes_alike("default"); }

// llama.cpp's regexes for each pre-tokenizer (src/llama-vocab.cpp), as its unicode_regex_split takes them.
std::vector<std::string> llamacpp_regexes(PreTokenizer p) {
  const std::string gpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
  auto llama3 = [](const std::string& digits) {
    return "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" + digits +
           "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  };
  switch (p) {
    case PreTokenizer::kGpt2: return {gpt2};
    case PreTokenizer::kLlama3: return {llama3("\\p{N}{1,3}")};
    case PreTokenizer::kQwen2: return {llama3("\\p{N}")};
    case PreTokenizer::kSmollm: return {"\\p{N}", gpt2};
    case PreTokenizer::kDefault: return {"[\\p{P}\\$\\+<=>\\^~\\|]+", gpt2, "\\p{N}+", "[0-9][0-9][0-9]"};
  }
  return {};
}

// The pieces themselves against llama.cpp's pre-tokenizer (its unicode_regex_split, called in libllama), on
// 20000 texts per pre-tokenizer: no vocabulary in between, so every boundary counts.
TEST(PreTokenizerLlamaCpp, PiecesMatchLlamaCppSplit) {
  SKIP_WITHOUT_LLAMACPP();
  const GgmlRef& ref = ggml_ref();
  const std::vector<std::string> texts = comparison_texts(20000, 101);
  for (const char* name : {"gpt-2", "llama-bpe", "qwen2", "smollm", "default"}) {
    const PreTokenizer p = *text::pre_tokenizer_named(name);
    const std::vector<std::string> regexes = llamacpp_regexes(p);
    size_t differ = 0, count = 0;
    for (const std::string& t : texts) {
      const Pieces ours = pieces(p, t), theirs = ref.regex_split(t, regexes);
      count += ours.size();
      if (ours == theirs || ++differ > 3) continue;
      std::ostringstream a, b;
      for (const auto& x : theirs) a << escaped(x) << ' ';
      for (const auto& x : ours) b << escaped(x) << ' ';
      ADD_FAILURE() << name << ": " << escaped(t) << "\n  llama.cpp: " << a.str() << "\n  edgetrain: " << b.str();
    }
    EXPECT_EQ(differ, 0u) << name << ": " << differ << " of " << texts.size() << " texts split differently";
    std::cout << "[ info ] " << name << ": " << texts.size() << " texts, " << count << " pieces, "
              << texts.size() - differ << " split as llama.cpp does\n";
  }
}

// The character classes against llama.cpp's for every code point: \s, \p{L}, \p{N} (classify) and \p{P}.
TEST(PreTokenizerLlamaCpp, UnicodeClassesMatchLlamaCpp) {
  SKIP_WITHOUT_LLAMACPP();
  const GgmlRef& ref = ggml_ref();
  size_t differ = 0;
  for (uint32_t cp = 0; cp < 0x110000; ++cp) {
    const uint16_t f = ref.cpt_flags(cp);
    const text::CharClass want =
        f & 0x100 ? text::kSpace : f & 0x4 ? text::kLetter : f & 0x2 ? text::kNumber : text::kOther;
    const bool punct = (f & 0x20) != 0;
    if (text::classify(cp) == want && text::is_punctuation(cp) == punct) continue;
    if (++differ <= 5)
      ADD_FAILURE() << "U+" << std::hex << cp << std::dec << ": llama.cpp flags 0x" << std::hex << f << std::dec
                    << ", edgetrain class " << static_cast<int>(text::classify(cp)) << ", punctuation "
                    << text::is_punctuation(cp);
  }
  EXPECT_EQ(differ, 0u) << differ << " code points are classified differently";
}

// "gpt2" is not a value llama.cpp knows either: both refuse a file that has it.
TEST(PreTokenizerLlamaCpp, UnknownPreIsRefusedByBoth) {
  SKIP_WITHOUT_LLAMACPP();
  const std::string good = temp_path("pretokenize", "good.gguf"), bad = temp_path("pretokenize", "gpt2.gguf");
  write_model(good, *make_gguf_tokenizer(bpe_vocab("gpt-2"), "test"));
  ASSERT_EQ(run_llama_tokenize(good, {"x"}).size(), 1u);
  // The same file with tokenizer.ggml.pre "gpt2".
  const gguf::File f = gguf::File::open(good);
  gguf::Writer w;
  for (const auto& [k, v] : f.metadata()) w.add_kv(k, k == "tokenizer.ggml.pre" ? gguf::Value::str("gpt2") : v);
  for (const gguf::TensorInfo& t : f.tensors())
    w.add_tensor(t.name, t.ne, t.type, std::vector<uint8_t>(f.data(t), f.data(t) + t.nbytes));
  w.save(bad);
  EXPECT_EQ(read_gguf_vocab(bad).pre, "gpt2");
  EXPECT_THROW(load_gguf_tokenizer(bad), Error);
  try {
    run_llama_tokenize(bad, {"x"});
    ADD_FAILURE() << "llama.cpp loaded a file with tokenizer.ggml.pre 'gpt2'";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown pre-tokenizer type: 'gpt2'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace edgetrain::test
