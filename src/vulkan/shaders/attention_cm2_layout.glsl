// The cm2 attention kernels' view of an fp16 copy (q and dout: B*T rows of H*HD halves; k and v: B*S rows
// of KV*HD): a row-major tensor whose reads past its edges give 0 (attention_cm2.comp and its backward).
#define CLAMPED tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV>

CLAMPED rows_layout(const uint rows, const uint cols) {
  CLAMPED l = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
  l = setTensorLayoutDimensionNV(l, rows, cols);
  return setTensorLayoutStrideNV(l, cols & ~7u, 1);  // HD % 16 == 0: rows 32-byte aligned
}
