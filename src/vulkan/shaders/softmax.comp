// softmax / log_softmax / causal_softmax along the last dim: one workgroup per row (rows folded over the
// grid), each invocation streams a strided slice keeping an online (max, sum of exp) pair, the pairs meet
// in a fixed tree, and a second pass writes the row. Causal: row t of [..., T, S] sees columns
// j <= t + S - T of scale * x; the rest are written as 0. A row without a finite max is NaN (as PyTorch).
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint MODE = 0;  // 0 softmax, 1 log_softmax, 2 causal softmax
#include "generic_common.glsl"
#include "et_reduce.glsl"

layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) writeonly buffer O { float o[]; };
layout(set = 0, binding = 2) readonly buffer Scalars { float scal[]; };

layout(push_constant) uniform P {
  uint n;      // row length (S)
  uint rows;
  uint T;      // causal: rows per matrix
  uint scale_idx;
} p;

void main() {
  uint row = et_group();
  if (row >= p.rows) return;  // uniform per workgroup
  uint lid = gl_LocalInvocationID.x;
  uint base = row * p.n;
  float scale = MODE == 2u ? scal[p.scale_idx] : 1.0;
  uint visible = MODE == 2u ? (row % p.T) + (p.n - p.T) + 1u : p.n;

  float m = -ET_INF, l = 0.0;
  for (uint j = lid; j < visible; j += WG) {
    float v = scale * x[base + j];
    if (v == -ET_INF) continue;  // contributes exp(-inf) = 0
    if (v > m) {
      l = l * exp(m - v) + 1.0;
      m = v;
    } else {
      l += exp(v - m);  // NaN v makes l NaN, and so the row
    }
  }
  et_wg_softmax_state(m, l);
  bool bad = et_isinf(m);  // all -inf (no max) or +inf present: NaN row
  float inv = 1.0 / l, lse = m + log(l);

  for (uint j = lid; j < p.n; j += WG) {
    float y;
    if (j >= visible) y = 0.0;
    else if (bad) y = ET_NAN;
    else if (MODE == 1u) y = x[base + j] - lse;
    else y = exp(scale * x[base + j] - m) * inv;
    o[base + j] = y;
  }
}
