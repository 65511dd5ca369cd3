// write_rows: out[off + r, :] = x[r, :] for destination rows inside out (off = trunc(row_offset) from the
// scalar block, so a recorded program can append at a moving position; NaN writes nothing). The grid
// covers x; invocations find their destination at run time. 4-byte dtypes: one element per invocation;
// 1-byte dtypes: one destination word per invocation (rows need not be word-aligned), merging bytes
// outside the written range back, so no two invocations write one word.
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 128) in;
#include "generic_common.glsl"

layout(constant_id = 0) const uint BYTES = 4;  // element size: 4 or 1

layout(set = 0, binding = 0) readonly buffer X { uint xw[]; };
layout(set = 0, binding = 1) buffer O { uint ow[]; };
layout(set = 0, binding = 2) readonly buffer Scalars { float scal[]; };

layout(push_constant) uniform P {
  uint C;  // row length (elements)
  uint R;  // rows of x
  uint S;  // rows of out
  uint off_idx;
} p;

void main() {
  uint t = et_thread();
  float off = trunc(scal[p.off_idx]);
  if (et_isnan(off) || off >= float(p.S) || off <= -float(p.R)) return;
  int o = int(off);  // in (-R, S): fits
  // destination rows [lo, hi) of out receive x rows [lo - o, hi - o)
  uint lo = uint(max(o, 0)), hi = uint(min(int(p.S), o + int(p.R)));
  if (lo >= hi) return;
  if (BYTES == 4u) {
    uint e = lo * p.C + t;  // destination element
    if (e >= hi * p.C) return;
    ow[e] = xw[e - lo * p.C + uint(int(lo) - o) * p.C];
    return;
  }
  uint b0 = lo * p.C, b1 = hi * p.C;  // destination byte range
  uint w = b0 / 4u + t;
  if (4u * w >= b1) return;
  uint src0 = uint(int(lo) - o) * p.C;  // source byte of destination byte b0
  uint old = ow[w], word = 0u;
  for (uint k = 0u; k < 4u; ++k) {
    uint b = 4u * w + k, v;
    if (b >= b0 && b < b1) {
      uint s = b - b0 + src0;
      v = et_byte(xw[s >> 2], s & 3u);
    } else {
      v = et_byte(old, k);
    }
    word |= v << (8u * k);
  }
  ow[w] = word;
}
