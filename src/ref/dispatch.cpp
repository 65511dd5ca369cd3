// Dispatch from Op to its reference function, and index helpers shared by the reference files.
#include "ref/ref.h"

namespace edgetrain::ref {

void run(const Call& c) {
  switch (c.op) {
#define ET_OP(name, family, inputs, outputs, ints, floats, summary) \
  case Op::name:                                                   \
    name(c);                                                       \
    return;
#include "edgetrain/ops.inc"
#undef ET_OP
  }
}

void strides_of(const Shape& s, int64_t* strides) {
  int64_t st = 1;
  for (int i = s.rank() - 1; i >= 0; --i) {
    strides[i] = st;
    st *= s[i];
  }
}

int64_t broadcast_offset(const Shape& src, const Shape& dst, const int64_t* idx) {
  int64_t st[kMaxRank];
  strides_of(src, st);
  int64_t off = 0;
  for (int i = 0; i < src.rank(); ++i) {
    int di = dst.rank() - src.rank() + i;
    if (src[i] != 1) off += idx[di] * st[i];
  }
  return off;
}

void unravel(const Shape& s, int64_t i, int64_t* idx) {
  for (int d = s.rank() - 1; d >= 0; --d) {
    idx[d] = s[d] ? i % s[d] : 0;
    i = s[d] ? i / s[d] : 0;
  }
}

}  // namespace edgetrain::ref
