// Character classes and UTF-8 decoding for the pre-tokenizers (see unicode.h).
#include "text/unicode.h"

#include <algorithm>
#include <iterator>

namespace edgetrain::text {
namespace {

struct UnicodeRange {
  uint32_t first, last;
  uint8_t cls;
};
#include "text/tokenizer_unicode.inc"

// Unicode White_Space (PropList.txt), which is what \s means in the pre-tokenizer regexes.
bool is_white_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

// The table's class of a code point: 1 letter, 2 number, 3 punctuation, 0 anything else.
uint8_t table_class(uint32_t cp) {
  const UnicodeRange* begin = std::begin(kUnicodeRanges);
  const UnicodeRange* end = std::end(kUnicodeRanges);
  const UnicodeRange* it =
      std::upper_bound(begin, end, cp, [](uint32_t v, const UnicodeRange& r) { return v < r.first; });
  if (it == begin) return 0;
  --it;
  return cp <= it->last ? it->cls : 0;
}

}  // namespace

CharClass classify(uint32_t cp) {
  if (is_white_space(cp)) return kSpace;
  const uint8_t c = table_class(cp);
  return c == 1 ? kLetter : c == 2 ? kNumber : kOther;
}

bool is_punctuation(uint32_t cp) { return table_class(cp) == 3; }

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

Char multibyte_char_at(const unsigned char* s, size_t n, size_t i) {
  uint32_t cp = 0, len = 0;
  if (!decode_utf8(s, n, i, cp, len)) return {kOther, 1};
  return {classify(cp), len};
}

}  // namespace edgetrain::text
