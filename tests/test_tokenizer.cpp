// Tests of the byte and GPT-2 tokenizers: GPT-2 ids against reference ids made by an independent
// implementation (tests/data/gpt2_cases.tsv), round trips, invalid UTF-8, load errors, speed on KJV; the
// pre-tokenizer's ASCII classes against the Unicode tables, and the dependency-path lookup. The tokenizers
// of GGUF vocabularies: test_tokenizer_gguf.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "edgetrain/error.h"
#include "edgetrain/interop.h"
#include "edgetrain/paths.h"
#include "edgetrain/tokenizer.h"
#include "harness/cli_child.h"
#include "harness/gpt2_files.h"
#include "text/unicode.h"

namespace fs = std::filesystem;

namespace edgetrain::test {
namespace {

TEST(ByteTokenizer, RoundTripsEveryByte) {
  auto tok = edgetrain::make_tokenizer("bytes");
  EXPECT_EQ(tok->name(), "bytes");
  EXPECT_EQ(tok->vocab_size(), 256);
  EXPECT_EQ(tok->eot(), -1);
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const auto ids = tok->encode(all);
  ASSERT_EQ(ids.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ids[b], b);
  EXPECT_EQ(tok->decode(ids), all);
  std::mt19937 rng(7);
  for (int i = 0; i < 50; ++i) {
    const std::string s = random_byte_string(rng, rng() % 300);
    EXPECT_EQ(tok->decode(tok->encode(s)), s);
  }
  EXPECT_TRUE(tok->encode("").empty());
  EXPECT_THROW(tok->decode({65, 256}), edgetrain::Error);
  EXPECT_THROW(tok->decode({-1}), edgetrain::Error);
}

// The pre-tokenizer classifies ASCII with an inline function: it must agree with the Unicode tables.
TEST(Gpt2Tokenizer, AsciiClassesAgreeWithUnicodeTables) {
  int letters = 0, numbers = 0, spaces = 0;
  for (uint32_t c = 0; c < 128; ++c) {
    const auto cls = edgetrain::text::classify(c);
    EXPECT_EQ(edgetrain::text::ascii_class(static_cast<unsigned char>(c)), cls) << "code point " << c;
    letters += cls == edgetrain::text::kLetter, numbers += cls == edgetrain::text::kNumber;
    spaces += cls == edgetrain::text::kSpace;
  }
  EXPECT_EQ(letters, 52);
  EXPECT_EQ(numbers, 10);
  EXPECT_EQ(spaces, 6);  // \t \n \v \f \r and ' '
  EXPECT_EQ(edgetrain::text::classify(0x00E9), edgetrain::text::kLetter);  // é
  EXPECT_EQ(edgetrain::text::classify(0x0663), edgetrain::text::kNumber);  // Arabic-Indic three
  EXPECT_EQ(edgetrain::text::classify(0x3000), edgetrain::text::kSpace);   // ideographic space
  EXPECT_EQ(edgetrain::text::classify(0x2581), edgetrain::text::kOther);   // '▁'
}

// One lookup finds installed dependencies (GPT-2's files, Dawn, the corpus): $EDGETRAIN_DEPS first when the
// file is there, then the folder configured at build time.
TEST(Tokenizer, DependencyPathsHaveOneLookup) {
  const char* old = std::getenv("EDGETRAIN_DEPS");
  const std::string saved = old ? old : "";
  const fs::path dir = fs::temp_directory_path() / ("edgetrain_deps_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  ::setenv("EDGETRAIN_DEPS", dir.c_str(), 1);
  const auto c = edgetrain::deps_candidates("gpt2");
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0], (dir / "gpt2").string());
  EXPECT_NE(c[1], c[0]);  // the build's .deps
  // Not in $EDGETRAIN_DEPS: the build's folder when it has one, else the first candidate (for messages).
  EXPECT_EQ(edgetrain::default_gpt2_dir(), fs::exists(c[1]) ? c[1] : c[0]);
  fs::create_directories(dir / "gpt2");
  EXPECT_EQ(edgetrain::default_gpt2_dir(), (dir / "gpt2").string());
  EXPECT_EQ(edgetrain::deps_path("gpt2"), (dir / "gpt2").string());
  ::setenv("EDGETRAIN_DEPS", "", 1);
  EXPECT_EQ(edgetrain::deps_candidates("gpt2"), std::vector<std::string>{c[1]});
  if (old) ::setenv("EDGETRAIN_DEPS", saved.c_str(), 1);
  else ::unsetenv("EDGETRAIN_DEPS");
  fs::remove_all(dir);
}

TEST(Gpt2Tokenizer, Basics) {
  REQUIRE_GPT2();
  const Tokenizer& tok = gpt2();
  EXPECT_EQ(tok.name(), "gpt2");
  EXPECT_EQ(tok.vocab_size(), 50257);
  EXPECT_EQ(tok.eot(), 50256);
  EXPECT_EQ(tok.decode({tok.eot()}), "<|endoftext|>");
  // The special token is not parsed from text.
  const auto ids = tok.encode("<|endoftext|>");
  EXPECT_GT(ids.size(), 1u);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), tok.eot()), 0);
  EXPECT_EQ(tok.encode("Hello world"), (std::vector<int32_t>{15496, 995}));
  EXPECT_TRUE(tok.encode("").empty());
  EXPECT_THROW(tok.decode({50257}), edgetrain::Error);
  EXPECT_THROW(tok.decode({-3}), edgetrain::Error);
}

TEST(Gpt2Tokenizer, MatchesReferenceIds) {
  REQUIRE_GPT2();
  const Tokenizer& tok = gpt2();
  const auto cases = load_gpt2_cases();
  ASSERT_GE(cases.size(), 250u) << "tests/data/gpt2_cases.tsv lost cases";
  int mismatches = 0;
  for (const Gpt2Case& c : cases) {
    const auto ids = tok.encode(c.text);
    if (ids != c.ids && ++mismatches <= 20) {
      ADD_FAILURE() << "gpt2_cases.tsv:" << c.line << " " << nlohmann::json(c.text).dump()
                    << ": got " << testing::PrintToString(ids) << ", want " << testing::PrintToString(c.ids);
    }
    EXPECT_EQ(tok.decode(c.ids), c.text) << "gpt2_cases.tsv:" << c.line;
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(Gpt2Tokenizer, ConcurrentEncodeAgrees) {
  REQUIRE_GPT2();
  const Tokenizer& tok = gpt2();
  const auto cases = load_gpt2_cases();
  std::vector<int> bad(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 3; ++rep)
        for (size_t i = t; i < cases.size(); i += 1 + t) bad[t] += tok.encode(cases[i].text) != cases[i].ids;
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(bad[t], 0) << "thread " << t;
}

TEST(Gpt2Tokenizer, InvalidUtf8RoundTrips) {
  REQUIRE_GPT2();
  const Tokenizer& tok = gpt2();
  // Each invalid byte is one punctuation-like character: it does not join letters.
  auto cat = [](std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  EXPECT_EQ(tok.encode("caf\xE9"), cat(tok.encode("caf"), tok.encode("\xE9")));
  EXPECT_EQ(tok.encode("\xE9t\xE9"), cat(cat(tok.encode("\xE9"), tok.encode("t")), tok.encode("\xE9")));
  EXPECT_EQ(tok.encode("\xFF").size(), 1u);
  EXPECT_EQ(tok.decode(tok.encode("\xFF")), "\xFF");
  const std::vector<std::string> nasty = {
      "\x80", "\xC3", "abc\xC3", "\xE6\x97", "\xF0\x9F\x98", "\xC0\x80", "\xE0\x80\x80", "\xED\xA0\x80 x",
      "\xF4\x90\x80\x80", "\xF8\x88\x80\x80\x80", "\xFE\xFF", std::string("a\0b", 3), "\xC3\xA9\xA9", " \x80 \x80",
  };
  for (const auto& s : nasty) {
    const auto ids = tok.encode(s);
    EXPECT_EQ(tok.decode(ids), s);
    for (int32_t id : ids) EXPECT_TRUE(id >= 0 && id < tok.vocab_size());
  }
  std::mt19937 rng(11);
  for (int i = 0; i < 300; ++i) {
    std::string s = random_byte_string(rng, rng() % 200);
    // Mix in valid multi-byte characters and spaces so that all pre-tokenizer paths are hit.
    if (i % 2) s += " na\xC3\xAFve \xE6\x97\xA5  \t\n's 12";
    EXPECT_EQ(tok.decode(tok.encode(s)), s) << "random case " << i;
  }
}

TEST(Gpt2Tokenizer, LongWordsAreNotQuadratic) {
  REQUIRE_GPT2();
  const Tokenizer& tok = gpt2();
  for (const std::string& s : {std::string(200000, 'a'), std::string(100000, ' ') + "x", std::string(100000, '=')}) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto ids = tok.encode(s);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(tok.decode(ids), s);
    std::cout << "[ info ] one word of " << s.size() << " bytes -> " << ids.size() << " tokens in " << sec
              << " s\n";
  }
}

TEST(Gpt2Tokenizer, KjvRoundTripAndSpeed) {
  REQUIRE_GPT2();
  const std::string path = std::string(EDGETRAIN_SOURCE_DIR) + "/.deps/data/kjv.txt";
  if (!fs::exists(path)) GTEST_SKIP() << path << " missing (run scripts/setup.sh)";
  const std::string kjv = slurp(path);
  ASSERT_GT(kjv.size(), 10000u);
  const Tokenizer& tok = gpt2();
  size_t n = 10000;
  while (n < kjv.size() && (static_cast<unsigned char>(kjv[n]) & 0xC0) == 0x80) ++n;  // whole characters
  const std::string head = kjv.substr(0, n);
  const auto ids = tok.encode(head);
  EXPECT_EQ(tok.decode(ids), head);
  EXPECT_GT(ids.size(), n / 8);
  EXPECT_LT(ids.size(), n / 2);

  // Speed over the whole text (reported, not asserted): a fresh tokenizer for the cold-cache pass.
  auto fresh = edgetrain::load_gpt2_tokenizer(edgetrain::default_gpt2_dir());
  for (const char* pass : {"cold cache", "warm cache"}) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto all = fresh->encode(kjv);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "[ info ] KJV " << kjv.size() / 1e6 << " MB -> " << all.size() << " tokens, " << pass << ": "
              << kjv.size() / 1e6 / sec << " MB/s\n";
    EXPECT_EQ(fresh->decode(all), kjv);
  }
}

TEST(Gpt2Tokenizer, BadFilesGiveClearErrors) {
  REQUIRE_GPT2();
  const std::string src = edgetrain::default_gpt2_dir();
  const fs::path dir = fs::temp_directory_path() / ("edgetrain_tok_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name, std::ios::binary) << text;
  };
  auto error_of = [&]() -> std::string {
    try {
      edgetrain::load_gpt2_tokenizer(dir.string());
    } catch (const edgetrain::Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  auto expect_error = [&](const std::vector<std::string>& needles, const char* what) {
    const std::string msg = error_of();
    for (const auto& needle : needles)
      EXPECT_NE(msg.find(needle), std::string::npos) << what << ": message \"" << msg << "\" lacks \"" << needle << "\"";
  };
  const std::string encoder = slurp(src + "/encoder.json"), merges = slurp(src + "/vocab.bpe");

  write("vocab.bpe", merges);
  expect_error({"encoder.json", "cannot open"}, "missing encoder.json");
  write("encoder.json", encoder.substr(0, encoder.size() / 2));
  expect_error({"encoder.json", "not valid JSON"}, "truncated encoder.json");
  write("encoder.json", "[1, 2, 3]");
  expect_error({"encoder.json", "JSON object"}, "encoder.json not an object");
  write("encoder.json", R"({"a": 0, "b": 0})");
  expect_error({"encoder.json", "used twice"}, "duplicate id");
  write("encoder.json", R"({"a": 0, "b": 1})");
  expect_error({"encoder.json", "single byte"}, "bytes missing");

  write("encoder.json", encoder);
  fs::remove(dir / "vocab.bpe");
  expect_error({"vocab.bpe", "cannot open"}, "missing vocab.bpe");
  write("vocab.bpe", "#version: 0.2\nĠ t\nĠ a b\n");
  expect_error({"vocab.bpe:3", "two symbols"}, "three symbols on a line");
  write("vocab.bpe", "#version: 0.2\nĠ t\nzzzq zzzr\n");
  expect_error({"vocab.bpe:3", "zzzq", "not a token"}, "unknown symbol");
  write("vocab.bpe", "#version: 0.2\nĠt he\nĠ t\n");
  expect_error({"vocab.bpe:2", "earlier merge"}, "merge order");
  write("vocab.bpe", "");
  expect_error({"vocab.bpe", "no merges"}, "empty vocab.bpe");

  write("vocab.bpe", merges);
  EXPECT_EQ(edgetrain::make_tokenizer(dir.string())->encode("Hello world"), (std::vector<int32_t>{15496, 995}));
  fs::remove_all(dir);
}

TEST(Tokenizer, FactoryRejectsUnknownSpecs) {
  EXPECT_EQ(edgetrain::make_tokenizer("bytes")->name(), "bytes");
  try {
    edgetrain::make_tokenizer("gpt3-nonexistent");
    ADD_FAILURE() << "no error";
  } catch (const edgetrain::Error& e) {
    EXPECT_NE(std::string(e.what()).find("gpt3-nonexistent"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace edgetrain::test
