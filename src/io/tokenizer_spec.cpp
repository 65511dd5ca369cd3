// Tokenizers named by a spec, which may name a file: here, above the text layer, because a GGUF file's
// vocabulary is read by io (gguf_vocab.cpp) before the text layer turns it into a tokenizer.
#include <filesystem>

#include "edgetrain/error.h"
#include "edgetrain/interop.h"

namespace edgetrain {

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::string& path, std::vector<std::string>* warnings) {
  return make_gguf_tokenizer(read_gguf_vocab(path), path, warnings);
}

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& spec) {
  if (spec == "bytes") return make_byte_tokenizer();
  if (spec == "gpt2") return load_gpt2_tokenizer(default_gpt2_dir());
  if (is_gguf_file(spec)) return load_gguf_tokenizer(spec);
  std::error_code ec;
  ET_CHECK(std::filesystem::path(spec).extension() != ".gguf" || std::filesystem::exists(spec, ec), "tokenizer '",
           spec, "': no such GGUF file");
  ET_CHECK(std::filesystem::is_directory(spec, ec), "unknown tokenizer '", spec,
           "': expected \"bytes\", \"gpt2\", a directory holding encoder.json and vocab.bpe, or a GGUF file");
  return load_gpt2_tokenizer(spec);
}

std::string checkpoint_tokenizer_spec(const std::string& recorded, const std::string& checkpoint_path) {
  if (recorded.empty()) return "bytes";
  std::error_code ec;
  const std::filesystem::path p(recorded);
  if (p.extension() != ".gguf" || std::filesystem::exists(p, ec)) return recorded;
  const std::filesystem::path beside = std::filesystem::path(checkpoint_path).parent_path() / p.filename();
  return std::filesystem::exists(beside, ec) ? beside.string() : recorded;
}

}  // namespace edgetrain
