// Tokenizers for training: the byte tokenizer, GPT-2's byte-level BPE (encoder.json + vocab.bpe) with a
// hand-written version of GPT-2's pre-tokenization regex, and the factory that picks one by name.
#include "edgetrain/tokenizer.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
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

Char char_at(const unsigned char* s, size_t n, size_t i) {
  const unsigned char b0 = s[i];
  if (b0 < 0x80) return {ascii_classes()[b0], 1};
  uint32_t len = 0, cp = 0, min_second = 0x80, max_second = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
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
    return {kOther, 1};
  }
  if (i + len > n) return {kOther, 1};
  for (uint32_t k = 1; k < len; ++k) {
    const unsigned char b = s[i + k];
    const unsigned char lo = k == 1 ? min_second : 0x80, hi = k == 1 ? max_second : 0xBF;
    if (b < lo || b > hi) return {kOther, 1};
    cp = (cp << 6) | (b & 0x3F);
  }
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

std::string read_file(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  ET_CHECK(f.good(), "GPT-2 tokenizer: cannot open ", what, " '", path, "' (missing? scripts/setup.sh installs it)");
  std::ostringstream ss;
  ss << f.rdbuf();
  ET_CHECK(!f.bad(), "GPT-2 tokenizer: cannot read ", what, " '", path, "'");
  return ss.str();
}

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
};

class Gpt2Tokenizer final : public Tokenizer {
 public:
  explicit Gpt2Tokenizer(const std::string& dir) {
    load_encoder(dir + "/encoder.json");
    load_merges(dir + "/vocab.bpe");
  }

  std::string name() const override { return "gpt2"; }
  int64_t vocab_size() const override { return static_cast<int64_t>(id_bytes_.size()); }
  int32_t eot() const override { return eot_; }

  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3 + 16);
    std::vector<int32_t> word_ids;
    pre_tokenize(text, [&](size_t begin, size_t end) {
      const std::string_view word = text.substr(begin, end - begin);
      if (word.size() == 1) {
        ids.push_back(byte_id_[static_cast<unsigned char>(word[0])]);
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
    return ids;
  }

  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string out;
    out.reserve(ids.size() * 4);
    for (size_t i = 0; i < ids.size(); ++i) {
      ET_CHECK(ids[i] >= 0 && static_cast<size_t>(ids[i]) < id_bytes_.size(), "GPT-2 tokenizer decode: id ",
               ids[i], " at position ", i, " is outside [0, ", id_bytes_.size(), ")");
      out += id_bytes_[ids[i]];
    }
    return out;
  }

 private:
  struct Merge {
    int32_t rank;
    int32_t id;  // the token the pair becomes
  };
  static constexpr size_t kMaxCachedWord = 64;
  static constexpr size_t kMaxCacheEntries = 1 << 18;

  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  const Merge* find_merge(int32_t a, int32_t b) const {
    auto it = merges_.find(pair_key(a, b));
    return it == merges_.end() ? nullptr : &it->second;
  }

  // Byte-pair encoding of one pre-tokenized word: starting from single bytes, repeatedly merge the adjacent
  // pair of lowest rank, all its occurrences left to right, until no pair has a rank (OpenAI's bpe()).
  // Done with a heap ordered by (rank, position) over a linked list, O(n log n) even for very long words.
  // load_merges() checks that a merge only uses tokens made by earlier merges; with that, every pair that
  // a merge creates has a higher rank than the merge itself, so popping (rank, position) in order performs
  // exactly the reference's sequence of merges.
  void bpe(std::string_view word, std::vector<int32_t>& out) const {
    const int32_t n = static_cast<int32_t>(word.size());
    std::vector<int32_t> sym(n), prev(n), next(n);
    for (int32_t i = 0; i < n; ++i) {
      sym[i] = byte_id_[static_cast<unsigned char>(word[i])];
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
      if (const Merge* m = find_merge(sym[left], sym[right])) heap.push({m->rank, left, right, m->id});
    };
    for (int32_t i = 0; i + 1 < n; ++i) consider(i);
    while (!heap.empty()) {
      const Candidate c = heap.top();
      heap.pop();
      // Stale if either side was merged away or changed since the candidate was pushed.
      if (sym[c.left] < 0 || next[c.left] != c.right || sym[c.right] < 0) continue;
      const Merge* m = find_merge(sym[c.left], sym[c.right]);
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
    id_bytes_.assign(j.size(), std::string());
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
      id_bytes_[id] = bytes;
      bytes_to_id_.emplace(bytes, static_cast<int32_t>(id));
      if (key == "<|endoftext|>") eot_ = static_cast<int32_t>(id);
    }
    for (int b = 0; b < 256; ++b) {
      auto it = bytes_to_id_.find(std::string(1, static_cast<char>(b)));
      ET_CHECK(it != bytes_to_id_.end(), "GPT-2 tokenizer: '", path, "' has no token for the single byte ", b);
      byte_id_[b] = it->second;
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
    std::vector<int32_t> made_by(id_bytes_.size(), -1);
    for (size_t r = 0; r < lines.size(); ++r) made_by[lines[r].id] = static_cast<int32_t>(r);
    for (size_t r = 0; r < lines.size(); ++r) {
      const Line& l = lines[r];
      for (int32_t part : {l.a, l.b}) {
        ET_CHECK(id_bytes_[part].size() == 1 || (made_by[part] >= 0 && made_by[part] < static_cast<int32_t>(r)),
                 "GPT-2 tokenizer: ", path, ":", l.line_no, ": symbol of ", id_bytes_[part].size(),
                 " bytes is neither a single byte nor made by an earlier merge");
      }
      const bool fresh = merges_.emplace(pair_key(l.a, l.b), Merge{static_cast<int32_t>(r), l.id}).second;
      ET_CHECK(fresh, "GPT-2 tokenizer: ", path, ":", l.line_no, ": the same merge appears twice");
    }
    bytes_to_id_.clear();  // only needed while loading
  }

  std::vector<std::string> id_bytes_;
  std::unordered_map<std::string, int32_t> bytes_to_id_;
  std::array<int32_t, 256> byte_id_{};
  std::unordered_map<uint64_t, Merge> merges_;
  int32_t eot_ = -1;

  // Cache of short words' ids, looked up by string_view (C++20 heterogeneous lookup) without copying.
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_byte_tokenizer() { return std::make_unique<ByteTokenizer>(); }

std::unique_ptr<Tokenizer> load_gpt2_tokenizer(const std::string& dir) {
  return std::make_unique<Gpt2Tokenizer>(dir);
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
  std::error_code ec;
  ET_CHECK(std::filesystem::is_directory(spec, ec), "unknown tokenizer '", spec,
           "': expected \"bytes\", \"gpt2\" or a directory holding encoder.json and vocab.bpe");
  return load_gpt2_tokenizer(spec);
}

}  // namespace edgetrain
