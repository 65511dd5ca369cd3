// The tensor-core GEMM with fp32 accuracy, written once for both cooperative-matrix extensions:
// gemm_coop.comp (VK_NV_cooperative_matrix, 16x16x16 fragments, subgroups of 32; NVIDIA) and
// khr/gemm_coop_khr.comp (VK_KHR_cooperative_matrix, COOP_KHR: the fragment shape, subgroup size and
// subgroup grid are specialization constants that ops_gemm_coop.cpp picks from what the device lists —
// Mesa 26's lavapipe with 8x8x8 fragments in subgroups of 8; coop_khr.h). ops_gemm_coop.cpp chooses
// it on GPUs that have either: C[b] (+)= alpha * A[b] @ B[b] (+ bias) from operands that gemm_split.comp
// prepared in scratch.
//
// Each fp32 operand row r (a row of A, a column of B) was scaled by 2^-e[r] and split into two fp16 parts,
// a = 2^e (hi + lo), hi = a 2^-e cut to 11 significant bits, lo = fp16(a 2^-e - hi); e puts the row's
// largest magnitude in [2^14, 2^15), so both parts are normal fp16 numbers for everything within 2^-18 of
// the row's maximum, and hi + lo carries ~21 bits. The product keeps three of the four part products,
// hi*hi + hi*lo + lo*hi (lo*lo is below 2^-20 of |a||b|), accumulated in fp32 by the tensor cores; the
// epilogue multiplies by 2^(e_m + e_n) exactly.
// Split-K (ops_gemm_coop.cpp, deep products with few output tiles): z slices the contraction and the
// epilogue writes each slice's partial sum to scratch, for gemm_splitk_reduce.comp to add up and finish.
// Padded operands (rows to a multiple of 128, the contraction to a multiple of BK, zeros) mean the main
// loop has no bounds checks; only the epilogue tests m < M and n < N.
// F16 (the f16 flag, mixed-precision training): the operands are fp16 values themselves (gemm_split.comp
// F16: one unscaled part each, no exponents), so the loop stages and multiplies only the hi parts — one
// product instead of three — and the epilogue has no exponents to apply. With F16 an operand may also come
// k-major (A_KMAJOR / B_KMAJOR: [batch][Kp][Mp or Np], as gemm_split.comp MODE 3 writes a source whose rows
// are contiguous): its slice is staged k-major too and the fragments are loaded transposed.
//
// 128x128 output tile per 256-thread workgroup (NV: 8 subgroups of 32, each a 64x32 block = 4x2 tiles of
// 16x16 with fp16 operands, 32x64 = 2x4 with the fp32 parts; FM, FN below; KHR: the host's grid), k slices (BK deep, below) staged in
// shared memory as uvec4s (8 halves per 16-byte store; k-contiguous rows, pitch BK + 8 halves keeps 16-byte
// alignment and spreads banks), the next slice loaded into registers during the products. Measured and
// dropped (docs/PERFORMANCE.md): staging as float16_t stores (3.04 vs 2.86 ms at mm 4096^3), no register
// prefetch (same speed), and ten other fp16 layouts on an H200 (64..256-wide tiles, 128/256/512 threads,
// 1x4..4x4 fragments per subgroup, 32-deep slices double-buffered): all slower.
// Included by the two .comp files above after their #version and extensions.
layout(constant_id = 0) const uint OUT_BIND = 2;     // binding of C
layout(constant_id = 1) const uint BIAS_BIND = 255;  // binding of bias[N], 255: none
layout(constant_id = 2) const uint SCALAR_BIND = 3;  // the scalar block (alpha)
layout(constant_id = 3) const uint SCR_BIND = 4;     // the scratch that gemm_split.comp filled
layout(constant_id = 4) const uint F16 = 0;          // 1: fp16 operands, hi parts only (see above)
layout(constant_id = 5) const uint A_KMAJOR = 0;     // F16: A's part is [batch][Kp][Mp]
layout(constant_id = 6) const uint B_KMAJOR = 0;     // F16: B's part is [batch][Kp][Np]


#ifdef COOP_KHR
// The device's fragment shape (FRM x FRK by FRK x FRN, fp16 x fp16 -> fp32), its subgroup size SGS (fixed:
// the host requires it), the subgroups' grid across the tile's columns, and the k step.
layout(constant_id = 7) const uint FRM = 16;
layout(constant_id = 8) const uint FRN = 16;
layout(constant_id = 9) const uint FRK = 16;
layout(constant_id = 10) const uint SGS = 32;
layout(constant_id = 11) const uint SG_COLS = 4;
layout(constant_id = 12) const uint BK = 64;
const uint FM = 128u / ((256u / SGS / SG_COLS) * FRM), FN = 128u / (SG_COLS * FRN);  // fragments per subgroup
#define ACC coopmat<float, gl_ScopeSubgroup, FRM, FRN, gl_MatrixUseAccumulator>
#define AFRAG coopmat<float16_t, gl_ScopeSubgroup, FRM, FRK, gl_MatrixUseA>
#define BFRAG coopmat<float16_t, gl_ScopeSubgroup, FRK, FRN, gl_MatrixUseB>
#define ROWS gl_CooperativeMatrixLayoutRowMajor
#define COLS gl_CooperativeMatrixLayoutColumnMajor
#define LOAD_FRAG(m, arr, at, stride, layout) coopMatLoad(m, arr, at, stride, layout)
#define MUL_ADD(a, b, c) coopMatMulAdd(a, b, c)
#define STORE_ACC(m, arr, at, stride) coopMatStore(m, arr, at, stride, gl_CooperativeMatrixLayoutRowMajor)
#else
const uint FRM = 16, FRN = 16, FRK = 16, SGS = 32, BK = F16 == 1u ? 64u : 32u;
// Each subgroup's block of the 128x128 tile: FM x FN fragments of 16x16, the 8 subgroups laid out as
// (128 / 16 FM) x (128 / 16 FN). F16: 4x2 (64x32 each, subgroups 2 x 4), measured on an H200 against 2x4
// (32x64, subgroups 4 x 2): mm 4096^3 0.659 vs 0.723 ms, base fp16 step 153.7K vs 149.6K tokens/s; and the
// products alone ran at 595 vs 389 TFLOP/s (bench/vk_coop_ceiling.cpp). The fp32 parts keep 2x4 (their
// lo fragments would double the A registers of 4x2; not measured).
const uint FM = F16 == 1u ? 4u : 2u, FN = F16 == 1u ? 2u : 4u;
const uint SG_COLS = 128u / (16u * FN);  // subgroups across the tile's columns
#define ACC fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
#define AFRAG fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define BFRAG AFRAG
#define ROWS false
#define COLS true
#define LOAD_FRAG(m, arr, at, stride, colmajor) coopMatLoadNV(m, arr, at, stride, colmajor)
#define MUL_ADD(a, b, c) coopMatMulAddNV(a, b, c)
#define STORE_ACC(m, arr, at, stride) coopMatStoreNV(m, arr, at, stride, false)
#endif

layout(local_size_x = 256) in;

#include "gemm_coop_io.glsl"
// The scratch views (4..6): the parts and the exponents.
layout(set = 0, binding = 4) readonly buffer S4 { uvec4 s4[]; };
layout(set = 0, binding = 5) readonly buffer S5 { uvec4 s5[]; };
layout(set = 0, binding = 6) readonly buffer S6 { uvec4 s6[]; };
layout(set = 0, binding = 4) readonly buffer E4 { int e4[]; };
layout(set = 0, binding = 5) readonly buffer E5 { int e5[]; };
layout(set = 0, binding = 6) readonly buffer E6 { int e6[]; };

uvec4 part(uint i) { return SCR_BIND == 4 ? s4[i] : SCR_BIND == 5 ? s5[i] : s6[i]; }
int expo(uint i) { return SCR_BIND == 4 ? e4[i] : SCR_BIND == 5 ? e5[i] : e6[i]; }

// k slices: 32 deep with three products (four parts staged), 64 deep with one (F16: two parts, twice the
// bytes in flight per invocation and half the barriers; measured on an H200: loading each slice without
// the register prefetch took 1.45 ms instead of 0.96 at mm 4096^3, so the loads' latency is what limits).
// KHR: half that where the device's shared memory is under 48 KiB (the host's choice, spec constant BK).
const uint BM = 128, BN = 128, PITCH = BK + 8u;  // PITCH in halves (16-byte rows)
// Cooperative loads count offsets and strides in uvec4s.
const uint PV = PITCH / 8u, KV = BK / 8u;  // uvec4s per staged row; per row of a slice
const uint LO_ROWS = F16 == 1u ? 1u : BM;  // F16 stages no lo parts
shared uvec4 sAh[BM * PV], sAl[LO_ROWS * PV], sBh[BN * PV], sBl[LO_ROWS * PV];
#define SH_AT(row, k) ((row) * PV + (k) / 8)
#define SH_STRIDE PV
// A k-major slice: BK rows of 128 halves plus 8 (16-byte rows, banks spread); fits the arrays above.
const uint TPV = (BM + 8u) / 8u;
#define SHT_AT(k, row) ((k) * TPV + (row) / 8)
// One FRM x FRN fp32 tile per subgroup for the epilogue (the host keeps 256 / SGS * FRM * FRN <= 2048).
shared float stage[2048];
const uint TILE = FRM * FRN, EPL = TILE / SGS;  // elements of a tile; per lane

void main() {
  const uint tid = gl_LocalInvocationID.x, sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  const uint wm = sg / SG_COLS, wn = sg % SG_COLS;  // this subgroup's block of the tile
  const uint row0 = gl_WorkGroupID.y * BM, col0 = gl_WorkGroupID.x * BN;
  // Split-K (one batch): z picks a slice of the contraction and the epilogue writes a partial sum that
  // gemm_splitk_reduce.comp adds up in a fixed order; otherwise z is the batch.
  const bool split = pc.part != 0xffffffffu;
  const uint b = split ? 0u : gl_WorkGroupID.z;
  const uint k_begin = split ? gl_WorkGroupID.z * pc.kslice : 0u, k_end = min(pc.Kp, k_begin + pc.kslice);
  const uint kq = pc.Kp / 8;  // uvec4s per padded row

  // Load slots: thread t moves uvec4 column t % KV of rows t / KV + j * (256 / KV), j < NR, of each part.
  const uint NR = BM * KV / 256u, RS = 256u / KV;  // rows per invocation (2, or 4 for F16) and their step
  const uint lr = tid / KV, lc = tid % KV;
  const uint arow = (b * pc.Mp + row0 + lr) * kq + lc, brow = (b * pc.Np + col0 + lr) * kq + lc;
  // k-major parts (F16): thread t moves uvec4 t % 16 of k rows t / 16 + 16 j (BK * 16 = 256 NR uvec4s).
  const uint tr = tid / 16u, tc = tid % 16u, mq = pc.Mp / 8, nq = pc.Np / 8;
  const uint at_src = (b * pc.Kp + tr) * mq + row0 / 8 + tc, bt_src = (b * pc.Kp + tr) * nq + col0 / 8 + tc;
  uvec4 ah[4], al[4], bh[4], bl[4];
#define LOAD_SLICE(kv)                                                                        \
  [[unroll]] for (uint j = 0; j < NR; ++j) {                                                  \
    ah[j] = A_KMAJOR == 1u ? part(pc.a_hi + at_src + ((kv) * 8 + j * 16) * mq)                \
                           : part(pc.a_hi + arow + j * RS * kq + (kv));                       \
    bh[j] = B_KMAJOR == 1u ? part(pc.b_hi + bt_src + ((kv) * 8 + j * 16) * nq)                \
                           : part(pc.b_hi + brow + j * RS * kq + (kv));                       \
    if (F16 == 0u) {                                                                          \
      al[j] = part(pc.a_lo + arow + j * RS * kq + (kv));                                      \
      bl[j] = part(pc.b_lo + brow + j * RS * kq + (kv));                                      \
    }                                                                                         \
  }

  ACC acc[4][4];
  [[unroll]] for (uint i = 0; i < FM; ++i)
    [[unroll]] for (uint j = 0; j < FN; ++j) acc[i][j] = ACC(0.0);

  LOAD_SLICE(k_begin / 8)
  for (uint k0 = k_begin; k0 < k_end; k0 += BK) {
    [[unroll]] for (uint j = 0; j < NR; ++j) {
      const uint at = SH_AT(lr + j * RS, lc * 8), tt = SHT_AT(tr + j * 16, tc * 8);
      sAh[A_KMAJOR == 1u ? tt : at] = ah[j];
      sBh[B_KMAJOR == 1u ? tt : at] = bh[j];
      if (F16 == 0u) {
        sAl[at] = al[j];
        sBl[at] = bl[j];
      }
    }
    barrier();
    if (k0 + BK < k_end) {
      LOAD_SLICE((k0 + BK) / 8)
    }
    [[unroll]] for (uint kk = 0; kk < BK; kk += FRK) {
      AFRAG ahf[4], alf[4];
      [[unroll]] for (uint i = 0; i < FM; ++i) {
        uint at = SH_AT(wm * FRM * FM + i * FRM, kk);
        // k-major: A(m, k) at k * TPV + m / 8, a column-major M x K tile.
        if (A_KMAJOR == 1u) LOAD_FRAG(ahf[i], sAh, SHT_AT(kk, wm * FRM * FM + i * FRM), TPV, COLS);
        else LOAD_FRAG(ahf[i], sAh, at, SH_STRIDE, ROWS);
        if (F16 == 0u) LOAD_FRAG(alf[i], sAl, at, SH_STRIDE, ROWS);
      }
      [[unroll]] for (uint j = 0; j < FN; ++j) {
        // B(k, n) sits at row n, column k of the staged part: a column-major K x N tile.
        uint at = SH_AT(wn * FRN * FN + j * FRN, kk);
        BFRAG bhf, blf;
        // k-major: B(k, n) at k * TPV + n / 8, a row-major K x N tile.
        if (B_KMAJOR == 1u) LOAD_FRAG(bhf, sBh, SHT_AT(kk, wn * FRN * FN + j * FRN), TPV, ROWS);
        else LOAD_FRAG(bhf, sBh, at, SH_STRIDE, COLS);
        if (F16 == 0u) {
          LOAD_FRAG(blf, sBl, at, SH_STRIDE, COLS);
          [[unroll]] for (uint i = 0; i < FM; ++i) {
            acc[i][j] = MUL_ADD(alf[i], bhf, acc[i][j]);
            acc[i][j] = MUL_ADD(ahf[i], blf, acc[i][j]);
          }
        }
        [[unroll]] for (uint i = 0; i < FM; ++i) acc[i][j] = MUL_ADD(ahf[i], bhf, acc[i][j]);
      }
    }
    barrier();
  }

  // Epilogue: each FRM x FRN tile goes through this subgroup's stage, then lanes write EPL elements each.
  const float alpha = pc.alpha_idx == 0xffffffffu ? 1.0 : ld(SCALAR_BIND, pc.alpha_idx);
  const bool bias = BIAS_BIND != 255u && (pc.flags & 1u) != 0u, accumulate = (pc.flags & 2u) != 0u;
  [[unroll]] for (uint i = 0; i < FM; ++i) {
    [[unroll]] for (uint j = 0; j < FN; ++j) {
      STORE_ACC(acc[i][j], stage, sg * TILE, FRN);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      [[unroll]] for (uint e = 0; e < EPL; ++e) {
        uint idx = lane + SGS * e, r = idx / FRN, c = idx % FRN;
        uint m = row0 + wm * FRM * FM + i * FRM + r, n = col0 + wn * FRN * FN + j * FRN + c;
        if (m < pc.M && n < pc.N) {
          float v = stage[sg * TILE + idx];
          if (F16 == 0u) v = ldexp(ldexp(v, expo(pc.a_exp + b * pc.Mp + m)), expo(pc.b_exp + b * pc.Np + n));
          if (split) {
            st(SCR_BIND, pc.part + gl_WorkGroupID.z * pc.M * pc.N + m * pc.N + n, v);
            continue;
          }
          if (alpha != 1.0) v *= alpha;
          if (bias) v += ld(BIAS_BIND, n);
          uint o = b * pc.c_batch + m * pc.N + n;
          if (accumulate) v = ld(OUT_BIND, o) + v;
          st(OUT_BIND, o, v);
        }
      }
      subgroupBarrier();
    }
  }
}
