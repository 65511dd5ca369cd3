// The CPU reference of every op: plain loops over host memory, one function per op, no tricks.
// This is the spec every backend is tested against. Calls reaching these functions have passed
// check_call() (src/core/check.cpp and the signatures), so shapes and dtypes are already valid here.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "edgetrain/ops.h"
#include "edgetrain/tensor.h"

namespace edgetrain::ref {

// A host tensor seen by the reference: pointer, shape, dtype.
struct View {
  void* data = nullptr;
  Shape shape;
  DType dtype = DType::f32;
  template <typename T>
  T* as() const { return static_cast<T*>(data); }
  int64_t numel() const { return shape.numel(); }
  bool defined() const { return data != nullptr || shape.numel() == 0; }
};

// A resolved call: float arguments already hold their values for this replay.
struct Call {
  Op op;
  std::vector<View> in;   // an absent optional input has data == nullptr and rank 0... check has_in()
  std::vector<View> out;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  bool has_in(size_t i) const { return i < in.size() && in[i].data != nullptr; }
};

// Runs the reference of c.op.
void run(const Call& c);

// One declaration per catalogue op: void linear_q4gsw(const Call&); ...
#define ET_OP(name, family, inputs, outputs, ints, floats, summary) void name(const Call& c);
#include "edgetrain/ops.inc"
#undef ET_OP

// Owned host memory with a shape and dtype, for tests, tools and the CPU backend.
class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(Shape s, DType t) : shape_(s), dtype_(t), bytes_(static_cast<size_t>(s.numel()) * dtype_size(t)) {}
  template <typename T>
  static HostTensor from(Shape s, DType t, const std::vector<T>& v) {
    HostTensor h(s, t);
    std::memcpy(h.bytes_.data(), v.data(), h.bytes_.size());
    return h;
  }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  int64_t numel() const { return shape_.numel(); }
  size_t nbytes() const { return bytes_.size(); }
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }
  template <typename T>
  T* as() { return reinterpret_cast<T*>(bytes_.data()); }
  template <typename T>
  const T* as() const { return reinterpret_cast<const T*>(bytes_.data()); }
  template <typename T>
  std::vector<T> to_vector() const {
    std::vector<T> v(bytes_.size() / sizeof(T));
    std::memcpy(v.data(), bytes_.data(), v.size() * sizeof(T));
    return v;
  }
  View view() { return View{bytes_.data(), shape_, dtype_}; }

 private:
  Shape shape_;
  DType dtype_ = DType::f32;
  std::vector<unsigned char> bytes_;
};

// An operand value of a matrix product: as given, or with the call's f16 flag rounded to the nearest fp16
// (ties to even, overflow to inf; ops.inc). Products of such values are exact in double.
float gemm_operand(float v, bool f16);
// The f16 flag of a matrix-product call: its optional int at index i (ops.inc), absent = 0.
inline bool flag_at(const Call& c, size_t i) { return c.ints.size() > i && c.ints[i] != 0; }  // optional int i set
inline bool f16_flag(const Call& c, size_t i) { return flag_at(c, i); }

// Row pieces of the spec that the CPU backend's fast kernels also use for rows they hand to the reference's
// arithmetic (NaN, infinities): reduce.cpp, train.cpp.
// Numerically stable softmax of one row of n values times scale, written to y, in double. A row whose
// entries are all -inf has no finite maximum and gives NaN, as in PyTorch.
void softmax_row(const float* x, float* y, int64_t n, double scale);
// logsumexp_rows' value for a row with maximum mx and z = sum_j exp(x[j] - mx): mx + log z, or with
// accumulate that merged with the previous part's `old` (NaN stays; an old -inf adds nothing).
double part_lse(double mx, double z, bool accumulate, double old);

// Index helpers shared by the reference files.
// Row-major strides of a shape.
void strides_of(const Shape& s, int64_t* strides);
// Offset into a tensor of shape `src` broadcast to `dst`, for the dst multi-index idx (numpy rules).
int64_t broadcast_offset(const Shape& src, const Shape& dst, const int64_t* idx);
// Multi-index of flat position i in shape s.
void unravel(const Shape& s, int64_t i, int64_t* idx);

}  // namespace edgetrain::ref
