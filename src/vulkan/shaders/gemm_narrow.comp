// A product whose output is narrow (J <= 32 columns, e.g. a LoRA rank) and whose contraction is deep:
// C(i, j) (+)= alpha * sum_l P(i, l) Q(l, j), with P the wide operand (I rows, read once: these products are
// bound by its bytes, not by arithmetic) and Q the narrow one (staged in workgroup memory per 128-deep chunk).
// mm and linear_dW of a rank-16 adapter in a training step: t = x A^T and dt = dy B (P's rows contiguous:
// ROW_MODE, lanes along l, summed across lanes at the end), dB = dy^T t and dA = dt^T x (P's columns
// contiguous: column mode, lanes along i, each lane walking l; the contraction split over workgroups).
// The tiled GEMMs spend 3/4 or more of a 64- or 128-wide tile on padding at these shapes.
// Split (SPLIT = 1): z = a slice of l whose raw partial sums go to binding 4 (in C's index space) for
// gemm_splitk_reduce.comp, which applies alpha and the accumulation.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(constant_id = 0) const uint ROW_MODE = 1;   // 1: P(i, l) has l stride 1; 0: i stride 1
layout(constant_id = 1) const uint JMAX = 16;      // 8, 16 or 32 >= J: accumulators per row of P
layout(constant_id = 2) const uint P_IS_B = 0;     // 1: P is binding 1 (b) and Q binding 0 (a)
layout(constant_id = 3) const uint VEC_P = 0;      // ROW_MODE: P's rows are whole, 16-byte aligned vec4s
layout(constant_id = 4) const uint Q_J_CONTIG = 0; // Q(l, j) has j stride 1 (staging map)
layout(constant_id = 5) const uint SPLIT = 0;
layout(constant_id = 6) const uint F16 = 0;        // operands rounded to fp16 (the f16 flag)

layout(local_size_x = 128) in;

layout(set = 0, binding = 0) readonly buffer BufA { float A[]; };
layout(set = 0, binding = 0) readonly buffer BufA4 { vec4 A4[]; };
layout(set = 0, binding = 1) readonly buffer BufB { float B[]; };
layout(set = 0, binding = 1) readonly buffer BufB4 { vec4 B4[]; };
layout(set = 0, binding = 2) buffer BufC { float C[]; };
layout(set = 0, binding = 3) readonly buffer BufScalars { float Scal[]; };
layout(set = 0, binding = 4) buffer BufPart { float Part[]; };

layout(push_constant) uniform Push {
  uint I, J, L;         // C(i, j) for i < I, j < J; contraction length L
  uint p_i, p_l;        // P(i, l) = P[i * p_i + l * p_l]
  uint q_l, q_j;        // Q(l, j) = Q[l * q_l + j * q_j]
  uint c_i, c_j;        // C(i, j) = C[i * c_i + j * c_j]
  uint alpha_idx;       // scalar-block index of alpha, or 0xffffffff for 1
  uint flags;           // bit 1: accumulate into C
  uint l_chunk;         // SPLIT: contraction per slice (a multiple of 128)
} pc;

const uint CHUNK = 128;                   // contraction rows of Q staged at a time
shared vec4 Qs[JMAX * CHUNK / 4];         // the staged chunk; then the row mode's cross-lane sums
float acc[4][JMAX];

float rnd(float v) { return F16 == 1 ? et_round_f16(v) : v; }
vec4 rnd(vec4 v) { return F16 == 1 ? et_round_f16(v) : v; }
float p_at(uint e) { return P_IS_B == 1 ? B[e] : A[e]; }
vec4 p4_at(uint e4) { return P_IS_B == 1 ? B4[e4] : A4[e4]; }
float q_at(uint e) { return P_IS_B == 1 ? A[e] : B[e]; }

// Qs holds Q(l0 + l, j) for l < CHUNK at [j * CHUNK + l] (ROW_MODE: a lane's 4 l's are one vec4) or at
// [l * JMAX + j] (column mode: one l's row read by every lane alike); zero outside [.., lend) and j >= J.
// The row mode loads a chunk into registers (load_q) while the previous one's products run, and stores it
// (store_q) between barriers: staging it only when needed left its loads' latency exposed once per chunk.
// Every load is issued before any rounding: et_round_f16's branches between loads would serialize them.
void load_q(uint l0, uint lend, out float v[JMAX]) {
  [[unroll]] for (uint t = 0; t < JMAX; ++t) {
    uint e = gl_LocalInvocationID.x + 128 * t;
    uint j = Q_J_CONTIG == 1 ? e % JMAX : e / CHUNK, l = Q_J_CONTIG == 1 ? e / JMAX : e % CHUNK;
    v[t] = l0 + l < lend && j < pc.J ? q_at((l0 + l) * pc.q_l + j * pc.q_j) : 0.0;
  }
}

void store_q(float v[JMAX]) {
  [[unroll]] for (uint t = 0; t < JMAX; ++t) {
    uint e = gl_LocalInvocationID.x + 128 * t;
    uint j = Q_J_CONTIG == 1 ? e % JMAX : e / CHUNK, l = Q_J_CONTIG == 1 ? e / JMAX : e % CHUNK;
    uint at = ROW_MODE == 1 ? j * CHUNK + l : l * JMAX + j;
    Qs[at >> 2][at & 3u] = rnd(v[t]);
  }
}

// Row i's 4 contraction values from l as stored (zero past lend or past the rows; rounded where used).
vec4 p_row4(uint i, uint l, uint lend) {
  if (i >= pc.I) return vec4(0.0);
  uint e = i * pc.p_i + l;
  if (VEC_P == 1 && l + 3 < lend) return p4_at(e >> 2);
  vec4 v = vec4(0.0);
  [[unroll]] for (uint u = 0; u < 4; ++u)
    if (l + u < lend) v[u] = p_at(e + u);
  return v;
}

void store(uint i, uint j, float v) {
  if (i >= pc.I || j >= pc.J) return;
  uint c = i * pc.c_i + j * pc.c_j;
  if (SPLIT == 1) {
    Part[gl_WorkGroupID.z * pc.I * pc.J + c] = v;
    return;
  }
  if (pc.alpha_idx != 0xffffffffu) v *= Scal[pc.alpha_idx];
  if ((pc.flags & 2u) != 0u) v += C[c];
  C[c] = v;
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint lbeg = SPLIT == 1 ? gl_WorkGroupID.z * pc.l_chunk : 0;
  const uint lend = SPLIT == 1 ? min(pc.L, lbeg + pc.l_chunk) : pc.L;
  [[unroll]] for (uint r = 0; r < 4; ++r)
    [[unroll]] for (uint j = 0; j < JMAX; ++j) acc[r][j] = 0.0;

  if (ROW_MODE == 1) {
    // 4 subgroups of 32 lanes, 4 rows each: 16 rows per workgroup; lane covers l0 + 4 lane .. + 3. The next
    // chunk's rows are requested before this chunk's products, so their latency overlaps them.
    const uint lane = tid & 31u, i0 = gl_WorkGroupID.x * 16 + (tid >> 5) * 4;
    vec4 p[4];
    float qv[JMAX];
    load_q(lbeg, lend, qv);
    [[unroll]] for (uint r = 0; r < 4; ++r) p[r] = p_row4(i0 + r, lbeg + 4 * lane, lend);
    for (uint l0 = lbeg; l0 < lend; l0 += CHUNK) {
      barrier();
      store_q(qv);
      barrier();
      if (l0 + CHUNK < lend) load_q(l0 + CHUNK, lend, qv);
      vec4 pn[4];
      [[unroll]] for (uint r = 0; r < 4; ++r)
        pn[r] = l0 + CHUNK < lend ? p_row4(i0 + r, l0 + CHUNK + 4 * lane, lend) : vec4(0.0);
      [[unroll]] for (uint r = 0; r < 4; ++r) p[r] = rnd(p[r]);
      [[unroll]] for (uint j = 0; j < JMAX; ++j) {
        vec4 q = Qs[j * (CHUNK / 4) + lane];
        [[unroll]] for (uint r = 0; r < 4; ++r) acc[r][j] += dot(p[r], q);
      }
      p = pn;
    }
    // Sum each (row, j) over the 32 lanes, one row of the 4 at a time through Qs.
    [[unroll]] for (uint r = 0; r < 4; ++r) {
      barrier();
      [[unroll]] for (uint j = 0; j < JMAX; j += 4)
        Qs[(tid * JMAX + j) >> 2] = vec4(acc[r][j], acc[r][j + 1], acc[r][j + 2], acc[r][j + 3]);
      barrier();
      for (uint o = tid; o < 4 * JMAX; o += 128) {
        uint g = o / JMAX, j = o % JMAX;
        float v = 0.0;
        for (uint ln = 0; ln < 32; ++ln) {
          uint at = (g * 32 + ln) * JMAX + j;
          v += Qs[at >> 2][at & 3u];
        }
        store(gl_WorkGroupID.x * 16 + g * 4 + r, j, v);
      }
    }
    return;
  }

  // Column mode: each lane one column i, 128 per workgroup (adjacent lanes, adjacent addresses), walking l
  // eight rows at a time, the next eight in flight meanwhile.
  // (Loading the next chunk during the products, as the row mode does, made this mode slower: fp16 dA, dB
  // [16, 2048], [2048, 16] over 4096 rows 0.035, 0.042 -> 0.048, 0.049 ms on an H200.)
  const uint i = gl_WorkGroupID.x * 128 + tid;
  for (uint l0 = lbeg; l0 < lend; l0 += CHUNK) {
    const uint n = min(CHUNK, lend - l0);
    float p[8], pn[8], qv[JMAX];
    [[unroll]] for (uint u = 0; u < 8; ++u) p[u] = i < pc.I && u < n ? p_at((l0 + u) * pc.p_l + i) : 0.0;
    load_q(l0, lend, qv);
    barrier();
    store_q(qv);
    barrier();
    for (uint l = 0; l < n; l += 8) {
      [[unroll]] for (uint u = 0; u < 8; ++u)  // the next eight rows, requested before these products
        pn[u] = i < pc.I && l + 8 + u < n ? p_at((l0 + l + 8 + u) * pc.p_l + i) : 0.0;
      [[unroll]] for (uint u = 0; u < 8; ++u) p[u] = rnd(p[u]);
      [[unroll]] for (uint u = 0; u < 8; ++u)
        [[unroll]] for (uint j4 = 0; j4 < JMAX / 4; ++j4) {
          vec4 q = Qs[(l + u) * (JMAX / 4) + j4];  // the same for every lane: a broadcast
          [[unroll]] for (uint t = 0; t < 4; ++t) acc[0][4 * j4 + t] += p[u] * q[t];
        }
      p = pn;
    }
  }
  [[unroll]] for (uint j = 0; j < JMAX; ++j) store(i, j, acc[0][j]);
}
