// Sample packing (HAS_POS) in the attention kernels (attention_tiles.glsl, attention_coop.glsl): the
// smallest first key of the n queries from t0 — where a block's key loop starts, and before which a key
// block is seen by none of them. The including kernel defines first_key(b, t), the first key query t of
// sequence b sees; every invocation reads the same positions, so the result is uniform.
uint first_key(uint b, uint t);
uint first_of_block(uint b, uint t0, uint n) {
  uint f = t0;
  for (uint r = 0u; r < n; ++r) f = min(f, first_key(b, t0 + r));
  return f;
}
