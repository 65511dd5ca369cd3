// Byte-level BPE (see bpe.h): GPT-2's byte alphabet, the tokenizer itself, and its tables from a "gpt2"
// GGUF vocabulary.
#include "text/bpe.h"

#include <functional>
#include <limits>
#include <mutex>
#include <queue>

#include "edgetrain/error.h"

namespace edgetrain::text {
namespace {

// GPT-2's byte alphabet: the bytes '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF stand for themselves, the
// other 68 bytes, in increasing order, for U+0100, U+0101, ... (so ' ' is 'Ġ' U+0120 and '\n' is 'Ċ' U+010A).
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

  // Byte-level BPE puts nothing in front of a text: continuation changes nothing.
  std::vector<int32_t> encode_special(std::string_view text, bool) const override {
    std::vector<int32_t> ids;
    t_.special.split(
        text, [&](size_t begin, size_t end) { encode_text(text.substr(begin, end - begin), ids); },
        [&](int32_t id) { ids.push_back(id); });
    return ids;
  }

  bool is_special(int32_t id) const override { return t_.special.has(id); }

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
    auto encode_word = [&](size_t begin, size_t end) {
      const std::string_view word = text.substr(begin, end - begin);
      if (word.size() == 1) {
        ids.push_back(t_.byte_id[static_cast<unsigned char>(word[0])]);
        return;
      }
      if (!t_.whole_words.empty()) {
        auto it = t_.whole_words.find(word);
        if (it != t_.whole_words.end()) {
          ids.push_back(it->second);
          return;
        }
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
    };
    pre_tokenize(t_.pre, text, encode_word);
  }

  const BpeMerge* find_merge(int32_t a, int32_t b) const {
    auto it = t_.merges.find(pair_key(a, b));
    return it == t_.merges.end() ? nullptr : &it->second;
  }

  // Byte-pair encoding of one pre-tokenized word: starting from single bytes, repeatedly merge the adjacent
  // pair of lowest rank (leftmost first among equal ranks) until no pair has a rank. Done with a heap
  // ordered by (rank, position) over a linked list, O(n log n) even for very long words. This is the
  // algorithm of llama.cpp and of Hugging Face tokenizers. OpenAI's bpe() instead merges all occurrences
  // of the best pair before looking again; for GPT-2's files the loader checks that a merge only uses
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

}  // namespace

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

std::unique_ptr<Tokenizer> make_bpe_tokenizer(BpeTables t) { return std::make_unique<BpeTokenizer>(std::move(t)); }

std::unique_ptr<Tokenizer> make_gguf_bpe(const CheckedVocab& c, std::vector<std::string>* warnings) {
  const GgufVocab& v = c.v;
  const std::string& src = c.src;
  BpeTables t;
  if (v.pre.empty()) {
    t.pre = PreTokenizer::kDefault;
    if (warnings)
      warnings->push_back(src + ": tokenizer.ggml.pre is absent; pre-tokenizing with llama.cpp's 'default' regexes,"
                                " as llama.cpp does, which may not be how the model was trained");
  } else {
    const std::optional<PreTokenizer> pre = pre_tokenizer_named(v.pre);
    ET_CHECK(pre.has_value(), src, ": tokenizer.ggml.pre ", shown(v.pre), " is not a pre-tokenizer edgetrain knows (",
             known_pre_tokenizer_names(), ")");
    t.pre = *pre;
  }
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
      if (takes_whole_words(t.pre) && bytes.size() > 1) t.whole_words.emplace(bytes, id);
    } else if (type == kByteToken) {
      t.id_bytes[id] = std::string(1, static_cast<char>(byte_token_value(text)));
    } else {
      t.id_bytes[id] = text;  // control, user-defined, ...: their text as it is
      if (type == kUserDefined) t.user_defined.add(text, id);
      if (type == kUserDefined || type == kControl || type == kUnknown) t.special.add(text, id);
    }
  }
  t.user_defined.finish();
  t.special.finish();
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
  return make_bpe_tokenizer(std::move(t));
}

}  // namespace edgetrain::text
