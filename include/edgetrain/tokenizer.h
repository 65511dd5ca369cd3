// Tokenizers that turn training text into token ids and back: raw bytes (256 ids), GPT-2's byte-level BPE,
// and the tokenizer a GGUF vocabulary describes (byte-level BPE or SentencePiece-style). Implemented by the
// text layer (src/text/), which reads no model files: reading a GGUF file's vocabulary, and the tokenizer
// named by a spec that may be such a file (make_tokenizer), are in edgetrain/interop.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace edgetrain {

// A tokenizer as GGUF metadata stores it (the tokenizer.ggml.* keys llama.cpp reads), as data.
struct GgufVocab {
  std::string model;                 // tokenizer.ggml.model: "gpt2" (byte-level BPE), "llama" (SentencePiece)
  std::string pre;                   // tokenizer.ggml.pre ("" when absent), e.g. "gpt-2"
  std::vector<std::string> tokens;   // tokenizer.ggml.tokens: the text of every id
  std::vector<float> scores;         // tokenizer.ggml.scores (empty when absent)
  // tokenizer.ggml.token_type (empty when absent): 1 normal, 2 unknown, 3 control, 4 user defined,
  // 5 unused, 6 byte (text "<0xNN>"), 0 undefined.
  std::vector<int32_t> token_types;
  std::vector<std::string> merges;   // tokenizer.ggml.merges: "left right", highest priority first
  int64_t bos = -1, eos = -1, unk = -1, pad = -1;   // tokenizer.ggml.*_token_id, -1 when absent
  int add_bos = -1, add_eos = -1, add_space_prefix = -1;  // tokenizer.ggml.add_*: 0/1, -1 when absent
  // tokenizer.chat_template ("" when absent): the model's Jinja chat template, kept with the vocabulary so
  // that a run folder's tokenizer.gguf still names it (src/text/chat_template.h detects its family).
  std::string chat_template;
  bool operator==(const GgufVocab&) const = default;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // "bytes", "gpt2", or for a GGUF vocabulary "gguf-<model>-<16 hex digits>" (a hash of the vocabulary,
  // so that token caches of different vocabularies never collide). Safe in a file name.
  virtual std::string name() const = 0;
  // Number of ids: 256 for bytes, 50257 for GPT-2. Every id produced or accepted is in [0, vocab_size).
  virtual int64_t vocab_size() const = 0;
  // Any byte string is accepted, valid UTF-8 or not; decode(encode(text)) == text always holds.
  // Control tokens are never parsed from text: "<|endoftext|>" in the input is encoded as ordinary text,
  // the end-of-text id is only produced by whoever appends eot(). (A GGUF vocabulary's user-defined
  // tokens are matched in the text, as llama.cpp does.)
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // encode() of text that continues earlier text, for encoding a long text in pieces: tokenizers that put
  // something in front of a text (SentencePiece's leading '▁') do not do it here. Cutting a text where
  // is_chunk_boundary says gives the ids of encoding it at once (for a GGUF vocabulary: unless it has tokens
  // spanning such a place).
  virtual std::vector<int32_t> encode_continuation(std::string_view text) const { return encode(text); }
  // encode() with special tokens parsed from the text, as llama.cpp's llama_tokenize with parse_special: the
  // text of a control, unknown or user-defined token ("<|im_start|>", "</s>"; GPT-2: "<|endoftext|>") becomes
  // that token's single id, the longest first, leftmost occurrences first. SentencePiece puts its space
  // prefix in front of the first stretch of text (unless `continuation`) and of every stretch that follows
  // such a token, as llama.cpp does. Chat templates need this: their markers must be the model's special ids.
  // Tokenizers without special tokens (bytes): encode() / encode_continuation().
  virtual std::vector<int32_t> encode_special(std::string_view text, bool continuation = false) const {
    return continuation ? encode_continuation(text) : encode(text);
  }
  // Whether encode_special makes id from its text (a control, unknown or user-defined token).
  virtual bool is_special(int32_t) const { return false; }
  // The bytes of the tokens, concatenated (may end in the middle of a UTF-8 sequence). A SentencePiece-style
  // tokenizer whose encode() adds a leading space drops one leading space again: when ids[0] is a normal or
  // byte token whose text starts with a space. So decode(a + b) == decode(a) + (text of b) for non-empty a,
  // which is how generate() decodes a continuation. Throws Error for an id outside [0, vocab_size).
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  // End-of-text id, -1 if the tokenizer has none (bytes). GPT-2: 50256, whose text is "<|endoftext|>".
  // GGUF: tokenizer.ggml.eos_token_id.
  virtual int32_t eot() const = 0;
  // Beginning-of-text id, -1 if none. GPT-2: 50256; GGUF: tokenizer.ggml.bos_token_id.
  virtual int32_t bos() const { return -1; }
  // This tokenizer as GGUF metadata llama.cpp can load (written by save_gguf): a GGUF vocabulary as it was
  // read; GPT-2 as "gpt2" (tokens in GPT-2's byte alphabet, merges by rank, <|endoftext|> a control token
  // and both BOS and EOS); bytes as a "llama" vocabulary of 256 tokens whose id is the byte ("▁" for
  // the space, the character itself for '!'..'~', byte tokens <0xNN> otherwise; no space prefix, no BOS).
  virtual GgufVocab gguf_vocab() const = 0;
};

// Whether every tokenizer here cuts `text` before byte i whatever follows, so that encode of text[0, i) and
// encode_continuation of the rest give the ids of encoding it whole: between "X\n" and "Y", X and Y characters
// other than whitespace (Unicode White_Space; a byte that is not valid UTF-8 counts as a character). Not
// after any '\n': GPT-2's regex cuts "a\n\nb" as "a", "\n", "\n", "b" but "a\n\n" as "a", "\n\n"; nor
// before a non-ASCII space: "\n" + two U+00A0 + "x" is "\n\u00A0", "\u00A0x".
bool is_chunk_boundary(std::string_view text, size_t i);

// id = byte value.
std::unique_ptr<Tokenizer> make_byte_tokenizer();

// GPT-2 byte-level BPE from dir/encoder.json and dir/vocab.bpe (OpenAI's files). Throws Error naming the
// file when one is missing or malformed. encode() matches OpenAI's encoder.py token for token on valid
// UTF-8 (letters and numbers per Unicode 15.1); an invalid UTF-8 byte is taken as one punctuation-like
// character. Thread-safe: encode may be called concurrently.
std::unique_ptr<Tokenizer> load_gpt2_tokenizer(const std::string& dir);

// Where "gpt2" looks for its files: deps_path("gpt2") (edgetrain/paths.h): $EDGETRAIN_DEPS/gpt2 when that
// variable is set and the folder exists, otherwise the .deps/gpt2 folder chosen at build time.
std::string default_gpt2_dir();

// The tokenizer of GGUF metadata: "gpt2" is byte-level BPE (the algorithm of load_gpt2_tokenizer; a merge's
// priority is its index) after the pre-tokenizer tokenizer.ggml.pre names, as llama.cpp has them: "gpt-2",
// "llama-bpe" (also "llama3", "llama-v3": Llama 3's regex, digits in runs of up to 3, and a word that is a
// token taken whole), "qwen2", "smollm", "default" (also when the key is absent, with a warning);
// "llama" is SentencePiece-style BPE as llama.cpp runs it (spaces become '▁' (U+2581), one is put in front
// of the text unless add_space_prefix is 0; adjacent pieces are merged highest score first while their
// concatenation is a normal token; characters left without a token fall back to byte tokens <0xNN>). Checks
// every count, index and id against the vocabulary and throws Error naming `source` and the key (merges or
// byte tokens that do not exist, ids out of range, a vocabulary that cannot encode some byte, a pre-tokenizer
// it does not know, with the list of those it does, ...). Notes that do not stop it are appended to
// `warnings` when given.
std::unique_ptr<Tokenizer> make_gguf_tokenizer(const GgufVocab& vocab, const std::string& source,
                                               std::vector<std::string>* warnings = nullptr);
}  // namespace edgetrain
