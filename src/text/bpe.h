// Byte-level BPE (GPT-2's algorithm): the tables a tokenizer runs on, GPT-2's byte alphabet in which
// encoder.json, vocab.bpe and "gpt2" GGUF vocabularies write token text, and the two ways to get tables:
// GPT-2's files (gpt2_files.cpp) and a checked GGUF vocabulary (bpe.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "edgetrain/tokenizer.h"
#include "text/pretokenize.h"
#include "text/vocab.h"

namespace edgetrain::text {

struct BpeMerge {
  int32_t rank;
  int32_t id;  // the token the pair becomes
};

inline uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

struct BpeTables {
  std::string name;
  std::vector<std::string> id_bytes;                  // what decode() gives for each id
  std::array<int32_t, 256> byte_id{};                 // the token of each single byte
  std::vector<std::array<int32_t, 2>> merge_pairs;    // by rank
  std::unordered_map<uint64_t, BpeMerge> merges;      // pair_key(left, right) -> rank and result
  int32_t eot = -1, bos = -1;
  PreTokenizer pre = PreTokenizer::kGpt2;
  // With takes_whole_words(pre): the normal token of each byte string, so that a word that is a token is
  // that token whatever the merges would make of it.
  StringMap<int32_t> whole_words;
  UserDefinedSplitter user_defined;
  UserDefinedSplitter special;  // control, unknown and user-defined tokens: what encode_special matches
  std::optional<GgufVocab> gguf;                      // the GGUF vocabulary the tables came from
};

// GPT-2's reversible byte <-> printable-unicode mapping: a symbol (UTF-8 text in the byte alphabet) to the
// raw bytes it stands for; false if it is not valid UTF-8 or has a character outside the alphabet.
bool symbol_to_bytes(const std::string& sym, std::string& out);
// The byte alphabet's text for raw bytes (the inverse of symbol_to_bytes).
std::string bytes_to_symbol(std::string_view bytes);

// The tokenizer over finished tables (pre-tokenization by t.pre, then merges by rank).
std::unique_ptr<Tokenizer> make_bpe_tokenizer(BpeTables t);
// The tables of a "gpt2" GGUF vocabulary: every byte needs a normal token, every merge must name normal
// tokens of the byte alphabet, tokenizer.ggml.pre must be one of known_pre_tokenizer_names(); when it is
// absent, "default" is used with a warning, as llama.cpp does.
std::unique_ptr<Tokenizer> make_gguf_bpe(const CheckedVocab& c, std::vector<std::string>* warnings);

}  // namespace edgetrain::text
