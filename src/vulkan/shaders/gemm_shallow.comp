// A product with a shallow contraction (K <= 32, e.g. a LoRA rank): C[m, n] (+)= alpha * sum_k A(m, k) B(k, n)
// over a wide output — in a training step a LoRA's y += s (x A^T) B^T and dx += dt A, each in place (mm with
// accumulate = 1). Its cost is the bytes of C (read and written), so it is written as a stream: each lane owns
// 4 adjacent columns of 8 rows of a 64x128 tile, requests its 8 old output rows (16-byte loads) before anything
// else, stages A's 64 rows and B's 128 columns (K deep, zero-padded to KMAX) in workgroup memory meanwhile,
// and then does its 8 x 4 x KMAX FMAs from there. The first version (a lane per column of 16 rows, C read only
// after the products) reached about 1 TB/s; the tiled GEMMs padded K to 64 and wrote a temporary.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(constant_id = 0) const uint KMAX = 16;        // 16 or 32 >= K
layout(constant_id = 1) const uint A_K_CONTIG = 1;   // A(m, k) has k stride 1 (staging map)
layout(constant_id = 2) const uint B_N_CONTIG = 0;   // B(k, n) has n stride 1 (staging map)
layout(constant_id = 3) const uint VEC_C = 1;        // N % 4 == 0: a lane's 4 columns are one vec4 of C
layout(constant_id = 4) const uint F16 = 0;          // operands rounded to fp16 (the f16 flag)

layout(local_size_x = 256) in;

layout(set = 0, binding = 0) readonly buffer BufA { float A[]; };
layout(set = 0, binding = 1) readonly buffer BufB { float B[]; };
layout(set = 0, binding = 2) buffer BufC { float C[]; };
layout(set = 0, binding = 2) buffer BufC4 { vec4 C4[]; };
layout(set = 0, binding = 3) readonly buffer BufScalars { float Scal[]; };

layout(push_constant) uniform Push {
  uint M, N, K;          // C is [M, N] row-major; K <= KMAX
  uint sa_row, sa_red;   // A(m, k) = A[m * sa_row + k * sa_red]
  uint sb_red, sb_col;   // B(k, n) = B[k * sb_red + n * sb_col]
  uint alpha_idx;        // scalar-block index of alpha, or 0xffffffff for 1
  uint flags;            // bit 1: accumulate into C
} pc;

const uint TM = 64, TN = 128, ROWS = 8;  // tile; rows per lane (a subgroup of 32 lanes spans TN columns)
shared vec4 As[KMAX * TM / 4];           // As[k][m]: the tile's rows m, four to a vec4
shared vec4 Bs[KMAX * TN / 4];           // Bs[k][n]: four adjacent columns to a vec4

float rnd(float v) { return F16 == 1 ? et_round_f16(v) : v; }

// C row m's columns n .. n + 3 (zeros past N).
vec4 load_c(uint m, uint n) {
  if (VEC_C == 1) return n < pc.N ? C4[(m * pc.N + n) >> 2] : vec4(0.0);
  vec4 v = vec4(0.0);
  [[unroll]] for (uint u = 0; u < 4; ++u)
    if (n + u < pc.N) v[u] = C[m * pc.N + n + u];
  return v;
}

void store_c(uint m, uint n, vec4 v) {
  if (VEC_C == 1) {
    if (n < pc.N) C4[(m * pc.N + n) >> 2] = v;
    return;
  }
  [[unroll]] for (uint u = 0; u < 4; ++u)
    if (n + u < pc.N) C[m * pc.N + n + u] = v[u];
}

void main() {
  const uint tid = gl_LocalInvocationID.x, lane = tid & 31u, row0 = (tid >> 5) * ROWS;
  const uint m0 = gl_WorkGroupID.y * TM, n0 = gl_WorkGroupID.x * TN, n = n0 + 4 * lane;
  const bool acc_c = (pc.flags & 2u) != 0u;

  // The old output first: its latency overlaps the staging below.
  vec4 c[ROWS];
  [[unroll]] for (uint r = 0; r < ROWS; ++r)
    c[r] = acc_c && m0 + row0 + r < pc.M ? load_c(m0 + row0 + r, n) : vec4(0.0);
  const float alpha = pc.alpha_idx != 0xffffffffu ? Scal[pc.alpha_idx] : 1.0;

  // Staging: entry e of A's tile is (m, k) = (e / KMAX, e % KMAX) when A's k is contiguous, else
  // (e % TM, e / TM) — adjacent lanes read adjacent addresses either way; likewise B's. All loads are
  // issued before any rounding (et_round_f16's branches between loads would serialize them).
  const uint SA = KMAX * TM / 256, SB = KMAX * TN / 256;
  float a[SA], b[SB];
  [[unroll]] for (uint t = 0; t < SA; ++t) {
    uint e = tid + 256 * t;
    uint m = A_K_CONTIG == 1 ? e / KMAX : e % TM, k = A_K_CONTIG == 1 ? e % KMAX : e / TM;
    a[t] = k < pc.K && m0 + m < pc.M ? A[(m0 + m) * pc.sa_row + k * pc.sa_red] : 0.0;
  }
  [[unroll]] for (uint t = 0; t < SB; ++t) {
    uint e = tid + 256 * t;
    uint nn = B_N_CONTIG == 1 ? e % TN : e / KMAX, k = B_N_CONTIG == 1 ? e / TN : e % KMAX;
    b[t] = k < pc.K && n0 + nn < pc.N ? B[k * pc.sb_red + (n0 + nn) * pc.sb_col] : 0.0;
  }
  [[unroll]] for (uint t = 0; t < SA; ++t) {
    uint e = tid + 256 * t;
    uint m = A_K_CONTIG == 1 ? e / KMAX : e % TM, k = A_K_CONTIG == 1 ? e % KMAX : e / TM;
    uint at = k * TM + m;
    As[at >> 2][at & 3u] = rnd(a[t]);
  }
  [[unroll]] for (uint t = 0; t < SB; ++t) {
    uint e = tid + 256 * t;
    uint nn = B_N_CONTIG == 1 ? e % TN : e / KMAX, k = B_N_CONTIG == 1 ? e / TN : e % KMAX;
    uint at = k * TN + nn;
    Bs[at >> 2][at & 3u] = rnd(b[t]);
  }
  barrier();

  vec4 acc[ROWS];
  [[unroll]] for (uint r = 0; r < ROWS; ++r) acc[r] = vec4(0.0);
  [[unroll]] for (uint k = 0; k < KMAX; ++k) {  // padding k's hold zeros
    vec4 bk = Bs[k * (TN / 4) + lane];
    vec4 a0 = As[(k * TM + row0) / 4], a1 = As[(k * TM + row0) / 4 + 1];  // a broadcast per subgroup
    [[unroll]] for (uint r = 0; r < 4; ++r) {
      acc[r] += a0[r] * bk;
      acc[4 + r] += a1[r] * bk;
    }
  }
  [[unroll]] for (uint r = 0; r < ROWS; ++r) {
    uint m = m0 + row0 + r;
    if (m < pc.M) store_c(m, n, alpha * acc[r] + c[r]);
  }
}
