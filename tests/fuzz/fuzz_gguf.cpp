// libFuzzer target for the GGUF reader: any input must either throw edgetrain::Error or parse into a file
// whose every tensor lies inside the input and, when of a type edgetrain decodes (F32, F16, BF16, Q4_0,
// Q8_0, Q4_K, Q5_K, Q6_K), decodes (ASan/UBSan catch the rest). The Llama check (gguf_llama::check: the
// llama.* keys, rope scaling, tensor names, shapes and types) runs on every parsed file and must either
// list problems or give a valid config whose every tensor decodes. A file with tokenizer metadata also goes
// through the tokenizer's construction (gguf::read_vocab, make_gguf_tokenizer), and a tokenizer that loads
// must keep its promises: ids in [0, vocab_size) and decode(encode(text)) == text.
//
// Seeds: with EDGETRAIN_FUZZ_SEED_DIR set, LLVMFuzzerInitialize writes a few small GGUF files there before
// fuzzing starts: tokenizer metadata ("llama" and "gpt2" vocabularies, the byte tokenizer's export) and a
// one-layer Llama whose tensors are of every decodable type, with rope and quantization keys; pass that
// folder as a second corpus directory.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "edgetrain/error.h"
#include "edgetrain/tokenizer.h"
#include "io/gguf.h"
#include "io/gguf_llama.h"

namespace gguf = edgetrain::gguf;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

void round_trip(const edgetrain::Tokenizer& tok, std::string_view text) {
  const std::vector<int32_t> ids = tok.encode(text);
  for (int32_t id : ids) check(id >= 0 && id < tok.vocab_size());
  check(tok.decode(ids) == text);
  std::vector<int32_t> more = tok.encode_continuation(text);
  for (int32_t id : more) check(id >= 0 && id < tok.vocab_size());
}

void write_seed(const std::string& path, const edgetrain::GgufVocab& v) {
  gguf::Writer w;
  w.add_kv("general.architecture", gguf::Value::str("llama"));
  gguf::add_vocab(w, v);
  const std::vector<uint8_t> bytes = w.to_bytes();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return;
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return;
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

// A one-layer Llama (dim 256, so K-quant rows are whole super-blocks) whose tensors cover every decodable
// type, with the keys the Llama check reads.
void write_llama_seed(const std::string& path) {
  using V = gguf::Value;
  gguf::Writer w;
  w.add_kv("general.architecture", V::str("llama"));
  w.add_kv("general.quantization_version", V::u32(2));
  w.add_kv("llama.embedding_length", V::u32(256));
  w.add_kv("llama.block_count", V::u32(1));
  w.add_kv("llama.attention.head_count", V::u32(4));
  w.add_kv("llama.attention.head_count_kv", V::u32(2));
  w.add_kv("llama.feed_forward_length", V::u32(256));
  w.add_kv("llama.context_length", V::u32(64));
  w.add_kv("llama.rope.freq_base", V::f32(10000.0f));
  w.add_kv("llama.rope.scaling.type", V::str("linear"));
  w.add_kv("llama.rope.scaling.factor", V::f32(1.0f));
  w.add_kv("llama.attention.layer_norm_rms_epsilon", V::f32(1e-5f));
  w.add_kv("llama.vocab_size", V::u32(8));
  uint32_t seed = 1;
  auto add = [&](const std::string& name, std::vector<uint64_t> ne, uint32_t type) {
    std::vector<uint8_t> bytes(gguf::tensor_bytes(type, ne, name));
    for (uint8_t& b : bytes) b = static_cast<uint8_t>((seed = seed * 1103515245u + 12345u) >> 24);
    w.add_tensor(name, std::move(ne), type, std::move(bytes));
  };
  add("token_embd.weight", {256, 8}, gguf::Q4_K);
  add("blk.0.attn_norm.weight", {256}, gguf::F32);
  add("blk.0.attn_q.weight", {256, 256}, gguf::Q5_K);
  add("blk.0.attn_k.weight", {256, 128}, gguf::Q6_K);
  add("blk.0.attn_v.weight", {256, 128}, gguf::Q8_0);
  add("blk.0.attn_output.weight", {256, 256}, gguf::Q4_0);
  add("blk.0.ffn_norm.weight", {256}, gguf::BF16);
  add("blk.0.ffn_gate.weight", {256, 256}, gguf::F16);
  add("blk.0.ffn_up.weight", {256, 256}, gguf::Q4_K);
  add("blk.0.ffn_down.weight", {256, 256}, gguf::Q6_K);
  add("output_norm.weight", {256}, gguf::F32);
  add("output.weight", {256, 8}, gguf::Q6_K);
  write_file(path, w.to_bytes());
}

void write_seeds(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const edgetrain::GgufVocab bytes = edgetrain::make_byte_tokenizer()->gguf_vocab();
  write_seed(dir + "/seed_bytes.gguf", bytes);
  edgetrain::GgufVocab spm = bytes;  // byte tokens, then merges to "ab", "\u2581ab"
  spm.add_space_prefix = 1;
  for (const char* t : {"ab", "\xE2\x96\x81" "a", "\xE2\x96\x81" "ab"}) {
    spm.tokens.push_back(t);
    spm.scores.push_back(-1.0f * static_cast<float>(spm.tokens.size() % 7));
    spm.token_types.push_back(1);
  }
  spm.tokens.push_back("<|u|>");
  spm.scores.push_back(0);
  spm.token_types.push_back(4);
  write_seed(dir + "/seed_llama.gguf", spm);
  edgetrain::GgufVocab bpe;  // GPT-2's byte alphabet, "ab", "abc"
  bpe.model = "gpt2";
  bpe.pre = "gpt-2";
  for (int b = 0, extra = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const int cp = printable ? b : 256 + extra++;
    bpe.tokens.push_back(cp < 0x80 ? std::string(1, static_cast<char>(cp))
                                   : std::string{static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))});
  }
  bpe.tokens.push_back("ab");
  bpe.tokens.push_back("abc");
  bpe.tokens.push_back("<eos>");
  bpe.token_types.assign(bpe.tokens.size(), 1);
  bpe.token_types.back() = 3;
  bpe.eos = static_cast<int64_t>(bpe.tokens.size()) - 1;
  bpe.merges = {"a b", "ab c"};
  write_seed(dir + "/seed_gpt2.gguf", bpe);
  write_llama_seed(dir + "/seed_llama_model.gguf");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* seeds = std::getenv("EDGETRAIN_FUZZ_SEED_DIR"); seeds != nullptr && *seeds != '\0')
    write_seeds(seeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    gguf::File f = gguf::File::from_memory(data, size, "fuzz-input");
    for (const gguf::TensorInfo& t : f.tensors()) {
      const uint8_t* p = f.data(t);
      if (p < data || p + t.nbytes > data + size) std::abort();
      if (!gguf::can_decode(t.type)) continue;
      std::vector<float> v = f.to_f32(t);
      if (v.size() != t.numel) std::abort();
    }
    for (const auto& kv : f.metadata()) (void)kv.second.describe();
    const edgetrain::gguf_llama::Check llama = edgetrain::gguf_llama::check(f, edgetrain::TrainMode::qat, 32);
    if (llama.problems.empty()) {
      llama.config.validate();  // a config without problems is valid: this must not throw
      if (f.tensor("token_embd.weight") == nullptr) std::abort();
    }
    const edgetrain::GgufVocab vocab = gguf::read_vocab(f);
    if (!vocab.model.empty()) {
      auto tok = edgetrain::make_gguf_tokenizer(vocab, "fuzz-input");
      check(tok->eot() >= -1 && tok->eot() < tok->vocab_size());
      round_trip(*tok, "ab abc  a\xE2\x96\x81" "b\n<|u|>\xC3\xA9\xFF <eos> \xF0\x9F\x98\x80");
      round_trip(*tok, std::string_view(reinterpret_cast<const char*>(data), size < 256 ? size : 256));
      try {
        (void)tok->decode({static_cast<int32_t>(tok->vocab_size())});
        std::abort();
      } catch (const edgetrain::Error&) {
      }
    }
  } catch (const edgetrain::Error&) {
    // Rejected input: the expected outcome for nearly everything.
  }
  return 0;
}
