// Sample packing (HAS_POS) in the attention kernels (attention_tiles.glsl, attention_coop.glsl, cm2/): the
// smallest first key of the n queries from t0 — where a block's key loop starts, and before which a key
// block is seen by none of them; and whether any of them sees a key of a block. The including kernel defines
// first_key(b, t), the first key query t of sequence b sees; every invocation reads the same positions, so
// the results are uniform.
uint first_key(uint b, uint t);
uint first_of_block(uint b, uint t0, uint n) {
  uint f = t0;
  for (uint r = 0u; r < n; ++r) f = min(f, first_key(b, t0 + r));
  return f;
}
// Whether a query of [t0, t0 + n) sees a key of [c0, cend) (query t sees keys first_key .. t + off).
bool block_sees(uint b, uint t0, uint n, uint c0, uint cend, uint off) {
  for (uint r = 0u; r < n; ++r)
    if (first_key(b, t0 + r) < cend && t0 + r + off >= c0) return true;
  return false;
}
