// Pre-tokenizers of byte-level BPE: how text is cut into the words that BPE encodes one at a time, chosen by a
// GGUF vocabulary's tokenizer.ggml.pre. Each is a fixed regex (or a sequence of them, each splitting the
// pieces the previous one made), written out here as a scan over UTF-8 with the classes of unicode.h. The
// names and what they mean are llama.cpp's (src/llama-vocab.cpp), the consumer of the files we write.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace edgetrain::text {

enum class PreTokenizer : uint8_t {
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kGpt2,
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  // (the contractions' case-insensitivity is ASCII's, as llama.cpp has it)
  kLlama3,
  // Llama 3's regex with \p{N} in place of \p{N}{1,3}: every digit is a word of its own.
  kQwen2,
  // \p{N} (each number character isolated), then GPT-2's regex on the pieces between.
  kSmollm,
  // llama.cpp's fallback: [\p{P}$+<=>^~|]+ isolated, then GPT-2's regex, then \p{N}+ isolated, then
  // [0-9][0-9][0-9] isolated (leftmost triples of ASCII digits).
  kDefault,
};

// The tokenizer.ggml.pre values edgetrain knows; nullopt for any other.
std::optional<PreTokenizer> pre_tokenizer_named(std::string_view pre);
// Those values, comma-separated, for error messages.
std::string known_pre_tokenizer_names();
// Whether a word that is itself a token is taken whole instead of being merged (llama.cpp's ignore_merges;
// Hugging Face's "ignore_merges": true of Llama 3's tokenizer.json).
bool takes_whole_words(PreTokenizer p);

// A callback for the pieces, by reference and without allocation: emit(begin, end) with byte offsets.
class PieceSink {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, PieceSink>>>
  PieceSink(F& f) : ctx_(&f), call_([](void* c, size_t b, size_t e) { (*static_cast<F*>(c))(b, e); }) {}
  void operator()(size_t begin, size_t end) const { call_(ctx_, begin, end); }

 private:
  void* ctx_;
  void (*call_)(void*, size_t, size_t);
};

// Cuts `text` into pieces that tile it, in order, calling emit for each (never an empty one). Any byte string
// is accepted: a byte that does not start valid UTF-8 is one character of class other (unicode.h), so that
// decode(encode(x)) == x; llama.cpp replaces such a byte by U+FFFD, so its ids differ on invalid UTF-8.
void pre_tokenize(PreTokenizer p, std::string_view text, PieceSink emit);

}  // namespace edgetrain::text
