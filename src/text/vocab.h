// What the GGUF-vocabulary tokenizers (byte-level BPE over a "gpt2" vocabulary, SentencePiece over a "llama"
// one) share: token types, byte tokens, the checks every vocabulary passes before either is built, the
// tokenizer's name (a hash of the vocabulary), and the splitting of text at user-defined tokens.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "edgetrain/tokenizer.h"

namespace edgetrain::text {

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum TokenType : int32_t {
  kUndefinedToken = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByteToken = 6,
};

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581 '▁', SentencePiece's stand-in for ' '

// "<0xNN>" (hex digits in either case) -> NN; -1 for anything else.
int byte_token_value(std::string_view t);
// NN -> "<0xNN>" (upper-case hex).
std::string byte_token_text(int b);
// A token's text for messages: quoted, control bytes escaped, long ones shortened.
std::string shown(std::string_view t);

// Hash for maps keyed by std::string that are looked up by std::string_view (C++20 heterogeneous lookup).
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

// A GGUF vocabulary after the checks both kinds share (model, counts, ids, flags, token types, no repeated
// text): every token's type (inferred when token_type is absent) and the id of every token text.
struct CheckedVocab {
  const GgufVocab& v;
  std::string src;  // "file <path>": how errors name the vocabulary
  std::vector<int32_t> types;
  StringMap<int32_t> text_id;
  int32_t n = 0;
};
// Throws Error naming `source` and the key on the first problem.
CheckedVocab check_vocab(const GgufVocab& v, const std::string& source);

// "gguf-<model>-<16 hex digits of a 64-bit FNV-1a of the whole vocabulary>": the tokenizer's name(), which
// keeps token caches of different vocabularies apart.
std::string gguf_tokenizer_name(const GgufVocab& v);

// Cuts a text at the user-defined tokens of a GGUF vocabulary before tokenization, as llama.cpp does: the
// longest tokens first (equal lengths: lower id first), each at its occurrences from left to right in what
// is still text. Control, unknown and unused tokens are never matched.
class UserDefinedSplitter {
 public:
  void add(const std::string& text, int32_t id) {
    if (!text.empty()) tokens_.emplace_back(text, id);
  }
  bool has(int32_t id) const {
    return std::any_of(tokens_.begin(), tokens_.end(), [id](const auto& t) { return t.second == id; });
  }
  void finish() {
    std::stable_sort(tokens_.begin(), tokens_.end(),
                     [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  }
  bool empty() const { return tokens_.empty(); }
  // on_text(begin, end) for each piece of text (never empty), on_token(id) for each token, in text order.
  template <typename OnText, typename OnToken>
  void split(std::string_view text, OnText&& on_text, OnToken&& on_token) const {
    struct Piece {
      size_t begin, end;
      int32_t id;  // >= 0: a user-defined token
    };
    std::vector<Piece> pieces, next;
    if (!text.empty()) pieces.push_back({0, text.size(), -1});
    for (const auto& [t, id] : tokens_) {
      next.clear();
      for (const Piece& p : pieces) {
        if (p.id >= 0) {
          next.push_back(p);
          continue;
        }
        const std::string_view span = text.substr(p.begin, p.end - p.begin);
        size_t pos = 0;
        for (size_t hit; (hit = span.find(t, pos)) != std::string_view::npos; pos = hit + t.size()) {
          if (hit > pos) next.push_back({p.begin + pos, p.begin + hit, -1});
          next.push_back({p.begin + hit, p.begin + hit + t.size(), id});
        }
        if (pos < span.size()) next.push_back({p.begin + pos, p.end, -1});
      }
      pieces.swap(next);
    }
    for (const Piece& p : pieces) {
      if (p.id >= 0) on_token(p.id);
      else on_text(p.begin, p.end);
    }
  }

 private:
  std::vector<std::pair<std::string, int32_t>> tokens_;
};

}  // namespace edgetrain::text
