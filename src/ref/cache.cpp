// Reference of write_rows: the in-place row copy a KV cache is built from.
#include <cmath>

#include "ref/ref.h"

namespace edgetrain::ref {

// write_rows: x viewed as [R, C], out as [S, C]; out[row_offset + r, :] = x[r, :] for each r whose
// destination row lies in [0, S); other rows of out keep their contents. row_offset is a float slot
// (so one recorded program can append at a moving position); it is truncated toward zero.
void write_rows(const Call& c) {
  const View &x = c.in[0], &out = c.out[0];
  const int64_t C = x.shape.last(), R = x.numel() / std::max<int64_t>(C, 1), S = out.numel() / std::max<int64_t>(C, 1);
  const size_t row_bytes = static_cast<size_t>(C) * dtype_size(x.dtype);
  const double off = std::trunc(static_cast<double>(c.floats[0]));
  for (int64_t r = 0; r < R; ++r) {
    double dst = off + static_cast<double>(r);
    if (!(dst >= 0 && dst < static_cast<double>(S))) continue;
    std::memcpy(static_cast<char*>(out.data) + static_cast<size_t>(dst) * row_bytes,
                static_cast<const char*>(x.data) + static_cast<size_t>(r) * row_bytes, row_bytes);
  }
}

}  // namespace edgetrain::ref
