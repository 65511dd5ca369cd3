// SentencePiece-style BPE over a "llama" GGUF vocabulary: llama.cpp's SPM algorithm (merge the adjacent pair
// whose concatenation is the highest-scoring normal token, then byte fallback), made lossless.
#include "text/spm.h"

#include <array>
#include <cmath>
#include <mutex>
#include <queue>

#include "edgetrain/error.h"
#include "text/unicode.h"

namespace edgetrain::text {
namespace {

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
        if (type == kUserDefined || type == kControl || type == kUnknown) special_.add(text, id);
      }
    }
    user_defined_.finish();
    special_.finish();
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
  bool is_special(int32_t id) const override { return special_.has(id); }
  std::vector<int32_t> encode_special(std::string_view text, bool continuation) const override {
    std::vector<int32_t> ids;
    bool after_special = !continuation;  // llama.cpp's is_prev_special: true at the start of a text
    special_.split(
        text,
        [&](size_t begin, size_t end) {
          encode_piece(text.substr(begin, end - begin), add_prefix_ && after_special, ids);
          after_special = false;
        },
        [&](int32_t id) {
          ids.push_back(id);
          after_special = true;
        });
    return ids;
  }

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
  UserDefinedSplitter special_;  // control, unknown and user-defined tokens: what encode_special matches
  bool add_prefix_ = true;
  bool by_words_ = false;
  static constexpr size_t kMaxCachedWord = 64;
  static constexpr size_t kMaxCacheEntries = 1 << 18;
  mutable std::mutex cache_mutex_;
  mutable StringMap<std::vector<int32_t>> cache_;
  int32_t eos_ = -1, bos_ = -1;
};
}  // namespace

std::unique_ptr<Tokenizer> make_spm_tokenizer(const CheckedVocab& c) { return std::make_unique<SpmTokenizer>(c); }

}  // namespace edgetrain::text
