// A product with a shallow contraction (K <= 32, e.g. a LoRA rank): C[m, n] (+)= alpha * sum_k A(m, k) B(k, n)
// over a wide output, for fp32 operands (with the f16 flag the tiles measured faster: ops_gemm_narrow.cpp),
// bound by writing C (and reading it when accumulating), not by arithmetic. A 64x64
// tile's A rows and B columns are staged whole in workgroup memory; a lane owns one column n of 16 rows, so
// a subgroup's loads and stores of C are 32 adjacent floats. In a training step: a LoRA's y += s (x A^T) B^T
// and dx += dt A, each in place (mm with accumulate = 1), where the tiled GEMMs padded K to 16 or 32 and
// wrote a temporary that an add then read again.
#version 450
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x = 256) in;

layout(set = 0, binding = 0) readonly buffer BufA { float A[]; };
layout(set = 0, binding = 1) readonly buffer BufB { float B[]; };
layout(set = 0, binding = 2) buffer BufC { float C[]; };
layout(set = 0, binding = 3) readonly buffer BufScalars { float Scal[]; };

layout(push_constant) uniform Push {
  uint M, N, K;          // C is [M, N] row-major; K <= KMAX
  uint sa_row, sa_red;   // A(m, k) = A[m * sa_row + k * sa_red]
  uint sb_red, sb_col;   // B(k, n) = B[k * sb_red + n * sb_col]
  uint alpha_idx;        // scalar-block index of alpha, or 0xffffffff for 1
  uint flags;            // bit 1: accumulate into C
} pc;

const uint TILE = 64, KMAX = 32;
shared vec4 As[KMAX * TILE / 4];  // As[k][m / 4]: the tile's rows m, four to a vec4
shared float Bs[KMAX * TILE];     // Bs[k][n]

void main() {
  const uint tid = gl_LocalInvocationID.x, m0 = gl_WorkGroupID.y * TILE, n0 = gl_WorkGroupID.x * TILE;
  // Lane tid stages row m = tid % 64 of A's tile and column n = tid % 64 of B's at k = tid / 64 + 4 t (no
  // division by K: it cost more than the loads); all loads first, then the stores.
  const uint STAGE = KMAX / 4, ms = tid % TILE, k0 = tid / TILE;
  float a[STAGE], b[STAGE];
  [[unroll]] for (uint t = 0; t < STAGE; ++t) {
    uint k = k0 + 4 * t;
    a[t] = k < pc.K && m0 + ms < pc.M ? A[(m0 + ms) * pc.sa_row + k * pc.sa_red] : 0.0;
    b[t] = k < pc.K && n0 + ms < pc.N ? B[k * pc.sb_red + (n0 + ms) * pc.sb_col] : 0.0;
  }
  [[unroll]] for (uint t = 0; t < STAGE; ++t) {
    uint k = k0 + 4 * t;
    As[(k * TILE + ms) >> 2][ms & 3u] = a[t];
    Bs[k * TILE + ms] = b[t];
  }
  barrier();
  const uint col = tid % TILE, r0 = (tid / TILE) * 16;  // this lane: column n0 + col, rows m0 + r0 .. + 15
  float acc[16];
  [[unroll]] for (uint r = 0; r < 16; ++r) acc[r] = 0.0;
  for (uint k = 0; k < pc.K; ++k) {
    float b = Bs[k * TILE + col];
    [[unroll]] for (uint q = 0; q < 4; ++q) {
      vec4 a = As[(k * TILE + r0) / 4 + q];  // the same for the subgroup's lanes: a broadcast
      [[unroll]] for (uint t = 0; t < 4; ++t) acc[4 * q + t] += a[t] * b;
    }
  }
  const uint n = n0 + col;
  if (n >= pc.N) return;
  const float alpha = pc.alpha_idx != 0xffffffffu ? Scal[pc.alpha_idx] : 1.0;
  [[unroll]] for (uint r = 0; r < 16; ++r) {
    uint m = m0 + r0 + r;
    if (m >= pc.M) break;
    float v = alpha * acc[r];
    if ((pc.flags & 2u) != 0u) v += C[m * pc.N + n];
    C[m * pc.N + n] = v;
  }
}
