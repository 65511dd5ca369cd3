// Reading and writing Hugging Face safetensors files: a bounds-checked reader (memory-mapped, or from a
// buffer) that rejects every malformed header with an Error naming the file, and a writer that lays
// tensors out in name order behind a space-padded, 8-byte aligned JSON header and saves atomically.
//
// Layout: u64 little-endian header length N, N bytes of UTF-8 JSON
//   {"__metadata__": {str: str}, "<name>": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}, ...}
// then the data buffer. Offsets are relative to the buffer; the tensors tile it exactly, without gaps or
// overlaps. Tensor data is raw little-endian and row-major; it may be unaligned in a foreign file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "edgetrain/tensor.h"

namespace edgetrain::safetensors {

// Largest header the reader accepts (and the writer produces).
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
// Most dimensions a tensor may have in a file.
constexpr int kMaxFileRank = 32;

// Bytes per element of a safetensors dtype string ("F32", "BF16", "U8", "BOOL", ...); throws Error on
// a dtype this library does not know.
size_t dtype_bytes(const std::string& dtype);
bool is_known_dtype(const std::string& dtype);
// "F32", "I32", "U8", "U32", "BOOL" for the library's dtypes.
const char* dtype_string(DType t);

// One tensor's entry in the header.
struct TensorInfo {
  std::string name;
  std::string dtype;           // as written in the file, e.g. "F32"
  std::vector<int64_t> shape;  // empty: a scalar with one element
  uint64_t begin = 0, end = 0; // byte span in the data buffer
  uint64_t nbytes() const { return end - begin; }
  int64_t numel() const;       // product of shape (1 for a scalar); fits because nbytes fits the file
};

// A parsed, validated file. Move-only; data pointers stay valid while the Reader lives.
class Reader {
 public:
  // Maps the file read-only (small files are read into memory instead). Throws Error naming the path.
  static Reader open(const std::string& path);
  // Parses a buffer the caller keeps alive for the Reader's lifetime; `source` names it in errors.
  static Reader from_memory(const void* data, size_t size, const std::string& source = "<memory>");

  Reader(Reader&&) noexcept;
  Reader& operator=(Reader&&) noexcept;
  ~Reader();

  const std::string& source() const { return source_; }
  // In data order (by offset, then name).
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const;
  const TensorInfo& info(const std::string& name) const;  // throws Error naming file and tensor
  // First byte of the tensor's data (valid even for an empty tensor); may be unaligned.
  const uint8_t* data(const std::string& name) const;
  // F32, F16 or BF16 data converted to f32 values; other dtypes throw.
  std::vector<float> to_f32(const std::string& name) const;
  uint64_t data_bytes() const { return data_size_; }

 private:
  struct Backing;
  Reader() = default;
  void parse(const uint8_t* bytes, uint64_t size);

  std::string source_;
  std::unique_ptr<Backing> backing_;
  const uint8_t* buffer_ = nullptr;  // start of the data buffer
  uint64_t data_size_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// n elements of F32/F16/BF16 data (possibly unaligned) to f32.
void convert_to_f32(const std::string& dtype, const uint8_t* src, size_t n, float* dst);

// Collects tensors and metadata, then writes them in name order.
class Writer {
 public:
  // Refers to `data` without copying: it must stay alive until write()/save()/to_bytes() are done.
  // bytes must equal numel(shape) * dtype_bytes(dtype). Duplicate or empty names throw Error.
  void add(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape, const void* data,
           size_t bytes);
  // Takes ownership of the bytes.
  void add_owned(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
                 std::vector<uint8_t> bytes);
  // Produces the bytes only while writing (one tensor in memory at a time): `fill` gets a buffer of
  // `bytes` bytes to fill. For streaming large models from a device.
  void add_deferred(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
                    size_t bytes, std::function<void(uint8_t* dst)> fill);
  void set_metadata(const std::string& key, const std::string& value);
  size_t size() const { return entries_.size(); }

  // The header: length prefix plus JSON padded with spaces to a multiple of 8.
  std::vector<uint8_t> header() const;
  std::vector<uint8_t> to_bytes() const;
  // Writes the whole file through a stdio stream, checking every write.
  void write(std::FILE* f, const std::string& path_for_errors) const;
  // Atomic save: temp file, fsync, rename over `path`, fsync of the directory.
  void save(const std::string& path) const;

 private:
  struct Entry {
    std::string dtype;
    std::vector<int64_t> shape;
    const uint8_t* data = nullptr;
    size_t bytes = 0;
    std::shared_ptr<std::vector<uint8_t>> owned;
    std::function<void(uint8_t*)> fill;  // deferred entries: data == nullptr
  };
  // Calls `sink` with each tensor's bytes in name order.
  void for_each_data(const std::function<void(const uint8_t*, size_t)>& sink) const;
  void check_entry(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
                   size_t bytes) const;
  std::map<std::string, Entry> entries_;  // name order = data order
  std::map<std::string, std::string> metadata_;
};

}  // namespace edgetrain::safetensors
