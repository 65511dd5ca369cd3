// Tokenizers for training: the byte tokenizer; byte-level BPE with a hand-written version of GPT-2's
// pre-tokenization regex, whose tables come from GPT-2's files (encoder.json + vocab.bpe) or from a GGUF
// vocabulary of model "gpt2"; SentencePiece-style BPE for a GGUF vocabulary of model "llama"; and the
// factory that picks one by name.
#include "edgetrain/tokenizer.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <queue>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "edgetrain/error.h"

namespace edgetrain {
namespace {

// ---------------------------------------------------------------------------------------------------------
// Unicode classification for the pre-tokenizer: \p{L}, \p{N}, \s and everything else.

struct UnicodeRange {
  uint32_t first, last;
  uint8_t cls;
};
#include "tokenizer_unicode.inc"

enum CharClass : uint8_t { kOther = 0, kLetter = 1, kNumber = 2, kSpace = 3 };

// Unicode White_Space (PropList.txt), which is what \s means for GPT-2's regex.
bool is_white_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

CharClass classify_slow(uint32_t cp) {
  if (is_white_space(cp)) return kSpace;
  const UnicodeRange* begin = std::begin(kUnicodeRanges);
  const UnicodeRange* end = std::end(kUnicodeRanges);
  const UnicodeRange* it =
      std::upper_bound(begin, end, cp, [](uint32_t v, const UnicodeRange& r) { return v < r.first; });
  if (it == begin) return kOther;
  --it;
  return cp <= it->last ? static_cast<CharClass>(it->cls) : kOther;
}

const std::array<CharClass, 128>& ascii_classes() {
  static const std::array<CharClass, 128> table = [] {
    std::array<CharClass, 128> t{};
    for (uint32_t c = 0; c < 128; ++c) t[c] = classify_slow(c);
    return t;
  }();
  return table;
}

// One character of the input: its class and how many bytes it spans. A byte that does not start a valid
// UTF-8 sequence (stray continuation byte, overlong form, surrogate, beyond U+10FFFF, truncated sequence)
// is a character of its own, of class kOther, so that every byte string can be tokenized.
struct Char {
  CharClass cls;
  uint32_t len;
};

// The valid UTF-8 sequence of 1-4 bytes starting at s[i]: its code point and length. False for a byte that
// does not start one (stray continuation byte, overlong form, surrogate, beyond U+10FFFF, truncated).
bool decode_utf8(const unsigned char* s, size_t n, size_t i, uint32_t& cp, uint32_t& len) {
  const unsigned char b0 = s[i];
  uint32_t min_second = 0x80, max_second = 0xBF;
  if (b0 < 0x80) {
    cp = b0, len = 1;
    return true;
  } else if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2, cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3, cp = b0 & 0x0F;
    if (b0 == 0xE0) min_second = 0xA0;  // overlong
    if (b0 == 0xED) max_second = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4, cp = b0 & 0x07;
    if (b0 == 0xF0) min_second = 0x90;  // overlong
    if (b0 == 0xF4) max_second = 0x8F;  // beyond U+10FFFF
  } else {
    return false;
  }
  if (i + len > n) return false;
  for (uint32_t k = 1; k < len; ++k) {
    const unsigned char b = s[i + k];
    const uint32_t lo = k == 1 ? min_second : 0x80, hi = k == 1 ? max_second : 0xBF;
    if (b < lo || b > hi) return false;
    cp = (cp << 6) | (b & 0x3F);
  }
  return true;
}

Char char_at(const unsigned char* s, size_t n, size_t i) {
  if (s[i] < 0x80) return {ascii_classes()[s[i]], 1};
  uint32_t cp = 0, len = 0;
  if (!decode_utf8(s, n, i, cp, len)) return {kOther, 1};
  return {classify_slow(cp), len};
}

// GPT-2's contractions 's 't 're 've 'm 'll 'd (lower case only): length of the one at s[i] == '\'', or 0.
size_t contraction_length(const unsigned char* s, size_t n, size_t i) {
  if (i + 1 >= n) return 0;
  const unsigned char a = s[i + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= n) return 0;
  const unsigned char b = s[i + 2];
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// Splits text the way GPT-2's regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// does, calling emit(begin, end) with byte offsets for each piece, in order; the pieces tile the text.
template <typename Emit>
void pre_tokenize(std::string_view text, Emit&& emit) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const size_t contraction = s[i] == '\'' ? contraction_length(s, n, i) : 0;
    size_t end = i + contraction;
    if (contraction == 0) {
      // " ?X+" where X is letters, numbers or other (not space): the optional leading ' ' is U+0020 only.
      Char first = char_at(s, n, i);
      size_t j = i;
      if (s[i] == ' ' && i + 1 < n) {
        const Char next = char_at(s, n, i + 1);
        if (next.cls != kSpace) first = next, j = i + 1;
      }
      if (first.cls != kSpace) {
        end = j + first.len;
        while (end < n) {
          const Char c = char_at(s, n, end);
          if (c.cls != first.cls) break;
          end += c.len;
        }
      } else {
        // A whitespace run. "\s+(?!\S)": followed by a non-space it gives up its last character (which then
        // starts the next piece, e.g. " word"); a single whitespace character before a non-space is "\s+".
        size_t k = i, last = i;
        while (k < n) {
          const Char c = char_at(s, n, k);
          if (c.cls != kSpace) break;
          last = k;
          k += c.len;
        }
        end = (k == n || last == i) ? k : last;
      }
    }
    emit(i, end);
    i = end;
  }
}

// ---------------------------------------------------------------------------------------------------------
// GPT-2's reversible byte <-> printable-unicode mapping used by encoder.json and vocab.bpe: the bytes
// '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF stand for themselves, the other 68 bytes, in increasing order,
// for U+0100, U+0101, ... (so ' ' is 'Ġ' U+0120 and '\n' is 'Ċ' U+010A).

struct ByteAlphabet {
  std::array<uint32_t, 256> byte_to_cp{};
  std::array<int16_t, 512> cp_to_byte{};
  ByteAlphabet() {
    cp_to_byte.fill(-1);
    uint32_t extra = 0;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      byte_to_cp[b] = printable ? b : 256 + extra++;
      cp_to_byte[byte_to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet a;
  return a;
}

// Turns a symbol of encoder.json / vocab.bpe (UTF-8 text in the byte alphabet) into the raw bytes it stands
// for; returns false if it is not valid UTF-8 or has a character outside the alphabet.
bool symbol_to_bytes(const std::string& sym, std::string& out) {
  out.clear();
  const auto* s = reinterpret_cast<const unsigned char*>(sym.data());
  const size_t n = sym.size();
  for (size_t i = 0; i < n;) {
    uint32_t cp = 0;
    if (s[i] < 0x80) {
      cp = s[i], i += 1;
    } else if ((s[i] & 0xE0) == 0xC0 && i + 1 < n && (s[i + 1] & 0xC0) == 0x80) {
      cp = ((s[i] & 0x1Fu) << 6) | (s[i + 1] & 0x3Fu), i += 2;
    } else {
      return false;  // the alphabet ends at U+0143: one or two bytes of UTF-8 suffice
    }
    const int b = cp < 512 ? byte_alphabet().cp_to_byte[cp] : -1;
    if (b < 0) return false;
    out.push_back(static_cast<char>(b));
  }
  return true;
}

// The byte alphabet's text for raw bytes (the inverse of symbol_to_bytes).
std::string bytes_to_symbol(std::string_view bytes) {
  std::string out;
  for (unsigned char b : bytes) {
    const uint32_t cp = byte_alphabet().byte_to_cp[b];
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  return out;
}

std::string read_file(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  ET_CHECK_KIND(ErrorKind::io, f.good(), "GPT-2 tokenizer: cannot open ", what, " '", path,
                "' (missing? scripts/setup.sh installs it)");
  std::ostringstream ss;
  ss << f.rdbuf();
  ET_CHECK_KIND(ErrorKind::io, !f.bad(), "GPT-2 tokenizer: cannot read ", what, " '", path, "'");
  return ss.str();
}

// Hash for maps keyed by std::string that are looked up by std::string_view (C++20 heterogeneous lookup).
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

// ---------------------------------------------------------------------------------------------------------
// Pieces shared by the GGUF tokenizers.

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
int byte_token_value(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  const int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::string byte_token_text(int b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "<0x%02X>", b);
  return buf;
}

// A token's text for messages: quoted, control bytes escaped, long ones shortened.
std::string shown(std::string_view t) {
  std::string out = "\"";
  for (size_t i = 0; i < t.size() && i < 48; ++i) {
    const unsigned char c = static_cast<unsigned char>(t[i]);
    if (c < 0x20 || c == 0x7F || c == '"' || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (t.size() > 48) out += "...";
  return out + "\"";
}

// 64-bit FNV-1a of a vocabulary: the part of a GGUF tokenizer's name that tells vocabularies apart.
class Fnv1a {
 public:
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ b[i]) * 0x100000001B3ull;
  }
  void str(std::string_view s) {
    const uint64_t n = s.size();
    bytes(&n, sizeof n);
    bytes(s.data(), s.size());
  }
  template <typename T>
  void value(T v) {
    bytes(&v, sizeof v);
  }
  std::string hex() const {
    char buf[20];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h_));
    return buf;
  }

 private:
  uint64_t h_ = 0xCBF29CE484222325ull;
};

std::string gguf_tokenizer_name(const GgufVocab& v) {
  Fnv1a h;
  h.str(v.model);
  h.str(v.pre);
  h.value<uint64_t>(v.tokens.size());
  for (const auto& t : v.tokens) h.str(t);
  h.value<uint64_t>(v.scores.size());
  for (float f : v.scores) h.value(f);
  h.value<uint64_t>(v.token_types.size());
  for (int32_t t : v.token_types) h.value(t);
  h.value<uint64_t>(v.merges.size());
  for (const auto& m : v.merges) h.str(m);
  for (int64_t id : {v.bos, v.eos, v.unk, v.pad}) h.value(id);
  for (int f : {v.add_bos, v.add_eos, v.add_space_prefix}) h.value(f);
  return "gguf-" + v.model + "-" + h.hex();
}

// Cuts a text at the user-defined tokens of a GGUF vocabulary before tokenization, as llama.cpp does: the
// longest tokens first (equal lengths: lower id first), each at its occurrences from left to right in what
// is still text. Control, unknown and unused tokens are never matched.
class UserDefinedSplitter {
 public:
  void add(const std::string& text, int32_t id) {
    if (!text.empty()) tokens_.emplace_back(text, id);
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

// ---------------------------------------------------------------------------------------------------------

class ByteTokenizer final : public Tokenizer {
 public:
  std::string name() const override { return "bytes"; }
  int64_t vocab_size() const override { return 256; }
  int32_t eot() const override { return -1; }
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string out(ids.size(), '\0');
    for (size_t i = 0; i < ids.size(); ++i) {
      ET_CHECK(ids[i] >= 0 && ids[i] < 256, "byte tokenizer decode: id ", ids[i], " at position ", i,
               " is outside [0, 256)");
      out[i] = static_cast<char>(ids[i]);
    }
    return out;
  }
  // A SentencePiece ("llama") vocabulary in which llama.cpp's tokenizer gives exactly our ids: no merges are
  // possible (no token is longer than one character), a space becomes '▁', which is the token of byte 0x20,
  // and every other character falls back to its bytes: printable ASCII to the character's own token,
  // everything else to <0xNN>. Without a space prefix or BOS, encode(text) is the text's bytes.
  GgufVocab gguf_vocab() const override {
    GgufVocab v;
    v.model = "llama";
    for (int b = 0; b < 256; ++b) {
      const bool printable = b > ' ' && b < 0x7F;
      v.tokens.push_back(b == ' ' ? std::string(kSpaceMark) : printable ? std::string(1, static_cast<char>(b))
                                                                          : byte_token_text(b));
      v.token_types.push_back(b == ' ' || printable ? kNormal : kByteToken);
      v.scores.push_back(0.0f);
    }
    v.add_bos = 0, v.add_eos = 0, v.add_space_prefix = 0;
    return v;
  }
};

// ---------------------------------------------------------------------------------------------------------
// Byte-level BPE (GPT-2's algorithm) over tables from GPT-2's files or from a GGUF vocabulary.

struct BpeMerge {
  int32_t rank;
  int32_t id;  // the token the pair becomes
};

uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

struct BpeTables {
  std::string name;
  std::vector<std::string> id_bytes;                  // what decode() gives for each id
  std::array<int32_t, 256> byte_id{};                 // the token of each single byte
  std::vector<std::array<int32_t, 2>> merge_pairs;    // by rank
  std::unordered_map<uint64_t, BpeMerge> merges;      // pair_key(left, right) -> rank and result
  int32_t eot = -1, bos = -1;
  UserDefinedSplitter user_defined;
  std::optional<GgufVocab> gguf;                      // the GGUF vocabulary the tables came from
};

class BpeTokenizer final : public Tokenizer {
 public:
  explicit BpeTokenizer(BpeTables t) : t_(std::move(t)) {}

  std::string name() const override { return t_.name; }
  int64_t vocab_size() const override { return static_cast<int64_t>(t_.id_bytes.size()); }
  int32_t eot() const override { return t_.eot; }
  int32_t bos() const override { return t_.bos; }

  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3 + 16);
    if (t_.user_defined.empty()) {
      encode_text(text, ids);
    } else {
      t_.user_defined.split(
          text, [&](size_t begin, size_t end) { encode_text(text.substr(begin, end - begin), ids); },
          [&](int32_t id) { ids.push_back(id); });
    }
    return ids;
  }

  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string out;
    out.reserve(ids.size() * 4);
    for (size_t i = 0; i < ids.size(); ++i) {
      ET_CHECK(ids[i] >= 0 && static_cast<size_t>(ids[i]) < t_.id_bytes.size(), t_.name, " tokenizer decode: id ",
               ids[i], " at position ", i, " is outside [0, ", t_.id_bytes.size(), ")");
      out += t_.id_bytes[ids[i]];
    }
    return out;
  }

  GgufVocab gguf_vocab() const override {
    if (t_.gguf) return *t_.gguf;
    GgufVocab v;
    v.model = "gpt2";
    v.pre = "gpt-2";
    for (size_t id = 0; id < t_.id_bytes.size(); ++id) {
      const bool special = static_cast<int32_t>(id) == t_.eot;
      v.tokens.push_back(special ? t_.id_bytes[id] : bytes_to_symbol(t_.id_bytes[id]));
      v.token_types.push_back(special ? kControl : kNormal);
    }
    for (const auto& [a, b] : t_.merge_pairs)
      v.merges.push_back(bytes_to_symbol(t_.id_bytes[a]) + " " + bytes_to_symbol(t_.id_bytes[b]));
    v.bos = t_.bos, v.eos = t_.eot;
    v.add_bos = 0;
    return v;
  }

 private:
  static constexpr size_t kMaxCachedWord = 64;
  static constexpr size_t kMaxCacheEntries = 1 << 18;

  void encode_text(std::string_view text, std::vector<int32_t>& ids) const {
    std::vector<int32_t> word_ids;
    pre_tokenize(text, [&](size_t begin, size_t end) {
      const std::string_view word = text.substr(begin, end - begin);
      if (word.size() == 1) {
        ids.push_back(t_.byte_id[static_cast<unsigned char>(word[0])]);
        return;
      }
      if (word.size() <= kMaxCachedWord) {
        std::lock_guard<std::mutex> lock(cache_mutex_);
        auto it = cache_.find(word);
        if (it != cache_.end()) {
          ids.insert(ids.end(), it->second.begin(), it->second.end());
          return;
        }
      }
      word_ids.clear();
      bpe(word, word_ids);
      ids.insert(ids.end(), word_ids.begin(), word_ids.end());
      if (word.size() <= kMaxCachedWord) {
        std::lock_guard<std::mutex> lock(cache_mutex_);
        if (cache_.size() >= kMaxCacheEntries) cache_.clear();
        cache_.emplace(std::string(word), word_ids);
      }
    });
  }

  const BpeMerge* find_merge(int32_t a, int32_t b) const {
    auto it = t_.merges.find(pair_key(a, b));
    return it == t_.merges.end() ? nullptr : &it->second;
  }

  // Byte-pair encoding of one pre-tokenized word: starting from single bytes, repeatedly merge the adjacent
  // pair of lowest rank (leftmost first among equal ranks) until no pair has a rank. Done with a heap
  // ordered by (rank, position) over a linked list, O(n log n) even for very long words. This is the
  // algorithm of llama.cpp and of Hugging Face tokenizers. OpenAI's bpe() instead merges all occurrences
  // of the best pair before looking again; for GPT-2's files load_merges() checks that a merge only uses
  // tokens made by earlier merges, with which every pair a merge creates ranks after the merge itself, so
  // the two orders perform the same merges.
  void bpe(std::string_view word, std::vector<int32_t>& out) const {
    const int32_t n = static_cast<int32_t>(word.size());
    std::vector<int32_t> sym(n), prev(n), next(n);
    for (int32_t i = 0; i < n; ++i) {
      sym[i] = t_.byte_id[static_cast<unsigned char>(word[i])];
      prev[i] = i - 1;
      next[i] = i + 1 < n ? i + 1 : -1;
    }
    struct Candidate {
      int32_t rank, left, right, id;
      bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
    };
    std::vector<Candidate> storage;
    storage.reserve(n);
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap(std::greater<Candidate>(),
                                                                                        std::move(storage));
    auto consider = [&](int32_t left) {
      if (left < 0) return;
      const int32_t right = next[left];
      if (right < 0) return;
      if (const BpeMerge* m = find_merge(sym[left], sym[right])) heap.push({m->rank, left, right, m->id});
    };
    for (int32_t i = 0; i + 1 < n; ++i) consider(i);
    while (!heap.empty()) {
      const Candidate c = heap.top();
      heap.pop();
      // Stale if either side was merged away or changed since the candidate was pushed.
      if (sym[c.left] < 0 || next[c.left] != c.right || sym[c.right] < 0) continue;
      const BpeMerge* m = find_merge(sym[c.left], sym[c.right]);
      if (m == nullptr || m->rank != c.rank) continue;
      sym[c.left] = c.id;
      sym[c.right] = -1;
      next[c.left] = next[c.right];
      if (next[c.right] >= 0) prev[next[c.right]] = c.left;
      consider(prev[c.left]);
      consider(c.left);
    }
    for (int32_t i = 0; i >= 0; i = next[i]) out.push_back(sym[i]);
  }

  BpeTables t_;
  // Cache of short words' ids, looked up by string_view without copying.
  mutable std::mutex cache_mutex_;
  mutable StringMap<std::vector<int32_t>> cache_;
};

// GPT-2's files: encoder.json (token text in the byte alphabet -> id) and vocab.bpe (merges by rank).
class Gpt2FileLoader {
 public:
  explicit Gpt2FileLoader(const std::string& dir) {
    t_.name = "gpt2";
    load_encoder(dir + "/encoder.json");
    load_merges(dir + "/vocab.bpe");
  }
  BpeTables take() { return std::move(t_); }

 private:
  void load_encoder(const std::string& path) {
    const std::string text = read_file(path, "encoder.json");
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      fail("GPT-2 tokenizer: '", path, "' is not valid JSON: ", e.what());
    }
    ET_CHECK(j.is_object() && !j.empty(), "GPT-2 tokenizer: '", path,
             "' must be a non-empty JSON object mapping token strings to ids");
    t_.id_bytes.assign(j.size(), std::string());
    std::vector<bool> seen(j.size(), false);
    std::string bytes;
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& key = it.key();
      ET_CHECK(it.value().is_number_integer(), "GPT-2 tokenizer: '", path, "': the id of token \"", key,
               "\" is not an integer");
      const int64_t id = it.value().get<int64_t>();
      ET_CHECK(id >= 0 && id < static_cast<int64_t>(j.size()), "GPT-2 tokenizer: '", path, "': token \"", key,
               "\" has id ", id, ", outside [0, ", j.size(), ") (ids must be 0..count-1)");
      ET_CHECK(!seen[id], "GPT-2 tokenizer: '", path, "': id ", id, " is used twice (again by \"", key, "\")");
      seen[id] = true;
      ET_CHECK(symbol_to_bytes(key, bytes), "GPT-2 tokenizer: '", path, "': token \"", key,
               "\" has a character outside GPT-2's byte alphabet");
      t_.id_bytes[id] = bytes;
      bytes_to_id_.emplace(bytes, static_cast<int32_t>(id));
      if (key == "<|endoftext|>") t_.eot = t_.bos = static_cast<int32_t>(id);
    }
    for (int b = 0; b < 256; ++b) {
      auto it = bytes_to_id_.find(std::string(1, static_cast<char>(b)));
      ET_CHECK(it != bytes_to_id_.end(), "GPT-2 tokenizer: '", path, "' has no token for the single byte ", b);
      t_.byte_id[b] = it->second;
    }
  }

  void load_merges(const std::string& path) {
    const std::string text = read_file(path, "vocab.bpe");
    struct Line {
      int32_t a, b, id;
      size_t line_no;
    };
    std::vector<Line> lines;
    std::istringstream in(text);
    std::string line, bytes;
    size_t line_no = 0;
    auto symbol_id = [&](const std::string& sym, size_t at) {
      ET_CHECK(symbol_to_bytes(sym, bytes), "GPT-2 tokenizer: ", path, ":", at, ": symbol \"", sym,
               "\" has a character outside GPT-2's byte alphabet");
      auto it = bytes_to_id_.find(bytes);
      ET_CHECK(it != bytes_to_id_.end(), "GPT-2 tokenizer: ", path, ":", at, ": symbol \"", sym,
               "\" is not a token of encoder.json");
      return it->second;
    };
    while (std::getline(in, line)) {
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty() || (line_no == 1 && line[0] == '#')) continue;  // "#version: 0.2"
      const size_t sp = line.find(' ');
      ET_CHECK(sp != std::string::npos && sp > 0 && sp + 1 < line.size() &&
                   line.find(' ', sp + 1) == std::string::npos,
               "GPT-2 tokenizer: ", path, ":", line_no, ": expected two symbols separated by one space, got \"",
               line, "\"");
      const std::string a = line.substr(0, sp), b = line.substr(sp + 1);
      lines.push_back({symbol_id(a, line_no), symbol_id(b, line_no), symbol_id(a + b, line_no), line_no});
    }
    ET_CHECK(!lines.empty(), "GPT-2 tokenizer: '", path, "' has no merges");
    // The last merge that makes each token; a merge may only use tokens that are bytes or made earlier.
    std::vector<int32_t> made_by(t_.id_bytes.size(), -1);
    for (size_t r = 0; r < lines.size(); ++r) made_by[lines[r].id] = static_cast<int32_t>(r);
    for (size_t r = 0; r < lines.size(); ++r) {
      const Line& l = lines[r];
      for (int32_t part : {l.a, l.b}) {
        ET_CHECK(t_.id_bytes[part].size() == 1 || (made_by[part] >= 0 && made_by[part] < static_cast<int32_t>(r)),
                 "GPT-2 tokenizer: ", path, ":", l.line_no, ": symbol of ", t_.id_bytes[part].size(),
                 " bytes is neither a single byte nor made by an earlier merge");
      }
      const bool fresh = t_.merges.emplace(pair_key(l.a, l.b), BpeMerge{static_cast<int32_t>(r), l.id}).second;
      ET_CHECK(fresh, "GPT-2 tokenizer: ", path, ":", l.line_no, ": the same merge appears twice");
      t_.merge_pairs.push_back({l.a, l.b});
    }
  }

  BpeTables t_;
  std::unordered_map<std::string, int32_t> bytes_to_id_;
};

// ---------------------------------------------------------------------------------------------------------
// GGUF vocabularies: the checks both kinds share, then "gpt2" (byte-level BPE) and "llama" (SentencePiece).

// A GGUF vocabulary after the common checks: every token's type (inferred when token_type is absent) and
// the id of every token text.
struct CheckedVocab {
  const GgufVocab& v;
  std::string src;  // "file <path>"
  std::vector<int32_t> types;
  StringMap<int32_t> text_id;
  int32_t n = 0;
};

CheckedVocab check_vocab(const GgufVocab& v, const std::string& source) {
  CheckedVocab c{v, "file " + source, {}, {}, 0};
  const std::string& src = c.src;
  ET_CHECK(!v.model.empty(), src, ": no tokenizer (metadata key 'tokenizer.ggml.model' is missing)");
  ET_CHECK(v.model == "gpt2" || v.model == "llama", src, ": tokenizer.ggml.model '", v.model,
           "' is not supported (edgetrain reads \"gpt2\", byte-level BPE, and \"llama\", SentencePiece)");
  ET_CHECK(!v.tokens.empty(), src, ": tokenizer.ggml.tokens is missing or empty");
  ET_CHECK(v.tokens.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()), src,
           ": tokenizer.ggml.tokens has ", v.tokens.size(), " entries, more than int32 ids can number");
  c.n = static_cast<int32_t>(v.tokens.size());
  ET_CHECK(v.scores.empty() || v.scores.size() == v.tokens.size(), src, ": tokenizer.ggml.scores has ",
           v.scores.size(), " entries but tokenizer.ggml.tokens has ", v.tokens.size());
  ET_CHECK(v.token_types.empty() || v.token_types.size() == v.tokens.size(), src, ": tokenizer.ggml.token_type has ",
           v.token_types.size(), " entries but tokenizer.ggml.tokens has ", v.tokens.size());
  const std::pair<const char*, int64_t> ids[] = {{"tokenizer.ggml.bos_token_id", v.bos},
                                                 {"tokenizer.ggml.eos_token_id", v.eos},
                                                 {"tokenizer.ggml.unknown_token_id", v.unk},
                                                 {"tokenizer.ggml.padding_token_id", v.pad}};
  for (const auto& [key, id] : ids)
    ET_CHECK(id >= -1 && id < c.n, src, ": ", key, " = ", id, " is outside the vocabulary [0, ", c.n, ")");
  const std::pair<const char*, int> flags[] = {{"tokenizer.ggml.add_bos_token", v.add_bos},
                                               {"tokenizer.ggml.add_eos_token", v.add_eos},
                                               {"tokenizer.ggml.add_space_prefix", v.add_space_prefix}};
  for (const auto& [key, f] : flags) ET_CHECK(f >= -1 && f <= 1, src, ": ", key, " must be a bool, got ", f);
  c.types.resize(v.tokens.size());
  c.text_id.reserve(v.tokens.size());
  for (int32_t id = 0; id < c.n; ++id) {
    const std::string& t = v.tokens[id];
    int32_t type = 0;
    if (!v.token_types.empty()) {
      type = v.token_types[id];
      ET_CHECK(type >= 0 && type <= kByteToken, src, ": tokenizer.ggml.token_type[", id, "] = ", type,
               " is not a token type (0 undefined, 1 normal, 2 unknown, 3 control, 4 user defined, 5 unused, 6 byte)");
    } else {
      // No types (old files): what llama.cpp's converters would have written.
      type = id == v.bos || id == v.eos ? kControl : id == v.unk ? kUnknown
             : v.model == "llama" && byte_token_value(t) >= 0 ? kByteToken : kNormal;
    }
    ET_CHECK(type != kByteToken || byte_token_value(t) >= 0, src, ": tokenizer.ggml.tokens[", id, "] = ", shown(t),
             " has token type 6 (byte) but is not of the form <0xNN>");
    c.types[id] = type;
    if (t.empty()) continue;  // never matched; llama.cpp renames such tokens
    auto [it, fresh] = c.text_id.emplace(t, id);
    ET_CHECK(fresh, src, ": tokenizer.ggml.tokens[", id, "] = ", shown(t), " repeats tokenizer.ggml.tokens[",
             it->second, "]");
  }
  return c;
}

std::unique_ptr<Tokenizer> make_gguf_bpe(const CheckedVocab& c, std::vector<std::string>* warnings) {
  const GgufVocab& v = c.v;
  const std::string& src = c.src;
  if (v.pre != "gpt-2" && warnings)
    warnings->push_back(src + ": tokenizer.ggml.pre is " + (v.pre.empty() ? std::string("absent") : "'" + v.pre + "'") +
                        "; edgetrain pre-tokenizes with GPT-2's regex, so word boundaries (and ids) may differ from"
                        " llama.cpp's for some text");
  BpeTables t;
  t.name = gguf_tokenizer_name(v);
  t.id_bytes.resize(v.tokens.size());
  std::vector<bool> matchable(v.tokens.size(), false);  // normal tokens of the byte alphabet: merges use them
  t.byte_id.fill(-1);
  std::string bytes;
  for (int32_t id = 0; id < c.n; ++id) {
    const std::string& text = v.tokens[id];
    const int32_t type = c.types[id];
    if (type == kNormal && symbol_to_bytes(text, bytes)) {
      t.id_bytes[id] = bytes;
      matchable[id] = true;
      if (bytes.size() == 1 && t.byte_id[static_cast<unsigned char>(bytes[0])] < 0)
        t.byte_id[static_cast<unsigned char>(bytes[0])] = id;
    } else if (type == kByteToken) {
      t.id_bytes[id] = std::string(1, static_cast<char>(byte_token_value(text)));
    } else {
      t.id_bytes[id] = text;  // control, user-defined, ...: their text as it is
      if (type == kUserDefined) t.user_defined.add(text, id);
    }
  }
  t.user_defined.finish();
  for (int b = 0; b < 256; ++b)
    ET_CHECK(t.byte_id[b] >= 0, src, ": tokenizer.ggml.tokens has no normal token for the byte 0x",
             byte_token_text(b).substr(3, 2), " (", shown(bytes_to_symbol(std::string(1, static_cast<char>(b)))),
             " in GPT-2's byte alphabet): byte-level BPE needs all 256");
  auto token_of = [&](const std::string& text, size_t r, const std::string& merge, const char* what) {
    auto it = c.text_id.find(text);
    ET_CHECK(it != c.text_id.end(), src, ": tokenizer.ggml.merges[", r, "] = ", shown(merge), ": ", what, " ",
             shown(text), " is not a token");
    ET_CHECK(matchable[it->second], src, ": tokenizer.ggml.merges[", r, "] = ", shown(merge), ": ", what, " ",
             shown(text), " (id ", it->second, ") is not a normal token of GPT-2's byte alphabet");
    return it->second;
  };
  for (size_t r = 0; r < v.merges.size(); ++r) {
    const std::string& m = v.merges[r];
    const size_t sp = m.find(' ');
    ET_CHECK(sp != std::string::npos && sp > 0 && sp + 1 < m.size() && m.find(' ', sp + 1) == std::string::npos, src,
             ": tokenizer.ggml.merges[", r, "] = ", shown(m), " is not two tokens separated by one space");
    const std::string a = m.substr(0, sp), b = m.substr(sp + 1);
    const int32_t ia = token_of(a, r, m, "left"), ib = token_of(b, r, m, "right"), iab = token_of(a + b, r, m, "merged");
    ET_CHECK(r < static_cast<size_t>(std::numeric_limits<int32_t>::max()), src, ": tokenizer.ggml.merges has too many entries");
    const bool fresh = t.merges.emplace(pair_key(ia, ib), BpeMerge{static_cast<int32_t>(r), iab}).second;
    ET_CHECK(fresh, src, ": tokenizer.ggml.merges[", r, "] = ", shown(m), " appears twice");
    t.merge_pairs.push_back({ia, ib});
  }
  t.eot = static_cast<int32_t>(v.eos);
  t.bos = static_cast<int32_t>(v.bos);
  t.gguf = v;
  return std::make_unique<BpeTokenizer>(std::move(t));
}

// SentencePiece-style BPE over a "llama" GGUF vocabulary, as llama.cpp's SPM tokenizer runs it, with two
// changes that make decode(encode(text)) == text hold for every byte string: a '▁' that is in the input
// (not made from a space) and bytes that are not valid UTF-8 are never merged and always fall back to byte
// tokens, and a space prefix is only added at the start of the text (llama.cpp also adds one after each
// user-defined token). A space whose '▁' has no token falls back to the byte token of 0x20.
class SpmTokenizer final : public Tokenizer {
 public:
  explicit SpmTokenizer(const CheckedVocab& c) : vocab_(c.v), name_(gguf_tokenizer_name(c.v)) {
    const GgufVocab& v = c.v;
    const std::string& src = c.src;
    const size_t n = v.tokens.size();
    piece_.resize(n);
    strip_.assign(n, 0);
    score_.assign(n, 0.0f);
    for (int32_t id = 0; id < c.n; ++id) {
      const std::string& text = v.tokens[id];
      const int32_t type = c.types[id];
      if (!v.scores.empty()) {
        score_[id] = v.scores[id];
        ET_CHECK(!std::isnan(score_[id]), src, ": tokenizer.ggml.scores[", id, "] is NaN");
      }
      if (type == kNormal) {
        std::string& p = piece_[id];
        for (size_t i = 0; i < text.size();) {
          if (text.compare(i, kSpaceMark.size(), kSpaceMark) == 0) {
            p.push_back(' ');
            i += kSpaceMark.size();
          } else {
            p.push_back(text[i++]);
          }
        }
        strip_[id] = 1;
        if (!text.empty()) {
          normal_.emplace(text, id);
          max_len_ = std::max(max_len_, text.size());
        }
      } else if (type == kByteToken) {
        piece_[id] = std::string(1, static_cast<char>(byte_token_value(text)));
        strip_[id] = 1;
      } else {
        piece_[id] = text;  // control, unknown, user-defined, unused, undefined: their text as it is
        if (type == kUserDefined) user_defined_.add(text, id);
      }
    }
    user_defined_.finish();
    // Byte fallback: the byte token <0xNN>, else a normal token whose text is exactly that byte (as
    // llama.cpp's byte_to_token does; '▁' counts for the space).
    byte_fallback_.fill(-1);
    for (int32_t id = 0; id < c.n; ++id)
      if (c.types[id] == kByteToken && byte_fallback_[byte_token_value(v.tokens[id])] < 0)
        byte_fallback_[byte_token_value(v.tokens[id])] = id;
    for (int32_t id = 0; id < c.n; ++id)
      if (c.types[id] == kNormal && piece_[id].size() == 1 && byte_fallback_[static_cast<unsigned char>(piece_[id][0])] < 0)
        byte_fallback_[static_cast<unsigned char>(piece_[id][0])] = id;
    int missing = 0, first_missing = -1;
    for (int b = 0; b < 256; ++b)
      if (byte_fallback_[b] < 0 && missing++ == 0) first_missing = b;
    ET_CHECK(missing == 0, src, ": tokenizer.ggml.tokens has no byte token ", byte_token_text(first_missing),
             " (token type 6) and no normal token for that byte", missing > 1 ? " (" + std::to_string(missing) + " bytes lack one)" : "",
             ": a SentencePiece vocabulary needs all 256 byte tokens to encode every input");
    add_prefix_ = v.add_space_prefix != 0;  // llama.cpp's default for "llama" vocabularies: on
    // Words: when no normal token has a '▁' after something else (SentencePiece's usual split by
    // whitespace), no merge can cross from a character into a following space, so the text is cut before
    // each space that follows a non-space and the pieces are encoded (and cached) one by one.
    by_words_ = true;
    for (const auto& [text, id] : normal_) {
      size_t i = 0;
      while (text.compare(i, kSpaceMark.size(), kSpaceMark) == 0) i += kSpaceMark.size();
      if (text.find(kSpaceMark, i) != std::string::npos) by_words_ = false;
    }
    eos_ = static_cast<int32_t>(v.eos);
    bos_ = static_cast<int32_t>(v.bos);
  }

  std::string name() const override { return name_; }
  int64_t vocab_size() const override { return static_cast<int64_t>(piece_.size()); }
  int32_t eot() const override { return eos_; }
  int32_t bos() const override { return bos_; }
  GgufVocab gguf_vocab() const override { return vocab_; }

  std::vector<int32_t> encode(std::string_view text) const override { return run(text, add_prefix_); }
  std::vector<int32_t> encode_continuation(std::string_view text) const override { return run(text, false); }

  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string out;
    out.reserve(ids.size() * 4);
    for (size_t i = 0; i < ids.size(); ++i) {
      ET_CHECK(ids[i] >= 0 && static_cast<size_t>(ids[i]) < piece_.size(), name_, " tokenizer decode: id ", ids[i],
               " at position ", i, " is outside [0, ", piece_.size(), ")");
      out += piece_[ids[i]];
    }
    // The space encode() put in front of the text.
    if (add_prefix_ && !ids.empty() && strip_[ids[0]] && !piece_[ids[0]].empty() && piece_[ids[0]][0] == ' ')
      out.erase(0, 1);
    return out;
  }

 private:
  std::vector<int32_t> run(std::string_view text, bool prefix) const {
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3 + 16);
    if (user_defined_.empty()) {
      if (!text.empty()) encode_piece(text, prefix, ids);
    } else {
      user_defined_.split(
          text, [&](size_t begin, size_t end) { encode_piece(text.substr(begin, end - begin), prefix && begin == 0, ids); },
          [&](int32_t id) { ids.push_back(id); });
    }
    return ids;
  }

  // One stretch of text without user-defined tokens.
  void encode_piece(std::string_view s, bool prefix, std::vector<int32_t>& ids) const {
    if (!by_words_) return merge(s, prefix, ids);
    size_t start = 0;
    for (size_t i = 1; i <= s.size(); ++i) {
      if (i < s.size() && !(s[i] == ' ' && s[i - 1] != ' ')) continue;
      const std::string_view word = s.substr(start, i - start);
      if (prefix && start == 0) {
        merge(word, true, ids);
      } else if (word.size() > kMaxCachedWord) {
        merge(word, false, ids);
      } else {
        std::unique_lock<std::mutex> lock(cache_mutex_);
        auto it = cache_.find(word);
        if (it != cache_.end()) {
          ids.insert(ids.end(), it->second.begin(), it->second.end());
        } else {
          lock.unlock();
          std::vector<int32_t> word_ids;
          merge(word, false, word_ids);
          ids.insert(ids.end(), word_ids.begin(), word_ids.end());
          lock.lock();
          if (cache_.size() >= kMaxCacheEntries) cache_.clear();
          cache_.emplace(std::string(word), std::move(word_ids));
        }
      }
      start = i;
    }
  }

  // The merges of llama.cpp's SPM tokenizer over `s` ('▁' first when `prefix`), then byte fallback.
  void merge(std::string_view s, bool prefix, std::vector<int32_t>& ids) const {
    ET_CHECK(s.size() <= (size_t{1} << 30), name_, " tokenizer: ", s.size(),
             " bytes of text at once is more than it handles (1 GiB); encode it in pieces");
    // The normalised text: every ' ' becomes '▁'. Its characters are the initial symbols; an opaque one
    // (an input '▁', a byte that is not valid UTF-8) never merges.
    struct Sym {
      uint32_t off, len;
      int32_t prev, next;
      bool opaque;
    };
    std::string norm;
    norm.reserve(s.size() + s.size() / 4 + 4);
    std::vector<Sym> sym;
    sym.reserve(s.size() + 1);
    auto add = [&](std::string_view bytes, bool opaque) {
      const int32_t k = static_cast<int32_t>(sym.size());
      sym.push_back({static_cast<uint32_t>(norm.size()), static_cast<uint32_t>(bytes.size()), k - 1, -1, opaque});
      if (k > 0) sym[k - 1].next = k;
      norm.append(bytes);
    };
    if (prefix) add(kSpaceMark, false);
    const auto* u = reinterpret_cast<const unsigned char*>(s.data());
    for (size_t i = 0; i < s.size();) {
      uint32_t cp = 0, len = 0;
      if (s[i] == ' ') {
        add(kSpaceMark, false);
        len = 1;
      } else if (!decode_utf8(u, s.size(), i, cp, len)) {
        add(s.substr(i, 1), true);
        len = 1;
      } else {
        add(s.substr(i, len), cp == 0x2581);
      }
      i += len;
    }
    // Merge the adjacent pair whose concatenation is the normal token of highest score (leftmost among
    // equal scores), until no pair is a token.
    struct Candidate {
      float score;
      int32_t left, right;
      uint32_t size;
    };
    auto lower = [](const Candidate& a, const Candidate& b) {
      return a.score != b.score ? a.score < b.score : a.left > b.left;
    };
    std::priority_queue<Candidate, std::vector<Candidate>, decltype(lower)> heap(lower);
    const std::string_view nv(norm);
    auto consider = [&](int32_t l, int32_t r) {
      if (l < 0 || r < 0 || sym[l].opaque || sym[r].opaque) return;
      const uint32_t size = sym[l].len + sym[r].len;
      if (size > max_len_) return;
      auto it = normal_.find(nv.substr(sym[l].off, size));
      if (it != normal_.end()) heap.push({score_[it->second], l, r, size});
    };
    for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) consider(i, i + 1);
    while (!heap.empty()) {
      const Candidate c = heap.top();
      heap.pop();
      Sym& l = sym[c.left];
      Sym& r = sym[c.right];
      if (l.len == 0 || r.len == 0 || l.next != c.right || l.len + r.len != c.size) continue;  // stale
      l.len += r.len;
      r.len = 0;
      l.next = r.next;
      if (r.next >= 0) sym[r.next].prev = c.left;
      consider(l.prev, c.left);
      consider(c.left, l.next);
    }
    for (int32_t i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) {
      const std::string_view piece = nv.substr(sym[i].off, sym[i].len);
      if (!sym[i].opaque) {
        auto it = normal_.find(piece);
        if (it != normal_.end()) {
          ids.push_back(it->second);
          continue;
        }
        if (piece == kSpaceMark) {  // a space without a '▁' token
          ids.push_back(byte_fallback_[' ']);
          continue;
        }
      }
      for (unsigned char b : piece) ids.push_back(byte_fallback_[b]);
    }
  }

  GgufVocab vocab_;
  std::string name_;
  std::vector<std::string> piece_;   // what decode() gives for each id
  std::vector<uint8_t> strip_;       // 1: a normal or byte token (its leading space may be the prefix)
  std::vector<float> score_;
  StringMap<int32_t> normal_;        // text -> id of the normal tokens: what merges may make
  size_t max_len_ = 0;
  std::array<int32_t, 256> byte_fallback_{};
  UserDefinedSplitter user_defined_;
  bool add_prefix_ = true;
  bool by_words_ = false;
  static constexpr size_t kMaxCachedWord = 64;
  static constexpr size_t kMaxCacheEntries = 1 << 18;
  mutable std::mutex cache_mutex_;
  mutable StringMap<std::vector<int32_t>> cache_;
  int32_t eos_ = -1, bos_ = -1;
};

}  // namespace

std::unique_ptr<Tokenizer> make_byte_tokenizer() { return std::make_unique<ByteTokenizer>(); }

std::unique_ptr<Tokenizer> load_gpt2_tokenizer(const std::string& dir) {
  return std::make_unique<BpeTokenizer>(Gpt2FileLoader(dir).take());
}

std::unique_ptr<Tokenizer> make_gguf_tokenizer(const GgufVocab& vocab, const std::string& source,
                                               std::vector<std::string>* warnings) {
  const CheckedVocab c = check_vocab(vocab, source);
  if (vocab.model == "gpt2") return make_gguf_bpe(c, warnings);
  return std::make_unique<SpmTokenizer>(c);
}

bool is_gguf_path(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  char m[4] = {};
  return in && in.read(m, 4) && std::string_view(m, 4) == "GGUF";
}

std::string default_gpt2_dir() {
  const char* env = std::getenv("EDGETRAIN_DEPS");
  if (env != nullptr && *env != '\0') return std::string(env) + "/gpt2";
#ifdef EDGETRAIN_DEPS_DIR
  return std::string(EDGETRAIN_DEPS_DIR) + "/gpt2";
#else
  return ".deps/gpt2";
#endif
}

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& spec) {
  if (spec == "bytes") return make_byte_tokenizer();
  if (spec == "gpt2") return load_gpt2_tokenizer(default_gpt2_dir());
  if (is_gguf_path(spec)) return load_gguf_tokenizer(spec);
  std::error_code ec;
  ET_CHECK(std::filesystem::path(spec).extension() != ".gguf" || std::filesystem::exists(spec, ec), "tokenizer '",
           spec, "': no such GGUF file");
  ET_CHECK(std::filesystem::is_directory(spec, ec), "unknown tokenizer '", spec,
           "': expected \"bytes\", \"gpt2\", a directory holding encoder.json and vocab.bpe, or a GGUF file");
  return load_gpt2_tokenizer(spec);
}

std::string checkpoint_tokenizer_spec(const std::string& recorded, const std::string& checkpoint_path) {
  if (recorded.empty()) return "bytes";
  std::error_code ec;
  const std::filesystem::path p(recorded);
  if (p.extension() != ".gguf" || std::filesystem::exists(p, ec)) return recorded;
  const std::filesystem::path beside = std::filesystem::path(checkpoint_path).parent_path() / p.filename();
  return std::filesystem::exists(beside, ec) ? beside.string() : recorded;
}

}  // namespace edgetrain
