// The one main loop of the tiled fp32 GEMMs: gemm (mm, bmm, linear, linear_dW), linear_q4gsw and its
// backward, each at two tile sizes (<name>.comp: ET_TILE 4, <name>_big.comp: ET_TILE 8).
//
// A (16*ET_TILE) x (16*ET_TILE) output tile per 256-thread workgroup (64x64 or 128x128), ET_TILE x ET_TILE
// outputs per thread in named vec4 accumulators (named so the register tile stays in registers): thread
// (tx, ty) owns rows 4*ty + 64*i + (0..3) and columns 4*tx + 64*j + (0..3), i, j < ET_TILE/4. Per 16-deep
// slice of the contraction A goes to shared memory transposed (As[k][m/4][m%4]) and B k-major
// (Bs[k][n/4][n%4]), so every thread reads both as vec4s; the next slice of A (and of an fp32 B) is loaded
// into registers during the FMAs. Every output is one fp32 sum over k in increasing order, whatever the
// tile size or the kernel.
//
// The including kernel declares, before including it:
//   ET_TILE          4 or 8;
//   stage A (an fp32 matrix): float A[] and vec4 A4[] views of its binding, ET_M (rows), ET_SA_ROW and
//                    ET_SA_RED (A(m, k) = A[aoff + m * ET_SA_ROW + k * ET_SA_RED]), ET_A_RED_CONTIG (true
//                    when ET_SA_RED is 1) and ET_VEC_A (true when A's contiguous runs are 16-byte aligned
//                    whole vec4s, read as one load);
//   stage B, either ET_B_FP32 with the same for an fp32 B (B[], B4[], ET_N, ET_SB_RED, ET_SB_COL:
//                    B(k, n) = B[boff + k * ET_SB_RED + n * ET_SB_COL], ET_B_COL_CONTIG, ET_VEC_B), or a
//                    function void stage_b(uint k0) that writes B's slice at k0 into Bs itself;
//   ET_F16           true for the f16 flag of ops.inc: every loaded operand value is rounded to fp16
//                    (et_round_f16) as it is staged — a stage_b rounds its own — and the FMAs stay fp32, so
//                    the result is exactly "fp16 operands, fp32 accumulation";
// and implements
//   void begin_tile()                     sets aoff, boff and this workgroup's contraction range [kbeg, kend);
//   void store_c(uint r, uint c, vec4 v)  stores outputs (r, c..c+3), which may lie past the matrix.
const uint BM = 16u * ET_TILE, BN = BM, BK = 16u, QL = BM / 4u;  // QL: vec4s per k row of a slice
shared vec4 As[BK][QL + 1];  // pitch QL + 1 against bank conflicts on the transposing stores
shared vec4 Bs[BK][QL + 1];

uint row0, col0, aoff, boff, kbeg, kend;

void begin_tile();
void store_c(uint r, uint c, vec4 v);
#ifndef ET_B_FP32
void stage_b(uint k0);
#endif

#ifdef ET_B_FP32
float et_at(uint o, uint i) { return o == 0u ? A[i] : B[i]; }
vec4 et_at4(uint o, uint i) { return o == 0u ? A4[i] : B4[i]; }
#else
float et_at(uint o, uint i) { return A[i]; }
vec4 et_at4(uint o, uint i) { return A4[i]; }
#endif

// Load slot e (0 .. 4*BM-1) of the slice at k0 of operand o (0: A, 1: B) seen as lines along the
// contraction (rows of A, columns of B): with `red`, 4 consecutive k of line e/4 (A whose contraction is
// contiguous, B whose columns are not), else 4 consecutive lines at k e/QL, so neighbouring threads read
// neighbouring addresses. Element (l, k) is at off + l * s_line + k * s_red; values outside the operand or
// past kend are 0.
vec4 load_slot(uint o, uint e, uint k0, bool red, bool vec, uint line0, uint lines, uint off, uint s_line,
               uint s_red) {
  vec4 v = vec4(0.0);
  uint l = line0 + (red ? e >> 2 : (e % QL) * 4u), k = k0 + (red ? (e & 3u) * 4u : e / QL);
  if (red ? l >= lines : k >= kend) return v;
  // The slot's four values run along k (red) or along l: where they start, where that index ends, stride.
  uint run = red ? k : l, end = red ? kend : lines, step = red ? s_red : s_line;
  uint base = off + l * s_line + k * s_red;
  if (vec) {
    if (run < end) v = et_at4(o, base >> 2);
  } else {
    [[unroll]] for (uint j = 0; j < 4; ++j)
      if (run + j < end) v[j] = et_at(o, base + j * step);
  }
  return v;
}
void store_slot(uint o, uint e, bool red, vec4 v) {
  if (red) {
    uint l = e >> 2, kq = (e & 3u) * 4u;
    [[unroll]] for (uint j = 0; j < 4; ++j) {
      if (o == 0u) As[kq + j][l >> 2][l & 3u] = v[j];
      else Bs[kq + j][l >> 2][l & 3u] = v[j];
    }
  } else if (o == 0u) {
    As[e / QL][e % QL] = v;
  } else {
    Bs[e / QL][e % QL] = v;
  }
}

vec4 load_a(uint e, uint k0) {  // ET_A_RED_CONTIG says ET_SA_RED is 1: a constant for the compiler
  vec4 v = load_slot(0u, e, k0, ET_A_RED_CONTIG, ET_VEC_A, row0, ET_M, aoff, ET_SA_ROW, ET_A_RED_CONTIG ? 1u : ET_SA_RED);
  return ET_F16 ? et_round_f16(v) : v;
}
void store_a(uint e, vec4 v) { store_slot(0u, e, ET_A_RED_CONTIG, v); }
#ifdef ET_B_FP32
vec4 load_b(uint e, uint k0) {  // likewise ET_B_COL_CONTIG for ET_SB_COL
  vec4 v = load_slot(1u, e, k0, !(ET_B_COL_CONTIG), ET_VEC_B, col0, ET_N, boff, ET_B_COL_CONTIG ? 1u : ET_SB_COL,
                     ET_SB_RED);
  return ET_F16 ? et_round_f16(v) : v;
}
void store_b(uint e, vec4 v) { store_slot(1u, e, !(ET_B_COL_CONTIG), v); }
#endif

// Per-slot statements (a slice has 2 load slots per thread and operand at 128x128, 1 at 64x64), and the
// accumulator rows: row i of the register tile is c<i>0 (columns 4*tx..) and, at 128x128, c<i>1 (+64).
#if ET_TILE == 8
#define ET_SLOTS(F) F(0) F(1)
#define ET_FMA_ROW(i, a) c##i##0 += (a) * b0; c##i##1 += (a) * b1;
#define ET_STORE_ROW(i, r) store_c(r, cbase, c##i##0); store_c(r, cbase + 64u, c##i##1);
#else
#define ET_SLOTS(F) F(0)
#define ET_FMA_ROW(i, a) c##i##0 += (a) * b0;
#define ET_STORE_ROW(i, r) store_c(r, cbase, c##i##0);
#endif
#define ET_FIRST_A(s) vec4 ra##s = load_a(tid + 256u * s, kbeg);
#define ET_NEXT_A(s) ra##s = load_a(tid + 256u * s, k0 + BK);
#define ET_STAGE_A(s) store_a(tid + 256u * s, ra##s);
#define ET_FIRST_B(s) vec4 rb##s = load_b(tid + 256u * s, kbeg);
#define ET_NEXT_B(s) rb##s = load_b(tid + 256u * s, k0 + BK);
#define ET_STAGE_B(s) store_b(tid + 256u * s, rb##s);

void main() {
  const uint tid = gl_LocalInvocationID.x, tx = tid & 15u, ty = tid >> 4;
  row0 = gl_WorkGroupID.y * BM;
  col0 = gl_WorkGroupID.x * BN;
  begin_tile();
  vec4 c00 = vec4(0), c10 = vec4(0), c20 = vec4(0), c30 = vec4(0);
#if ET_TILE == 8
  vec4 c01 = vec4(0), c11 = vec4(0), c21 = vec4(0), c31 = vec4(0);
  vec4 c40 = vec4(0), c41 = vec4(0), c50 = vec4(0), c51 = vec4(0);
  vec4 c60 = vec4(0), c61 = vec4(0), c70 = vec4(0), c71 = vec4(0);
#endif

  ET_SLOTS(ET_FIRST_A)
#ifdef ET_B_FP32
  ET_SLOTS(ET_FIRST_B)
#endif
  for (uint k0 = kbeg; k0 < kend; k0 += BK) {
    ET_SLOTS(ET_STAGE_A)
#ifdef ET_B_FP32
    ET_SLOTS(ET_STAGE_B)
#else
    stage_b(k0);
#endif
    barrier();
    if (k0 + BK < kend) {  // the next slice in flight while this one is multiplied
      ET_SLOTS(ET_NEXT_A)
#ifdef ET_B_FP32
      ET_SLOTS(ET_NEXT_B)
#endif
    }
    [[unroll]] for (uint kk = 0; kk < BK; ++kk) {
      vec4 a0 = As[kk][ty], b0 = Bs[kk][tx];
#if ET_TILE == 8
      vec4 a1 = As[kk][ty + 16], b1 = Bs[kk][tx + 16];
      ET_FMA_ROW(0, a0.x) ET_FMA_ROW(1, a0.y) ET_FMA_ROW(2, a0.z) ET_FMA_ROW(3, a0.w)
      ET_FMA_ROW(4, a1.x) ET_FMA_ROW(5, a1.y) ET_FMA_ROW(6, a1.z) ET_FMA_ROW(7, a1.w)
#else
      ET_FMA_ROW(0, a0.x) ET_FMA_ROW(1, a0.y) ET_FMA_ROW(2, a0.z) ET_FMA_ROW(3, a0.w)
#endif
    }
    barrier();
  }

  const uint rbase = row0 + ty * 4u, cbase = col0 + tx * 4u;
  ET_STORE_ROW(0, rbase) ET_STORE_ROW(1, rbase + 1u) ET_STORE_ROW(2, rbase + 2u) ET_STORE_ROW(3, rbase + 3u)
#if ET_TILE == 8
  ET_STORE_ROW(4, rbase + 64u) ET_STORE_ROW(5, rbase + 65u) ET_STORE_ROW(6, rbase + 66u) ET_STORE_ROW(7, rbase + 67u)
#endif
}
