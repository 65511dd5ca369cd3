// Op signatures: what every op accepts (counts, dtypes, shapes, aliasing) and what its outputs are. One
// function per op, sig_<op>(Ctx&), in a file per op family (signatures_train.cpp, signatures_tensor.cpp,
// signatures_llama.cpp); check.cpp's check_call() and infer_outputs() run them, and every backend calls
// check_call() at record time, so misuse fails the same way everywhere, with the op and the shapes in the
// message.
#pragma once
#include <cstdint>
#include <vector>

#include "edgetrain/backend.h"

namespace edgetrain::sig {

// The call being checked, and the outputs its signature expects.
struct Ctx {
  const OpCall& c;
  const OpInfo& info;
  std::vector<OutSpec> expect;  // filled by the op's signature unless outputs_given
  bool outputs_given = false;   // the op validates caller-chosen outputs itself
  bool inferring = false;       // infer_outputs(): no outputs are present

  template <typename... A>
  [[noreturn]] void bad(const A&... a) const {
    fail(info.name, ": ", a..., " (call: ", c.str(), ")");
  }
  const Tensor& in(size_t i) const { return c.in[i]; }
  bool has_in(size_t i) const { return i < c.in.size() && c.in[i].defined(); }
  int64_t ival(size_t i) const { return c.ints[i]; }
  void dtype(const Tensor& t, DType want, const char* what) const {
    if (t.dtype() != want) bad(what, " must be ", dtype_name(want), ", got ", t.str());
  }
  void rank_at_least(const Tensor& t, int r, const char* what) const {
    if (t.shape().rank() < r) bad(what, " must have rank >= ", r, ", got ", t.str());
  }
  void rank_is(const Tensor& t, int r, const char* what) const {
    if (t.shape().rank() != r) bad(what, " must have rank ", r, ", got ", t.str());
  }
  void flag(size_t i, const char* what) const {
    if (ival(i) != 0 && ival(i) != 1) bad(what, " must be 0 or 1, got ", ival(i));
  }
  // The optional trailing f16 flag of the matrix products, at int index i when given.
  void f16_flag(size_t i) const {
    if (c.ints.size() > i) flag(i, "f16");
  }
  void out(Shape s, DType t) { expect.push_back({s, t}); }
};

// Shape helpers (check.cpp).
Shape with_last(const Shape& s, int64_t last);
Shape append_dim(const Ctx& x, const Shape& s, int64_t last);
// numpy broadcasting; fails naming both shapes.
Shape broadcast(const Ctx& x, const Shape& a, const Shape& b);
// A part of a vocabulary: rows first .. first+Vp-1 of `total` (int arguments at fi and ti; ti < 0: no total).
void vocab_part(const Ctx& x, int64_t Vp, size_t fi, int ti);

#define ET_OP(name, ...) void sig_##name(Ctx& x);
#include "edgetrain/ops.inc"
#undef ET_OP

}  // namespace edgetrain::sig
