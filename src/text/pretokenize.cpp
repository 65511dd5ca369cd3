// The pre-tokenizers of pretokenize.h. Each regex is a scan that, at every position, takes the first
// alternative that matches there (leftmost-first, as Rust's, Oniguruma's and Python's regex engines pick),
// with the lookahead (?!\S) and the greedy runs worked out by hand. The scans work on [begin, end) of a
// buffer and treat `end` as the end of the text, so a later regex of a sequence sees each piece alone.
#include "text/pretokenize.h"

#include <array>

#include "edgetrain/tokenizer.h"
#include "text/unicode.h"

namespace edgetrain::text {
namespace {

using Bytes = const unsigned char*;

struct Named {
  std::string_view name;
  PreTokenizer kind;
};
// llama.cpp's names for these regexes (only those whose models tokenize alike in every other respect).
constexpr std::array<Named, 7> kNames = {{
    {"default", PreTokenizer::kDefault},
    {"gpt-2", PreTokenizer::kGpt2},
    {"llama-bpe", PreTokenizer::kLlama3},
    {"llama3", PreTokenizer::kLlama3},
    {"llama-v3", PreTokenizer::kLlama3},
    {"qwen2", PreTokenizer::kQwen2},
    {"smollm", PreTokenizer::kSmollm},
}};

// The contraction 's 't 're 've 'm 'll 'd at s[i] == '\'' (letters of either case when any_case): its length
// in bytes, or 0.
size_t contraction_length(Bytes s, size_t end, size_t i, bool any_case) {
  auto letter = [&](size_t k) -> unsigned char {
    const unsigned char c = s[k];
    return any_case && c >= 'A' && c <= 'Z' ? static_cast<unsigned char>(c - 'A' + 'a') : c;
  };
  if (i + 1 >= end) return 0;
  const unsigned char a = letter(i + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= end) return 0;
  const unsigned char b = letter(i + 2);
  return (a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l') ? 3 : 0;
}

// The end of the run of characters of class `cls` starting at i (i itself when there is none).
size_t run_end(Bytes s, size_t end, size_t i, CharClass cls) {
  while (i < end) {
    const Char c = char_at(s, end, i);
    if (c.cls != cls) break;
    i += c.len;
  }
  return i;
}

// A whitespace run starting at i (s[i] is whitespace): "\s+(?!\S)" takes all of it when it ends the text
// and all but its last character when a non-space follows (that character then starts the next piece, as in
// " word"), unless that would leave nothing; then "\s+" takes the one character. With `newlines` (Llama 3's
// "\s*[\r\n]+", which comes first) a run holding '\r' or '\n' ends after the last of them instead.
size_t whitespace_end(Bytes s, size_t end, size_t i, bool newlines) {
  size_t k = i, last = i, after_newline = 0;
  while (k < end) {
    const Char c = char_at(s, end, k);
    if (c.cls != kSpace) break;
    if (s[k] == '\r' || s[k] == '\n') after_newline = k + 1;
    last = k;
    k += c.len;
  }
  if (newlines && after_newline > 0) return after_newline;
  return k == end || last == i ? k : last;
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
template <typename Emit>
void split_gpt2(Bytes s, size_t begin, size_t end, Emit&& emit) {
  for (size_t i = begin; i < end;) {
    size_t stop = s[i] == '\'' ? i + contraction_length(s, end, i, false) : i;
    if (stop == i) {
      // " ?X+" for X letters, numbers or other: the optional ' ' is U+0020 only.
      Char first = char_at(s, end, i);
      size_t j = i;
      if (s[i] == ' ' && i + 1 < end) {
        const Char next = char_at(s, end, i + 1);
        if (next.cls != kSpace) first = next, j = i + 1;
      }
      stop = first.cls != kSpace ? run_end(s, end, j + first.len, first.cls) : whitespace_end(s, end, i, false);
    }
    emit(i, stop);
    i = stop;
  }
}

// Where the match of Llama 3's regex (max_digits 3) or Qwen2's (1) that starts at i ends, after the
// contractions (see split_llama3).
size_t llama3_match_end(Bytes s, size_t end, size_t i, size_t max_digits) {
  auto newline = [&](size_t k) { return s[k] == '\r' || s[k] == '\n'; };
  const Char c = char_at(s, end, i);
  // [^\r\n\p{L}\p{N}]?\p{L}+: one character of any other kind (a space, a quote, ...) may lead.
  if (c.cls == kLetter ||
      (c.cls != kNumber && !newline(i) && i + c.len < end && char_at(s, end, i + c.len).cls == kLetter))
    return run_end(s, end, i + c.len, kLetter);
  if (c.cls == kNumber) {  // \p{N}{1,max_digits}
    size_t stop = i;
    for (size_t k = 0; k < max_digits && stop < end; ++k) {
      const Char d = char_at(s, end, stop);
      if (d.cls != kNumber) break;
      stop += d.len;
    }
    return stop;
  }
  // " ?[^\s\p{L}\p{N}]+[\r\n]*"
  const size_t j = s[i] == ' ' && i + 1 < end && char_at(s, end, i + 1).cls == kOther ? i + 1 : i;
  if (char_at(s, end, j).cls == kOther) {
    size_t stop = run_end(s, end, j, kOther);
    while (stop < end && newline(stop)) ++stop;
    return stop;
  }
  return whitespace_end(s, end, i, true);  // \s*[\r\n]+|\s+(?!\S)|\s+
}

// Llama 3's regex and Qwen2's, see pretokenize.h.
template <typename Emit>
void split_llama3(Bytes s, size_t begin, size_t end, size_t max_digits, Emit&& emit) {
  for (size_t i = begin; i < end;) {
    size_t stop = s[i] == '\'' ? i + contraction_length(s, end, i, true) : i;  // (?i:'s|'t|...)
    if (stop == i) stop = llama3_match_end(s, end, i, max_digits);
    emit(i, stop);
    i = stop;
  }
}

// Splits [begin, end) around the maximal runs of characters `in_run` accepts (given the code point, or
// UINT32_MAX for a byte that is not valid UTF-8): runs and the text between them are pieces alike.
template <typename InRun, typename Emit>
void isolate_runs(Bytes s, size_t begin, size_t end, InRun&& in_run, Emit&& emit) {
  size_t piece = begin;
  bool piece_in_run = false;
  for (size_t i = begin; i < end;) {
    uint32_t cp = 0, len = 1;
    if (!decode_utf8(s, end, i, cp, len)) cp = UINT32_MAX, len = 1;
    const bool r = in_run(cp);
    if (i > piece && r != piece_in_run) {
      emit(piece, i);
      piece = i;
    }
    piece_in_run = r;
    i += len;
  }
  if (end > piece) emit(piece, end);
}

bool is_number(uint32_t cp) { return cp != UINT32_MAX && classify(cp) == kNumber; }

// \p{N}, then GPT-2's regex on each piece.
template <typename Emit>
void split_smollm(Bytes s, size_t begin, size_t end, Emit&& emit) {
  size_t gap = begin;
  for (size_t i = begin; i < end;) {
    const Char c = char_at(s, end, i);
    if (c.cls == kNumber) {
      if (gap < i) split_gpt2(s, gap, i, emit);
      emit(i, i + c.len);
      gap = i + c.len;
    }
    i += c.len;
  }
  if (gap < end) split_gpt2(s, gap, end, emit);
}

// [0-9][0-9][0-9]: the leftmost non-overlapping triples of ASCII digits, each a piece, and the text between.
template <typename Emit>
void isolate_digit_triples(Bytes s, size_t begin, size_t end, Emit&& emit) {
  auto digit = [&](size_t k) { return s[k] >= '0' && s[k] <= '9'; };
  size_t piece = begin;
  for (size_t i = begin; i + 3 <= end;) {
    if (digit(i) && digit(i + 1) && digit(i + 2)) {
      if (i > piece) emit(piece, i);
      emit(i, i + 3);
      piece = i += 3;
    } else {
      ++i;
    }
  }
  if (end > piece) emit(piece, end);
}

// [\p{P}$+<=>^~|]+, GPT-2's regex, \p{N}+, [0-9][0-9][0-9]: each on every piece of the one before.
template <typename Emit>
void split_default(Bytes s, size_t begin, size_t end, Emit&& emit) {
  auto punctuation = [](uint32_t cp) {
    return cp != UINT32_MAX && (is_punctuation(cp) || cp == '$' || cp == '+' || cp == '<' || cp == '=' ||
                                cp == '>' || cp == '^' || cp == '~' || cp == '|');
  };
  auto triples = [&](size_t b, size_t e) { isolate_digit_triples(s, b, e, emit); };
  auto numbers = [&](size_t b, size_t e) { isolate_runs(s, b, e, is_number, triples); };
  auto gpt2 = [&](size_t b, size_t e) { split_gpt2(s, b, e, numbers); };
  isolate_runs(s, begin, end, punctuation, gpt2);
}

}  // namespace

std::optional<PreTokenizer> pre_tokenizer_named(std::string_view pre) {
  for (const Named& n : kNames)
    if (n.name == pre) return n.kind;
  return std::nullopt;
}

std::string known_pre_tokenizer_names() {
  std::string out;
  for (const Named& n : kNames) out += (out.empty() ? "" : ", ") + std::string(n.name);
  return out;
}

bool takes_whole_words(PreTokenizer p) { return p == PreTokenizer::kLlama3; }

void pre_tokenize(PreTokenizer p, std::string_view text, PieceSink emit) {
  const auto* s = reinterpret_cast<Bytes>(text.data());
  const size_t n = text.size();
  switch (p) {
    case PreTokenizer::kGpt2: return split_gpt2(s, 0, n, emit);
    case PreTokenizer::kLlama3: return split_llama3(s, 0, n, 3, emit);
    case PreTokenizer::kQwen2: return split_llama3(s, 0, n, 1, emit);
    case PreTokenizer::kSmollm: return split_smollm(s, 0, n, emit);
    case PreTokenizer::kDefault: return split_default(s, 0, n, emit);
  }
}

}  // namespace edgetrain::text

namespace edgetrain {

bool is_chunk_boundary(std::string_view text, size_t i) {
  using namespace text;
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  if (i < 2 || i >= n || s[i - 1] != '\n' || char_at(s, n, i).cls == kSpace) return false;
  // The character that ends at i - 2: back over at most three continuation bytes to where it starts; when no
  // valid character ends there, s[i - 2] is a character of its own, of class other.
  size_t j = i - 2;
  while (j > 0 && i - 2 - j < 3 && (s[j] & 0xC0) == 0x80) --j;
  const Char x = char_at(s, n, j);
  return j + x.len != i - 1 || x.cls != kSpace;
}

}  // namespace edgetrain
