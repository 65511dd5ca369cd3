// fused_ce, per-row pass for vocabularies that fit in registers (V <= 32 * WG; ops_train.cpp picks it):
// one workgroup per row, each lane keeps its up to 32 logits (j = lane + i*WG) in registers, so the row is
// read from memory once and dlogits written once — the bandwidth floor of the op — instead of streaming it
// twice like fused_ce.comp. Exact max first, then the sum of exp(x - max), both merged in a fixed
// shared-memory tree (deterministic); dlogits may alias logits (each element is read and written by the
// same lane, and every read happens before the first barrier).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 1024;  // power of two
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) buffer BufL { float Lg[]; };  // no readonly: may alias dlogits
layout(set = 0, binding = 1) readonly buffer BufY { int Labels[]; };
layout(set = 0, binding = 2) buffer BufLoss { float Loss[]; };
layout(set = 0, binding = 3) buffer BufD { float D[]; };
layout(set = 0, binding = 4) readonly buffer BufScalars { float Sc[]; };
layout(set = 0, binding = 5) buffer BufRows { float RowLoss[]; };

layout(push_constant) uniform Push {
  uint R, V, n_valid_idx;
} pc;

const uint C = 32;  // logits per lane
shared float red[WG];
shared float s_xy;

void main() {
  const uint r = linear_group_id();
  if (r >= pc.R) return;  // uniform across the workgroup
  const uint lane = gl_LocalInvocationID.x, base = r * pc.V;
  const int y = Labels[r];
  const bool live = y >= 0 && uint(y) < pc.V;
  float x[C];
  float m = -3.4028235e38;
  [[unroll]] for (uint i = 0; i < C; ++i) {
    uint j = lane + i * WG;
    x[i] = (live && j < pc.V) ? Lg[base + j] : -3.4028235e38;
    m = max(m, x[i]);
  }
  if (live && lane == 0) s_xy = Lg[base + uint(y)];
  red[lane] = m;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (lane < s) red[lane] = max(red[lane], red[lane + s]);
    barrier();
  }
  const float mu = red[0];
  barrier();
  float l = 0.0;
  [[unroll]] for (uint i = 0; i < C; ++i)
    if (lane + i * WG < pc.V) l += exp(x[i] - mu);
  red[lane] = l;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (lane < s) red[lane] += red[lane + s];
    barrier();
  }
  const float z = red[0], nv = Sc[pc.n_valid_idx];
  if (y < 0) {
    [[unroll]] for (uint i = 0; i < C; ++i)
      if (lane + i * WG < pc.V) D[base + lane + i * WG] = 0.0;
    if (lane == 0) RowLoss[r] = 0.0;
  } else if (uint(y) >= pc.V) {
    [[unroll]] for (uint i = 0; i < C; ++i)
      if (lane + i * WG < pc.V) D[base + lane + i * WG] = nan_f32();
    if (lane == 0) RowLoss[r] = nan_f32();
  } else {
    [[unroll]] for (uint i = 0; i < C; ++i) {
      uint j = lane + i * WG;
      if (j < pc.V) D[base + j] = (exp(x[i] - mu) / z - (j == uint(y) ? 1.0 : 0.0)) / nv;
    }
    if (lane == 0) RowLoss[r] = (mu + log(z) - s_xy) / nv;
  }
}
