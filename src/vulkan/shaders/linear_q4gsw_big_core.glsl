// Shared main loop of the large-shape 4-bit GEMMs (linear_q4gsw_big.comp, q4gsw_backward_big.comp): a
// 128x128 output tile per 256-thread workgroup with an 8x8 register tile in 16 named vec4 accumulators.
// Per 16-deep slice of the contraction the activation rows (row-major, contraction contiguous; vec4
// loads when its length is a multiple of 4) go to shared memory transposed, and the including kernel's
// stage_w(r0) writes the dequantized weight slice into Bs[r][n/4][n%4]; the next activation slice is
// prefetched into registers during the FMAs. The includer declares X/X4 (binding 0) and pc, defines
// ET_ROWS (output rows), ET_RED (contraction length) and implements stage_w and store_c.
const uint BM = 128, BN = 128, BK = 16;
shared vec4 As[BK][BM / 4 + 1];  // As[k][m/4][m%4] = X(row0 + m, r0 + k); pitch 33 against store conflicts
shared vec4 Bs[BK][BN / 4 + 1];  // Bs[k][n/4][n%4] = dequantized weight (r0 + k, col0 + n)

uint row0, col0;

void stage_w(uint r0);
void store_c(uint r, uint c, vec4 v);

vec4 load_x(uint e, uint r0) {
  vec4 v = vec4(0.0);
  uint gr = row0 + (e >> 2), gk = r0 + (e & 3u) * 4;
  if (gr >= ET_ROWS) return v;
  uint base = gr * ET_RED + gk;
  if (ET_RED % 4u == 0u) {
    if (gk < ET_RED) v = X4[base >> 2];
  } else {
    [[unroll]] for (uint j = 0; j < 4; ++j)
      if (gk + j < ET_RED) v[j] = X[base + j];
  }
  return v;
}
void store_x(uint e, vec4 v) {
  uint r = e >> 2, kq = (e & 3u) * 4;
  [[unroll]] for (uint j = 0; j < 4; ++j) As[kq + j][r >> 2][r & 3u] = v[j];
}

#define FMA_ROW(i, a) c##i##0 += (a) * b0; c##i##1 += (a) * b1;
#define STORE_ROW(i, r) store_c(r, cbase, c##i##0); store_c(r, cbase + 64, c##i##1);

void main() {
  const uint tid = gl_LocalInvocationID.x, tx = tid & 15u, ty = tid >> 4;
  row0 = gl_WorkGroupID.y * BM;
  col0 = gl_WorkGroupID.x * BN;
  vec4 c00 = vec4(0), c01 = vec4(0), c10 = vec4(0), c11 = vec4(0), c20 = vec4(0), c21 = vec4(0);
  vec4 c30 = vec4(0), c31 = vec4(0), c40 = vec4(0), c41 = vec4(0), c50 = vec4(0), c51 = vec4(0);
  vec4 c60 = vec4(0), c61 = vec4(0), c70 = vec4(0), c71 = vec4(0);

  vec4 ra0 = load_x(tid, 0), ra1 = load_x(tid + 256, 0);
  for (uint r0 = 0; r0 < ET_RED; r0 += BK) {
    store_x(tid, ra0);
    store_x(tid + 256, ra1);
    stage_w(r0);
    barrier();
    if (r0 + BK < ET_RED) {
      ra0 = load_x(tid, r0 + BK);
      ra1 = load_x(tid + 256, r0 + BK);
    }
    [[unroll]] for (uint kk = 0; kk < BK; ++kk) {
      vec4 a0 = As[kk][ty], a1 = As[kk][ty + 16];
      vec4 b0 = Bs[kk][tx], b1 = Bs[kk][tx + 16];
      FMA_ROW(0, a0.x) FMA_ROW(1, a0.y) FMA_ROW(2, a0.z) FMA_ROW(3, a0.w)
      FMA_ROW(4, a1.x) FMA_ROW(5, a1.y) FMA_ROW(6, a1.z) FMA_ROW(7, a1.w)
    }
    barrier();
  }

  const uint rbase = row0 + ty * 4, cbase = col0 + tx * 4;
  STORE_ROW(0, rbase) STORE_ROW(1, rbase + 1) STORE_ROW(2, rbase + 2) STORE_ROW(3, rbase + 3)
  STORE_ROW(4, rbase + 64) STORE_ROW(5, rbase + 65) STORE_ROW(6, rbase + 66) STORE_ROW(7, rbase + 67)
}
