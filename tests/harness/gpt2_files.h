// The GPT-2 files (scripts/setup.sh puts them in .deps/gpt2) as the tokenizer tests use them: whether they are
// there, one shared tokenizer made from them (loading takes a while), the reference ids made by an
// independent implementation (tests/data/gpt2_cases.tsv), and random byte strings to round-trip.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "edgetrain/interop.h"
#include "edgetrain/paths.h"
#include "edgetrain/tokenizer.h"

namespace edgetrain::test {

inline bool gpt2_files_present() {
  const std::string dir = default_gpt2_dir();
  return std::filesystem::exists(dir + "/encoder.json") && std::filesystem::exists(dir + "/vocab.bpe");
}

// One tokenizer for all tests of a process.
inline const Tokenizer& gpt2() {
  static const std::unique_ptr<Tokenizer> tok = make_tokenizer("gpt2");
  return *tok;
}

#define REQUIRE_GPT2()                                                                                         \
  do {                                                                                                         \
    if (!edgetrain::test::gpt2_files_present())                                                                \
      GTEST_SKIP() << "GPT-2 files not in " << edgetrain::default_gpt2_dir() << " (run scripts/setup.sh)";     \
  } while (0)

// A line of tests/data/gpt2_cases.tsv: a JSON string, a tab, its ids.
struct Gpt2Case {
  std::string text;
  std::vector<int32_t> ids;
  int line;
};

inline std::vector<Gpt2Case> load_gpt2_cases() {
  const std::string path = std::string(EDGETRAIN_SOURCE_DIR) + "/tests/data/gpt2_cases.tsv";
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "cannot open " << path;
  std::vector<Gpt2Case> cases;
  std::string line;
  int line_no = 0;
  while (std::getline(f, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    const size_t tab = line.find('\t');
    EXPECT_NE(tab, std::string::npos) << path << ":" << line_no;
    if (tab == std::string::npos) continue;
    Gpt2Case c;
    c.text = nlohmann::json::parse(line.substr(0, tab)).get<std::string>();
    std::istringstream ids(line.substr(tab + 1));
    for (int32_t id; ids >> id;) c.ids.push_back(id);
    c.line = line_no;
    cases.push_back(std::move(c));
  }
  return cases;
}

// n random bytes (any value, so mostly invalid UTF-8).
inline std::string random_byte_string(std::mt19937& rng, size_t n) {
  std::string s(n, '\0');
  for (auto& ch : s) ch = static_cast<char>(rng() & 0xFF);
  return s;
}

}  // namespace edgetrain::test
