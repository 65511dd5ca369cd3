// GGUF (v3, little-endian) files, private to io: the container (gguf_file.cpp: a bounds-checked reader that
// rejects every malformed file with an Error naming it, and a writer), the tensor types' block codecs
// (gguf_blocks.cpp: the type table, F32, F16, BF16, Q4_0, Q8_0 and the exact Q4_0 <-> q4gsw group-32
// conversion; gguf_kquants.cpp: Q4_K, Q5_K, Q6_K and llama.cpp's Q4_K quantizer), and the tokenizer metadata
// as a GgufVocab (gguf_vocab.cpp). Llama models on top of these: gguf_llama.cpp. The public entry points are
// in edgetrain/interop.h.
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
// The tensor types edgetrain decodes (ggml's numbers). Every other type ggml defines is known by name and
// size (files holding one parse, and `info` names it) but not decoded.
enum TType : uint32_t { F32 = 0, F16 = 1, Q4_0 = 2, Q8_0 = 8, Q4_K = 12, Q5_K = 13, Q6_K = 14, BF16 = 30 };
constexpr uint64_t kQK = 256;  // elements of a K-quant super-block
// ggml's name of a type ("Q4_K", "IQ2_XS", ...), or "type N" for a number ggml does not define.
std::string type_name(uint32_t t);
bool can_decode(uint32_t t);
// The types can_decode accepts, as a list for messages: "F32, F16, BF16, Q4_0, Q8_0, Q4_K, Q5_K, Q6_K".
const char* decodable_types();
// Elements and bytes of one block of a type ggml defines; {0, 0} for any other number.
struct BlockSize {
  uint64_t elems = 0, bytes = 0;
};
BlockSize block_size(uint32_t t);

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

// Bytes of a tensor of type `type` and dims `ne` (fastest first). Blocks never straddle rows, so ne[0] must
// be a multiple of the block size; throws Error starting with `what` on a type ggml does not define or a
// partial block.
uint64_t tensor_bytes(uint32_t type, const std::vector<uint64_t>& ne, const std::string& what);

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
  // A decodable type (can_decode) decoded to f32, in row-major order (ne[0] fastest); throws Error naming
  // the file, the tensor and its type for another.
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

// `numel` elements (whole blocks) of a decodable type decoded to f32; throws for another type. Every decoder
// gives llama.cpp's dequantize_row_* result bit for bit: each value is one product of small integers and
// fp16 scales, exact in f32, and for Q4_K/Q5_K minus one exact product, so a single rounding at most (which
// no order of evaluation or fused multiply-add changes). tests/test_gguf_blocks.cpp checks it against
// llama.cpp's own functions.
void decode_to_f32(uint32_t type, const uint8_t* src, uint64_t numel, float* dst);
void decode_q4_0(const uint8_t* src, uint64_t numel, float* dst);
void decode_q8_0(const uint8_t* src, uint64_t numel, float* dst);
void decode_q4_k(const uint8_t* src, uint64_t numel, float* dst);
void decode_q5_k(const uint8_t* src, uint64_t numel, float* dst);
void decode_q6_k(const uint8_t* src, uint64_t numel, float* dst);
// The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block's 12 packed scale bytes.
void k_scale_min(const uint8_t* scales, int j, uint8_t* sc, uint8_t* m);
// Q4_0 weight [N, K] (K % 32 == 0) to q4gsw group 32: codes [N, K] and scales [K/32, N] (fp16 d widened).
void q4_0_to_q4gsw(const uint8_t* src, int64_t N, int64_t K, uint8_t* codes, float* scales);
// The inverse; every scale must be exactly fp16-representable (checked; throws otherwise).
std::vector<uint8_t> q4gsw_to_q4_0(int64_t N, int64_t K, const uint8_t* codes, const float* scales);
// Quantizers of fp32 values (numel a multiple of the block size, every value finite) that give the bytes
// llama.cpp's reference quantizers (quantize_row_*_ref, what its `llama-quantize` writes without an
// importance matrix) give for the same values, bit for bit: the same arithmetic in the same order,
// compiled without fused multiply-add contraction (CMakeLists.txt).
std::vector<uint8_t> quantize_q4_0(const float* w, uint64_t numel);  // d = max-magnitude value / -8
std::vector<uint8_t> quantize_q8_0(const float* w, uint64_t numel);  // d = max |value| / 127
std::vector<uint8_t> quantize_q4_k(const float* w, uint64_t numel);

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
