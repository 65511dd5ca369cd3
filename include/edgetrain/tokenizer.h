// Tokenizers that turn training text into token ids and back: raw bytes (256 ids) and GPT-2's byte-level BPE.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace edgetrain {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // "bytes" or "gpt2".
  virtual std::string name() const = 0;
  // Number of ids: 256 for bytes, 50257 for GPT-2. Every id produced or accepted is in [0, vocab_size).
  virtual int64_t vocab_size() const = 0;
  // Any byte string is accepted, valid UTF-8 or not; decode(encode(text)) == text always holds.
  // Special tokens are never parsed from text: "<|endoftext|>" in the input is encoded as ordinary text,
  // the end-of-text id is only produced by whoever appends eot().
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // The bytes of the tokens, concatenated (may end in the middle of a UTF-8 sequence). Throws Error for an
  // id outside [0, vocab_size).
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  // End-of-text id, -1 if the tokenizer has none (bytes). GPT-2: 50256, whose text is "<|endoftext|>".
  virtual int32_t eot() const = 0;
};

// id = byte value.
std::unique_ptr<Tokenizer> make_byte_tokenizer();

// GPT-2 byte-level BPE from dir/encoder.json and dir/vocab.bpe (OpenAI's files). Throws Error naming the
// file when one is missing or malformed. encode() matches OpenAI's encoder.py token for token on valid
// UTF-8 (letters and numbers per Unicode 14.0); an invalid UTF-8 byte is taken as one punctuation-like
// character. Thread-safe: encode may be called concurrently.
std::unique_ptr<Tokenizer> load_gpt2_tokenizer(const std::string& dir);

// Where "gpt2" looks for its files: $EDGETRAIN_DEPS/gpt2 when that variable is set and not empty,
// otherwise the .deps/gpt2 folder chosen at build time (EDGETRAIN_DEPS_DIR).
std::string default_gpt2_dir();

// "bytes", "gpt2" (files from default_gpt2_dir()), or a directory holding encoder.json and vocab.bpe.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& spec);

}  // namespace edgetrain
