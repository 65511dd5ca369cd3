// Prepares one operand of gemm_coop.comp: the operand as R rows of a length-K contraction, each row scaled
// by a power of two 2^-e[r] and split into fp16 hi and lo parts (see gemm_coop.comp), written k-contiguous
// as [batch][Rp][Kp] halves with zeros in the padding (r >= R, k >= K). Two passes per operand:
// MODE 0 writes e[r] (from the row's largest magnitude), MODE 1 the parts. KIND 1 takes three: MODE 0
// writes the maxima of 256-long k chunks (rows contiguous: a thread per row would leave most of a GPU idle
// on a long contraction), MODE 2 reduces them to e[r], then MODE 1.
//
// Sources (KIND):
//   0  fp32, element (b, r, k) at src[b*sbatch + r*sr + k*sk], any strides (k-contiguous when sk = 1)
//   1  fp32 with sr = 1 (rows contiguous): MODE 1 transposes through shared memory to write k-contiguous
//   2  a 4-bit W_4X8 weight, rows n over k (linear_q4gsw: B(k, n) = W[n, k])
//   3  a 4-bit W_4X8 weight, rows k over n (linear_q4gsw_backward: B(n, k) = W[n, k])
// W[n, k] = (code - 8) * scales[(k / gs) * N + n], in fp32 exactly as the fp32 kernels compute it.
//
// F16 (the f16 flag: fp16 operands, fp32 accumulation): one part per operand and no exponents. Only MODE 1
// runs (MODE 3 for KIND 1); it writes hi = the fp16 bits of et_round_f16(element), unscaled, and no lo: the
// operand values every f16 kernel multiplies, so the tensor-core product equals the fp32-FMA one up to
// summation order. MODE 3 (F16, KIND 1) keeps the source's orientation: k-major [batch][Kp][Rp] halves, which
// gemm_coop.comp stages as they are and reads transposed from shared memory — a streaming conversion
// instead of a transpose through shared memory (a step's weight gradients take both operands this way).
// MODE 4 (F16, KIND 2 and 3, for gemm_cm2.comp): the 4-bit weight k-major too, [Kp][Rp] halves, the B layout
// that cooperative matrices 2 load fastest (docs/PERFORMANCE.md); a W_4X8 block's 8 rows n are 8 consecutive
// halves of a k row (KIND 2), or its 4 k of a row n are 4 consecutive halves of that row (KIND 3). A thread
// per block either way (KIND 3 took 8 n x 8 k per thread until the nineteenth session: half the threads,
// a k/v projection's weight 64 workgroups on a 132-multiprocessor H200, 22 us where KIND 2 took 8).
// MODE 5 (F16, KIND 0, for gemm_cm2.comp): an fp32 B whose k are contiguous (linear's W: B(k, n) = W[n, k])
// k-major too, transposed through a 64 r x 32 k tile of workgroup memory (reads along k, writes along r).
// The tied head's linear read its [N][K] parts transposed at ~200 TFLOP/s on an H200 where the k-major
// B of the head's mm ran at ~270 (eighteenth session's profile).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"

layout(constant_id = 0) const uint SRC_BIND = 0;    // fp32 source or W_4X8 words
layout(constant_id = 1) const uint SCALE_BIND = 2;  // q4 scales [G, N] (KIND 2, 3)
layout(constant_id = 2) const uint SCR_BIND = 4;    // scratch: parts and exponents
layout(constant_id = 3) const uint KIND = 0;
layout(constant_id = 4) const uint MODE = 0;
layout(constant_id = 5) const uint F16 = 0;

layout(local_size_x = 256) in;

layout(set = 0, binding = 0) readonly buffer F0 { float f0[]; };
layout(set = 0, binding = 1) readonly buffer F1 { float f1[]; };
layout(set = 0, binding = 2) readonly buffer F2 { float f2[]; };
layout(set = 0, binding = 0) readonly buffer F0v { vec4 f0v[]; };
layout(set = 0, binding = 1) readonly buffer F1v { vec4 f1v[]; };
layout(set = 0, binding = 2) readonly buffer F2v { vec4 f2v[]; };
layout(set = 0, binding = 1) readonly buffer W1 { uint w1[]; };
layout(set = 0, binding = 1) readonly buffer W1v { uvec4 w1v[]; };
layout(set = 0, binding = 4) buffer S4 { uvec4 s4[]; };
layout(set = 0, binding = 5) buffer S5 { uvec4 s5[]; };
layout(set = 0, binding = 6) buffer S6 { uvec4 s6[]; };
layout(set = 0, binding = 4) buffer S4h { uvec2 s4h[]; };
layout(set = 0, binding = 5) buffer S5h { uvec2 s5h[]; };
layout(set = 0, binding = 6) buffer S6h { uvec2 s6h[]; };
layout(set = 0, binding = 4) buffer E4 { int e4[]; };
layout(set = 0, binding = 5) buffer E5 { int e5[]; };
layout(set = 0, binding = 6) buffer E6 { int e6[]; };

layout(push_constant) uniform Push {
  uint R, K;            // rows and contraction length of the operand
  uint Rp, Kp;          // padded: Rp multiple of 128, Kp multiple of 32 (64 for F16)
  uint sr, sk, sbatch;  // fp32 strides (KIND 0, 1)
  uint hi, lo;          // uvec4 offsets of the parts in scratch
  uint ex;              // int offset of the exponents ([batch][Rp])
  uint N, N8, gs;       // q4 geometry (KIND 2, 3): weight rows N, N8 = ceil(N/8), group size
  uint px;              // KIND 1: int offset of the partial maxima, [batch][ceil(K/256)][Rp]
} pc;

bool et_isinf_or_nan(float v) { return (floatBitsToUint(v) & 0x7f800000u) == 0x7f800000u; }

float src(uint i) { return SRC_BIND == 0 ? f0[i] : SRC_BIND == 1 ? f1[i] : f2[i]; }
vec4 src4(uint i4) { return SRC_BIND == 0 ? f0v[i4] : SRC_BIND == 1 ? f1v[i4] : f2v[i4]; }
float scale_at(uint i) { return SCALE_BIND == 0 ? f0[i] : SCALE_BIND == 1 ? f1[i] : f2[i]; }
void put(uint i, uvec4 v) {
  if (SCR_BIND == 4) s4[i] = v;
  else if (SCR_BIND == 5) s5[i] = v;
  else s6[i] = v;
}
void put2(uint i, uvec2 v) {  // i in uvec2s
  if (SCR_BIND == 4) s4h[i] = v;
  else if (SCR_BIND == 5) s5h[i] = v;
  else s6h[i] = v;
}
int get_e(uint i) { return SCR_BIND == 4 ? e4[i] : SCR_BIND == 5 ? e5[i] : e6[i]; }
void put_e(uint i, int v) {
  if (SCR_BIND == 4) e4[i] = v;
  else if (SCR_BIND == 5) e5[i] = v;
  else e6[i] = v;
}

// W[n, k] of the q4 weight (caller keeps n < N, k < K).
float q4w(uint n, uint k) {
  uint word = w1[4u * ((k >> 2) * pc.N8 + (n >> 3)) + ((n & 7u) >> 1)];
  return q4_value(q4_nibble(word, k & 3u, n & 1u)) * scale_at((k / pc.gs) * pc.N + n);
}

// Operand element (row r, contraction index k) of batch b, 0 outside the operand.
float elem(uint b, uint r, uint k) {
  if (r >= pc.R || k >= pc.K) return 0.0;
  if (KIND == 2u) return q4w(r, k);
  if (KIND == 3u) return q4w(k, r);
  return src(b * pc.sbatch + r * pc.sr + k * pc.sk);
}

// e with max * 2^-e in [2^14, 2^15); 0 for a zero, non-finite or subnormal maximum; kept within +-120 so
// every ldexp stays in range.
int exponent_for(float mx) {
  if (!(mx >= 1.17549435e-38) || et_isinf_or_nan(mx)) return 0;
  int E;
  frexp(mx, E);  // mx = f * 2^E, f in [0.5, 1)
  return clamp(E - 15, -120, 120);
}

// Eight consecutive scaled values as hi and lo halves. hi keeps the top 11 significant bits of x by
// masking (exact in fp16 for |x| >= 2^-14), lo = x - hi exactly in fp32, then rounded to fp16. Integer
// masking rather than x - f32(f16(x)), a round trip an optimizer may fold away.
// Non-finite x: hi = x, lo = 0.
void split8(float v[8], out uvec4 hi, out uvec4 lo) {
  [[unroll]] for (uint j = 0; j < 4; ++j) {
    vec2 x = vec2(v[2 * j], v[2 * j + 1]);
    vec2 h = uintBitsToFloat(floatBitsToUint(x) & uvec2(0xffffe000u));
    vec2 d = x - h;
    if (et_isinf_or_nan(x.x)) h.x = x.x, d.x = 0.0;
    if (et_isinf_or_nan(x.y)) h.y = x.y, d.y = 0.0;
    hi[j] = packHalf2x16(h);
    lo[j] = packHalf2x16(d);
  }
}

// F16: eight consecutive operand values as fp16 bits, each rounded once as et_round_f16 rounds.
uvec4 pack8_f16(float v[8]) {
  uvec4 h;
  [[unroll]] for (uint j = 0; j < 4; ++j)
    h[j] = et_f16_rne_bits(v[2 * j]) | (et_f16_rne_bits(v[2 * j + 1]) << 16);
  return h;
}

// F16: four consecutive operand values as fp16 bits, in one uvec2.
uvec2 pack4_f16(float v[4]) {
  return uvec2(et_f16_rne_bits(v[0]) | (et_f16_rne_bits(v[1]) << 16),
               et_f16_rne_bits(v[2]) | (et_f16_rne_bits(v[3]) << 16));
}

shared float red[256];
shared float tile[32][65];  // KIND 1's 32 r x 64 k, MODE 5's 32 k x 64 r (and a column of padding)

void main() {
  const uint tid = gl_LocalInvocationID.x, b = gl_WorkGroupID.z;
  if (MODE == 0u) {
    if (KIND == 0u || KIND == 3u) {  // a workgroup per row, lanes over k
      uint r = linear_group_id();
      if (r >= pc.Rp) return;
      float mx = 0.0;
      if (r < pc.R) {
        if (KIND == 3u) {  // row k: largest |scale| of its group over n, times 8 (the largest |code - 8|)
          uint g = r / pc.gs;
          for (uint n = tid; n < pc.N; n += 256) mx = max(mx, abs(scale_at(g * pc.N + n)) * 8.0);
        } else {
          for (uint k = tid; k < pc.K; k += 256) {
            float v = abs(src(b * pc.sbatch + r * pc.sr + k * pc.sk));
            mx = et_isinf_or_nan(v) ? uintBitsToFloat(0x7f800000u) : max(mx, v);
          }
        }
      }
      mx = subgroupMax(mx);
      if (gl_SubgroupInvocationID == 0) red[gl_SubgroupID] = mx;
      barrier();
      if (tid == 0) {
        float m = 0.0;
        for (uint s = 0; s < gl_NumSubgroups; ++s) m = max(m, red[s]);
        put_e(pc.ex + b * pc.Rp + r, exponent_for(m));
      }
    } else {  // 32 rows per workgroup, 8 lanes per row over one 256-long k chunk (KIND 1) or all groups (2)
      const uint chunks = max(1u, (pc.K + 255) / 256), t = linear_group_id();
      const uint blk = KIND == 1u ? t / chunks : t, ch = KIND == 1u ? t % chunks : 0u;
      uint r = blk * 32 + (tid & 31u), lane = tid >> 5;
      if (blk * 32 >= pc.Rp) return;
      float mx = 0.0;
      if (r < pc.R) {
        if (KIND == 2u) {
          uint G = (pc.K + pc.gs - 1) / pc.gs;
          for (uint g = lane; g < G; g += 8) mx = max(mx, abs(scale_at(g * pc.N + r)) * 8.0);
        } else {
          uint kend = min(pc.K, ch * 256 + 256);
          for (uint k = ch * 256 + lane; k < kend; k += 8) {
            float v = abs(src(b * pc.sbatch + r * pc.sr + k * pc.sk));
            mx = et_isinf_or_nan(v) ? uintBitsToFloat(0x7f800000u) : max(mx, v);
          }
        }
      }
      red[tid] = mx;
      barrier();
      if (lane == 0) {
        float m = mx;
        for (uint l = 1; l < 8; ++l) m = max(m, red[l * 32 + (tid & 31u)]);
        if (KIND == 1u) put_e(pc.px + (b * chunks + ch) * pc.Rp + r, floatBitsToInt(m));
        else put_e(pc.ex + b * pc.Rp + r, exponent_for(m));
      }
    }
    return;
  }
  if (MODE == 2u) {  // KIND 1: e[r] from the chunk maxima, a thread per row
    uint r = linear_group_id() * 256 + tid;
    if (r >= pc.Rp) return;
    const uint chunks = max(1u, (pc.K + 255) / 256);
    float m = 0.0;
    for (uint c = 0; c < chunks; ++c) m = max(m, intBitsToFloat(get_e(pc.px + (b * chunks + c) * pc.Rp + r)));
    put_e(pc.ex + b * pc.Rp + r, exponent_for(m));
    return;
  }

  if (MODE == 3u) {  // F16, KIND 1: a thread per 8 consecutive rows r of one k, k-major
    const uint rq = pc.Rp / 8, i = linear_group_id() * 256 + tid;
    if (i >= pc.Kp * rq) return;
    const uint k = i / rq, c = i % rq;
    float v[8];
    [[unroll]] for (uint j = 0; j < 8; ++j) v[j] = elem(b, c * 8 + j, k);
    put(pc.hi + (b * pc.Kp + k) * rq + c, pack8_f16(v));
    return;
  }

  if (MODE == 4u) {  // F16, KIND 2 or 3: the 4-bit weight k-major, [Kp][Rp] halves (gemm_cm2.comp's B as is)
    const uint rq = pc.Rp / 8, i = linear_group_id() * 256 + tid;
    if (KIND == 2u) {  // a thread per W_4X8 block (8 rows n x 4 k): one uvec4 of each of its 4 k rows
      const uint k0 = (i / rq) * 4, c = i % rq, n0 = c * 8;
      if (k0 >= pc.Kp) return;
      float v[4][8];
      if (n0 + 8 <= pc.R && k0 + 4 <= pc.K) {
        const uvec4 w = w1v[(k0 >> 2) * pc.N8 + (n0 >> 3)];  // word j: rows n0 + 2j, n0 + 2j + 1
        [[unroll]] for (uint j = 0; j < 8; ++j) {
          const float sc = scale_at((k0 / pc.gs) * pc.N + n0 + j);
          [[unroll]] for (uint kk = 0; kk < 4; ++kk) v[kk][j] = q4_value(q4_nibble(w[j >> 1], kk, j & 1u)) * sc;
        }
      } else {
        [[unroll]] for (uint kk = 0; kk < 4; ++kk)
          [[unroll]] for (uint j = 0; j < 8; ++j) v[kk][j] = elem(b, n0 + j, k0 + kk);
      }
      [[unroll]] for (uint kk = 0; kk < 4; ++kk) put(pc.hi + (b * pc.Kp + k0 + kk) * rq + c, pack8_f16(v[kk]));
    } else {  // KIND 3 (rows k over n): a thread per W_4X8 block (8 n x 4 k), 4 halves of each of its 8 n rows
      const uint rq4 = pc.Rp / 4, n0 = (i / rq4) * 8, c4 = i % rq4, k0 = c4 * 4;
      if (n0 >= pc.Kp) return;
      float v[8][4];
      if (n0 + 8 <= pc.K && k0 + 4 <= pc.R) {
        const uvec4 w = w1v[(k0 >> 2) * pc.N8 + (n0 >> 3)];
        [[unroll]] for (uint j = 0; j < 8; ++j) {
          const float sc = scale_at((k0 / pc.gs) * pc.N + n0 + j);
          [[unroll]] for (uint kk = 0; kk < 4; ++kk) v[j][kk] = q4_value(q4_nibble(w[j >> 1], kk, j & 1u)) * sc;
        }
      } else {
        [[unroll]] for (uint j = 0; j < 8; ++j)
          [[unroll]] for (uint kk = 0; kk < 4; ++kk) v[j][kk] = elem(b, k0 + kk, n0 + j);
      }
      [[unroll]] for (uint j = 0; j < 8; ++j) put2(2u * pc.hi + (b * pc.Kp + n0 + j) * rq4 + c4, pack4_f16(v[j]));
    }
    return;
  }

  if (MODE == 5u) {  // F16, KIND 0: [Kp][Rp] halves (Rp a multiple of 64, Kp of 32), one 64 x 32 tile
    const uint tiles_k = pc.Kp / 32, t = linear_group_id(), r0 = (t / tiles_k) * 64, k0 = (t % tiles_k) * 32;
    if (r0 >= pc.Rp) return;
    {  // 4 lanes per row r, 8 consecutive k each
      const uint rr = tid >> 2, kc = (tid & 3u) * 8, r = r0 + rr, e0 = b * pc.sbatch + r * pc.sr + k0 + kc;
      float v[8];
      if (pc.sk == 1u && ((pc.sr | pc.sbatch) & 3u) == 0u && r < pc.R && k0 + kc + 8 <= pc.K) {
        vec4 lo4 = src4(e0 >> 2), hi4 = src4((e0 >> 2) + 1);
        [[unroll]] for (uint j = 0; j < 4; ++j) v[j] = lo4[j], v[4 + j] = hi4[j];
      } else {
        [[unroll]] for (uint j = 0; j < 8; ++j) v[j] = elem(b, r, k0 + kc + j);
      }
      [[unroll]] for (uint j = 0; j < 8; ++j) tile[kc + j][rr] = v[j];
    }
    barrier();
    const uint kk = tid >> 3, rc = (tid & 7u) * 8;  // 8 lanes per k row, 8 consecutive r each
    float v[8];
    [[unroll]] for (uint j = 0; j < 8; ++j) v[j] = tile[kk][rc + j];
    put(pc.hi + (b * pc.Kp + k0 + kk) * (pc.Rp / 8) + (r0 + rc) / 8, pack8_f16(v));
    return;
  }

  const uint kq = pc.Kp / 8;
  if (F16 == 1u && KIND == 2u) {
    // A 4-bit weight, 8 rows n x 32 eight-k chunks per workgroup: a subgroup writes 512 contiguous bytes of
    // one row (a thread per row, rows fastest, wrote 16 bytes per row), and the 8 rows of a W_4X8 block,
    // one per subgroup, read its words together. Each thread reads its two words and two scales once (a
    // group holds whole 4-k words: q4gsw.h); the values are elem()'s, product for product.
    const uint blocks = pc.Rp / 8, g = linear_group_id();
    const uint r = (g % blocks) * 8 + (tid >> 5), c = (g / blocks) * 32 + (tid & 31u), k0 = c * 8;
    if (c >= kq) return;
    float v[8];
    [[unroll]] for (uint j = 0; j < 8; ++j) v[j] = 0.0;
    if (r < pc.R && k0 < pc.K) {
      const uint at0 = 4u * ((k0 >> 2) * pc.N8 + (r >> 3)) + ((r & 7u) >> 1), more = k0 + 4 < pc.K ? 1u : 0u;
      uint w[2] = uint[2](w1[at0], more == 1u ? w1[at0 + 4u * pc.N8] : 0u);
      float sc[2] = float[2](scale_at((k0 / pc.gs) * pc.N + r),
                             more == 1u ? scale_at(((k0 + 4) / pc.gs) * pc.N + r) : 0.0);
      [[unroll]] for (uint j = 0; j < 8; ++j)
        if (k0 + j < pc.K) v[j] = q4_value(q4_nibble(w[j >> 2], j & 3u, r & 1u)) * sc[j >> 2];
    }
    put(pc.hi + (b * pc.Rp + r) * kq + c, pack8_f16(v));
    return;
  }
  if (KIND == 1u) {  // 32 rows x 64 k per workgroup: coalesced reads along r, writes along k
    uint tiles_k = (pc.Kp + 63) / 64, t = linear_group_id();
    uint r0 = (t / tiles_k) * 32, k0 = (t % tiles_k) * 64;
    if (r0 >= pc.Rp) return;
    [[unroll]] for (uint i = 0; i < 8; ++i) {
      uint kk = (tid >> 5) + 8 * i, rr = tid & 31u;
      tile[rr][kk] = elem(b, r0 + rr, k0 + kk);
    }
    barrier();
    uint rr = tid >> 3, kc = (tid & 7u) * 8, r = r0 + rr;
    if (k0 + kc >= pc.Kp) return;
    uint at = (b * pc.Rp + r) * kq + (k0 + kc) / 8;
    float v[8];
    if (F16 == 1u) {
      [[unroll]] for (uint j = 0; j < 8; ++j) v[j] = tile[rr][kc + j];
      put(pc.hi + at, pack8_f16(v));
      return;
    }
    int e = get_e(pc.ex + b * pc.Rp + r);
    [[unroll]] for (uint j = 0; j < 8; ++j) v[j] = ldexp(tile[rr][kc + j], -e);
    uvec4 h, l;
    split8(v, h, l);
    put(pc.hi + at, h);
    put(pc.lo + at, l);
    return;
  }

  // One thread per 8 consecutive k of a row (F16 KIND 2: above). KIND 2 walks rows fastest (threads of one
  // 8-row block share a 16-byte W_4X8 block); the others walk k fastest.
  uint i = linear_group_id() * 256 + tid;
  if (i >= pc.Rp * kq) return;
  uint r, c;
  if (KIND == 2u) {
    r = i % pc.Rp;
    c = i / pc.Rp;
  } else {
    r = i / kq;
    c = i % kq;
  }
  uint at = (b * pc.Rp + r) * kq + c;
  float v[8];
  if (F16 == 1u) {
    const uint e0 = b * pc.sbatch + r * pc.sr + c * 8;
    if (KIND == 0u && pc.sk == 1u && ((pc.sr | pc.sbatch) & 3u) == 0u && r < pc.R && c * 8 + 8 <= pc.K) {
      vec4 lo4 = src4(e0 >> 2), hi4 = src4((e0 >> 2) + 1);  // contiguous rows: two 16-byte loads
      [[unroll]] for (uint j = 0; j < 4; ++j) v[j] = lo4[j], v[4 + j] = hi4[j];
    } else {
      [[unroll]] for (uint j = 0; j < 8; ++j) v[j] = elem(b, r, c * 8 + j);
    }
    put(pc.hi + at, pack8_f16(v));
    return;
  }
  int e = get_e(pc.ex + b * pc.Rp + r);
  [[unroll]] for (uint j = 0; j < 8; ++j) v[j] = ldexp(elem(b, r, c * 8 + j), -e);
  uvec4 h, l;
  split8(v, h, l);
  put(pc.hi + at, h);
  put(pc.lo + at, l);
}
