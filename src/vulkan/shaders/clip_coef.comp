// clip_coef: coef = min(1, max_norm / (norm + 1e-6)); a NaN norm gives NaN (never silently 1).
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 1) in;
#include "generic_common.glsl"

layout(set = 0, binding = 0) readonly buffer N { float norm[]; };
layout(set = 0, binding = 1) writeonly buffer C { float coef[]; };
layout(set = 0, binding = 2) readonly buffer Scalars { float scal[]; };

layout(push_constant) uniform P {
  uint max_idx;
} p;

void main() {
  float nv = norm[0];
  float c = scal[p.max_idx] / (nv + 1e-6);
  if (c > 1.0) c = 1.0;
  coef[0] = et_isnan(nv) ? ET_NAN : c;
}
