// Shapes, dtypes and tensor handles.
#include "edgetrain/tensor.h"

#include <algorithm>

#include "edgetrain/backend.h"

namespace edgetrain {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: case DType::i32: case DType::u32: return 4;
    case DType::u8: case DType::boolean: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::i32: return "i32";
    case DType::u8: return "u8";
    case DType::u32: return "u32";
    case DType::boolean: return "bool";
  }
  return "?";
}

Shape::Shape(std::initializer_list<int64_t> dims) {
  ET_CHECK(dims.size() <= kMaxRank, "shape of rank ", dims.size(), " exceeds the maximum rank ", kMaxRank);
  for (int64_t d : dims) {
    ET_CHECK(d >= 0, "negative dimension ", d, " in a shape");
    dims_[rank_++] = d;
  }
}

Shape Shape::of(const int64_t* dims, int rank) {
  ET_CHECK(rank >= 0 && rank <= kMaxRank, "shape of rank ", rank, " exceeds the maximum rank ", kMaxRank);
  Shape s;
  for (int i = 0; i < rank; ++i) {
    ET_CHECK(dims[i] >= 0, "negative dimension ", dims[i], " in a shape");
    s.dims_[i] = dims[i];
  }
  s.rank_ = rank;
  return s;
}

int64_t Shape::dim(int i) const {
  int j = i < 0 ? i + rank_ : i;
  ET_CHECK(j >= 0 && j < rank_, "dimension ", i, " out of range for shape ", str());
  return dims_[j];
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

int64_t Shape::rows() const {
  int64_t n = 1;
  for (int i = 0; i + 1 < rank_; ++i) n *= dims_[i];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (rank_ != o.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[i] != o.dims_[i]) return false;
  return true;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) s += (i ? ", " : "") + std::to_string(dims_[i]);
  return s + "]";
}

Storage::~Storage() {
  if (backend && owns && id) backend->free_storage(id, counted ? bytes : 0);
}

Tensor::Tensor(std::shared_ptr<Storage> s, Shape shape, DType dtype, size_t offset)
    : storage_(std::move(s)), shape_(shape), dtype_(dtype), offset_(offset) {
  ET_CHECK(storage_ && offset_ + nbytes() <= storage_->bytes, "tensor ", str(), " at byte ", offset_, " needs ",
           nbytes(), " bytes but its storage has ", storage_ ? storage_->bytes : 0);
}

Tensor Tensor::reshape(Shape s) const {
  ET_CHECK(s.numel() == numel(), "cannot reshape ", str(), " to ", s.str(), ": element counts differ");
  return Tensor(storage_, s, dtype_, offset_);
}

Tensor Tensor::rows(int64_t first, int64_t count) const {
  ET_CHECK(shape_.rank() >= 1 && first >= 0 && count >= 0 && first + count <= shape_[0], "rows ", first, " + ",
           count, " outside ", str());
  Shape s = shape_;
  s[0] = count;
  const size_t row_bytes = static_cast<size_t>(shape_.numel() / std::max<int64_t>(shape_[0], 1)) * dtype_size(dtype_);
  return Tensor(storage_, s, dtype_, offset_ + static_cast<size_t>(first) * row_bytes);
}

Tensor Tensor::bitcast(DType t) const {
  ET_CHECK(dtype_size(t) == dtype_size(dtype_), "cannot bitcast ", str(), " to ", dtype_name(t),
           ": element sizes differ");
  return Tensor(storage_, shape_, t, offset_);
}

std::string Tensor::str() const { return std::string(dtype_name(dtype_)) + shape_.str(); }

}  // namespace edgetrain
