// Tensors: a shape (rank 0..4), a dtype and a handle to backend memory. Always contiguous, row-major.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "edgetrain/error.h"

namespace edgetrain {

// u32 holds packed 4-bit codes (W_4X8 words); u8 holds interchange bytes; boolean is one byte per element.
enum class DType : uint8_t { f32, i32, u8, u32, boolean };

size_t dtype_size(DType t);
const char* dtype_name(DType t);

constexpr int kMaxRank = 4;

// A shape of rank 0..4. Rank 0 is a scalar with one element.
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  static Shape of(const int64_t* dims, int rank);

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[i]; }
  int64_t& operator[](int i) { return dims_[i]; }
  // Negative i counts from the back: dim(-1) is the last dimension.
  int64_t dim(int i) const;
  int64_t numel() const;
  // Product of all dims but the last (the "M" of a linear); 1 for rank <= 1.
  int64_t rows() const;
  int64_t last() const { return rank_ == 0 ? 1 : dims_[rank_ - 1]; }
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }
  std::string str() const;  // "[2, 3]"
  const int64_t* data() const { return dims_.data(); }

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

class Backend;

// Owns one device allocation; the backend frees it when the last Tensor referring to it goes away.
// A Graph recording into a Program makes its outputs `planned`: they get memory when the program is
// finalized (Program's memory plan; id 0 until then), and those used only inside the program share buffers
// whose uses never overlap — the program owns those buffers (owns is false here).
struct Storage {
  Backend* backend = nullptr;
  uint64_t id = 0;
  size_t bytes = 0;
  bool counted = false;  // in the backend's tensor_memory() (made by Backend::zeros)
  bool planned = false;
  bool owns = true;
  Storage(Backend* b, uint64_t i, size_t n) : backend(b), id(i), bytes(n) {}
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

// A contiguous view of an allocation with a shape and dtype: the whole allocation, or (rows()) a range of
// its rows starting `offset` bytes in. Copying a Tensor shares the memory.
class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<Storage> s, Shape shape, DType dtype, size_t offset = 0);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  int64_t numel() const { return shape_.numel(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  // Where the view starts in its allocation, in bytes (0 for a whole tensor).
  size_t offset() const { return offset_; }
  Backend* backend() const { return storage_ ? storage_->backend : nullptr; }
  uint64_t id() const { return storage_ ? storage_->id : 0; }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  // Same memory, another shape with the same number of elements (free: tensors are contiguous).
  Tensor reshape(Shape s) const;
  // Same memory seen as another dtype of the same element size (e.g. i32 <-> u32 <-> f32 bits).
  Tensor bitcast(DType t) const;
  // Rows [first, first + count) of dimension 0, the same memory: how a tensor larger than a device binds
  // in one kernel (Backend::max_binding_bytes) is processed a part at a time.
  Tensor rows(int64_t first, int64_t count) const;
  std::string str() const;  // "f32[2, 3]"
  // Whether the two views share a byte of memory.
  bool same_memory(const Tensor& o) const {
    return storage_ && storage_ == o.storage_ && offset_ < o.offset_ + o.nbytes() && o.offset_ < offset_ + nbytes();
  }

 private:
  std::shared_ptr<Storage> storage_;
  Shape shape_;
  DType dtype_ = DType::f32;
  size_t offset_ = 0;
};

}  // namespace edgetrain
