// GGUF (v3, little-endian) files, private to io: the container (gguf_file.cpp: a bounds-checked reader that
// rejects every malformed file with an Error naming it, and a writer), the tensor types' block codecs
// (gguf_blocks.cpp: F32, F16, Q8_0, Q4_0 and the exact Q4_0 <-> q4gsw group-32 conversion), and the
// tokenizer metadata as a GgufVocab (gguf_vocab.cpp). Llama models on top of these: gguf_llama.cpp. The
// public entry points are in edgetrain/interop.h.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "edgetrain/tokenizer.h"

namespace edgetrain::gguf {

constexpr uint32_t kMagic = 0x46554747u;  // "GGUF" read as a little-endian u32
constexpr uint32_t kVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;
constexpr int kMaxArrayDepth = 8;

enum class VType : uint32_t { U8 = 0, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 };
enum TType : uint32_t { F32 = 0, F16 = 1, Q4_0 = 2, Q8_0 = 8 };
const char* type_name(uint32_t t);  // "F32", ..., "unsupported"

// One metadata value. Integers are kept in `i` (signed) or `u` (unsigned), floats in `f`.
struct Value {
  VType type = VType::U8;
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  std::string s;
  VType elem = VType::U8;  // arrays: element type
  std::vector<Value> arr;

  static Value str(std::string v);
  static Value u32(uint32_t v);
  static Value f32(float v);
  static Value boolean(bool v);
  static Value strings(const std::vector<std::string>& v);
  static Value f32s(const std::vector<float>& v);
  static Value i32s(const std::vector<int32_t>& v);
  bool is_int() const;
  bool is_float() const { return type == VType::F32 || type == VType::F64; }
  std::string describe(size_t max_items = 8) const;  // short human-readable form
};

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> ne;  // fastest-varying first: ne[0] = K of a weight [N, K]
  uint32_t type = 0;
  uint64_t offset = 0;  // relative to the data section
  uint64_t nbytes = 0;
  uint64_t numel = 0;
};

// Bytes of `numel` elements of a tensor type (numel must be a multiple of the block size); throws on an
// unknown type or a partial block.
uint64_t tensor_bytes(uint32_t type, uint64_t numel, const std::string& what);

class File {
 public:
  static File open(const std::string& path);
  // The caller keeps `data` alive while the File lives.
  static File from_memory(const void* data, size_t size, const std::string& source = "<memory>");

  const std::string& source() const { return source_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(const std::string& key) const;
  bool has(const std::string& key) const { return find(key) != nullptr; }
  // Typed lookups: throw Error naming the file and key when missing or of the wrong type.
  std::string get_string(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* tensor(const std::string& name) const;
  const uint8_t* data(const TensorInfo& t) const { return data_ + t.offset; }
  // Any supported type decoded to f32, in row-major order (ne[0] fastest).
  std::vector<float> to_f32(const TensorInfo& t) const;

 private:
  File() = default;
  void parse(const uint8_t* p, uint64_t size);
  std::string source_;
  std::shared_ptr<std::vector<uint8_t>> owned_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  std::vector<std::pair<std::string, Value>> kv_;
  std::map<std::string, size_t> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
  const uint8_t* data_ = nullptr;
};

// `numel` elements of a tensor type (F32, F16, Q4_0, Q8_0) decoded to f32; throws for another type.
void decode_to_f32(uint32_t type, const uint8_t* src, uint64_t numel, float* dst);
// Blocks of 32 decoded to f32.
void decode_q4_0(const uint8_t* src, uint64_t numel, float* dst);
void decode_q8_0(const uint8_t* src, uint64_t numel, float* dst);
// Q4_0 weight [N, K] (K % 32 == 0) to q4gsw group 32: codes [N, K] and scales [K/32, N] (fp16 d widened).
void q4_0_to_q4gsw(const uint8_t* src, int64_t N, int64_t K, uint8_t* codes, float* scales);
// The inverse; every scale must be exactly fp16-representable (checked; throws otherwise).
std::vector<uint8_t> q4gsw_to_q4_0(int64_t N, int64_t K, const uint8_t* codes, const float* scales);
// Quantizes fp32 rows to Q4_0 the way llama.cpp does it (d = max-magnitude value / -8).
std::vector<uint8_t> quantize_q4_0(const float* w, uint64_t numel);

class Writer {
 public:
  void add_kv(const std::string& key, Value v);
  // `ne` fastest first; bytes must match tensor_bytes(type, prod(ne)).
  void add_tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, std::vector<uint8_t> bytes);
  std::vector<uint8_t> to_bytes() const;
  void save(const std::string& path) const;

 private:
  std::vector<std::pair<std::string, Value>> kv_;
  struct T {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type;
    std::vector<uint8_t> bytes;
  };
  std::vector<T> tensors_;
};

// The tokenizer.ggml.* keys of a file (model "" when tokenizer.ggml.model is absent). Throws Error naming the
// file and key when one has the wrong type, an array the wrong element type, or scores/token_type a count
// other than the tokens'. Ids and texts are checked by the text layer (make_gguf_tokenizer): io describes
// the vocabulary, it never builds a tokenizer.
GgufVocab read_vocab(const File& f);
// Adds the keys of `v` (those it has) to a writer, in llama.cpp's types.
void add_vocab(Writer& w, const GgufVocab& v);

}  // namespace edgetrain::gguf
