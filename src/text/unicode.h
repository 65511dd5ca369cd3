// Unicode for the pre-tokenizers: UTF-8 decoding that never rejects a byte, the character classes of
// GPT-2's regex (\p{L}, \p{N}, \s, other), and GPT-2's pre-tokenization, which cuts text into the words
// byte-level BPE encodes one at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace edgetrain::text {

enum CharClass : uint8_t { kOther = 0, kLetter = 1, kNumber = 2, kSpace = 3 };

// The class of a code point: Unicode White_Space (what \s means for GPT-2's regex), General Category L*
// and N* per Unicode 14.0 (tokenizer_unicode.inc), everything else kOther.
CharClass classify(uint32_t cp);

// The same for ASCII, inline for the pre-tokenizer's common case (a test checks it against classify).
constexpr CharClass ascii_class(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ? kLetter
         : c >= '0' && c <= '9'                           ? kNumber
         : c == ' ' || (c >= 0x09 && c <= 0x0D)           ? kSpace
                                                          : kOther;
}

// The valid UTF-8 sequence of 1-4 bytes starting at s[i]: its code point and length. False for a byte that
// does not start one (stray continuation byte, overlong form, surrogate, beyond U+10FFFF, truncated).
bool decode_utf8(const unsigned char* s, size_t n, size_t i, uint32_t& cp, uint32_t& len);

// One character of the input: its class and how many bytes it spans. A byte that does not start a valid
// UTF-8 sequence is a character of its own, of class kOther, so that every byte string can be tokenized.
struct Char {
  CharClass cls;
  uint32_t len;
};
Char multibyte_char_at(const unsigned char* s, size_t n, size_t i);  // s[i] >= 0x80
inline Char char_at(const unsigned char* s, size_t n, size_t i) {
  return s[i] < 0x80 ? Char{ascii_class(s[i]), 1} : multibyte_char_at(s, n, i);
}

// GPT-2's contractions 's 't 're 've 'm 'll 'd (lower case only): length of the one at s[i] == '\'', or 0.
inline size_t contraction_length(const unsigned char* s, size_t n, size_t i) {
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
// A template so that the encoder's per-word work inlines into the scan.
template <typename Emit>
void pre_tokenize_gpt2(std::string_view text, Emit&& emit) {
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

}  // namespace edgetrain::text
