// The tokenizer factory of the text layer: the byte tokenizer (defined here: it is a few lines), and a GGUF
// vocabulary's tokenizer by its kind ("gpt2": byte-level BPE, "llama": SentencePiece) after the checks both
// share. GPT-2's own files are read by gpt2_files.cpp; specs naming files (make_tokenizer) are resolved in
// src/io/tokenizer_spec.cpp, since reading a GGUF file is io's work.
#include "edgetrain/error.h"
#include "edgetrain/tokenizer.h"
#include "text/bpe.h"
#include "text/spm.h"
#include "text/vocab.h"

namespace edgetrain {
namespace {

using namespace text;

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
  // A SentencePiece ("llama") vocabulary in which llama.cpp's tokenizer gives exactly our ids: no merges are
  // possible (no token is longer than one character), a space becomes '▁', which is the token of byte 0x20,
  // and every other character falls back to its bytes: printable ASCII to the character's own token,
  // everything else to <0xNN>. Without a space prefix or BOS, encode(text) is the text's bytes.
  GgufVocab gguf_vocab() const override {
    GgufVocab v;
    v.model = "llama";
    for (int b = 0; b < 256; ++b) {
      const bool printable = b > ' ' && b < 0x7F;
      v.tokens.push_back(b == ' ' ? std::string(kSpaceMark) : printable ? std::string(1, static_cast<char>(b))
                                                                          : byte_token_text(b));
      v.token_types.push_back(b == ' ' || printable ? kNormal : kByteToken);
      v.scores.push_back(0.0f);
    }
    v.add_bos = 0, v.add_eos = 0, v.add_space_prefix = 0;
    return v;
  }
};

}  // namespace

std::unique_ptr<Tokenizer> make_byte_tokenizer() { return std::make_unique<ByteTokenizer>(); }

std::unique_ptr<Tokenizer> make_gguf_tokenizer(const GgufVocab& vocab, const std::string& source,
                                               std::vector<std::string>* warnings) {
  const text::CheckedVocab c = text::check_vocab(vocab, source);
  if (vocab.model == "gpt2") return text::make_gguf_bpe(c, warnings);
  return text::make_spm_tokenizer(c);
}

}  // namespace edgetrain
