// adamw_step, in place: one thread per 4 elements (vec4 loads/stores, component stores in the tail), grid
// folded in 2-D for any size; all seven hyper-parameters come from the scalar block, so learning-rate
// schedules and bias corrections change per replay without re-recording. The gradient is multiplied by
// grad_scale[0] when given (the clip and loss-scale factors, computed on the device) and zeroed once read,
// which spares the update a multiply and a fill per tensor. The arithmetic: adamw_update (adamw.glsl).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "adamw.glsl"

layout(local_size_x = 64) in;

layout(set = 0, binding = 0) readonly buffer BufP { vec4 P[]; };
layout(set = 0, binding = 1) readonly buffer BufM { vec4 Mo[]; };
layout(set = 0, binding = 2) readonly buffer BufV { vec4 Vo[]; };
layout(set = 0, binding = 3) readonly buffer BufG { vec4 G[]; };
layout(set = 0, binding = 4) readonly buffer BufGS { float GS[]; };  // grad_scale (a dummy when absent)
layout(set = 0, binding = 5) buffer BufPo { vec4 Po[]; };  // same buffers as bindings 0..3
layout(set = 0, binding = 6) buffer BufMo { vec4 Mout[]; };
layout(set = 0, binding = 7) buffer BufVo { vec4 Vout[]; };
layout(set = 0, binding = 8) buffer BufGo { vec4 Gout[]; };
layout(set = 0, binding = 9) readonly buffer BufScalars { float Sc[]; };

layout(push_constant) uniform Push {
  uint n;
  uint lr, beta1, beta2, eps, wd, bc1, bc2;  // scalar-block indices
  uint scaled;                               // 1: grad_scale is bound
} pc;

void main() {
  const uint i = linear_group_id() * 64 + gl_LocalInvocationID.x;
  if (4 * i >= pc.n) return;
  const float lr = Sc[pc.lr], b1 = Sc[pc.beta1], b2 = Sc[pc.beta2], eps = Sc[pc.eps], wd = Sc[pc.wd],
              bc1 = Sc[pc.bc1], bc2 = Sc[pc.bc2];
  precise vec4 g = G[i];
  if (pc.scaled != 0u) g = g * GS[0];
  vec4 p = P[i], m = Mo[i], v = Vo[i];
  adamw_update(p, m, v, g, lr, b1, b2, eps, wd, bc1, bc2);
  if (4 * i + 3 < pc.n) {
    Po[i] = p;
    Mout[i] = m;
    Vout[i] = v;
    Gout[i] = vec4(0.0);
  } else {
    for (uint c = 0; c < 4 && 4 * i + c < pc.n; ++c) {
      Po[i][c] = p[c];
      Mout[i][c] = m[c];
      Vout[i][c] = v[c];
      Gout[i][c] = 0.0;
    }
  }
}
