// Unicode for the pre-tokenizers (pretokenize.h): UTF-8 decoding that never rejects a byte, and the
// character classes their regexes name (\p{L}, \p{N}, \s, other; \p{P} on its own).
#pragma once

#include <cstddef>
#include <cstdint>

namespace edgetrain::text {

enum CharClass : uint8_t { kOther = 0, kLetter = 1, kNumber = 2, kSpace = 3 };

// The class of a code point: Unicode White_Space (what \s means in the regexes), General Category L* and
// N* per Unicode 15.1 (tokenizer_unicode.inc), everything else kOther.
CharClass classify(uint32_t cp);
// General Category P* (\p{P}) per Unicode 15.1.
bool is_punctuation(uint32_t cp);

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

}  // namespace edgetrain::text
