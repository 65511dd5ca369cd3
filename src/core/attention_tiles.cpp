// Tile choice of the GPU attention kernels (attention_tiles.h).
#include "core/attention_tiles.h"

namespace edgetrain::gpu {

size_t attention_shared_bytes(AttnKernel k, uint32_t hd, AttnTiles t) {
  const size_t hdp = (hd + 3) / 4 * 4, a = t.a_rows(), b = t.b_rows();
  // forward: Q tile, K/V tile (K, then V in the same memory), P tile (also the row reductions);
  // dq: Q and dout tiles, K/V tile, dS tile; dk/dv: K and V tiles, Q and dout tiles, P/dS tile.
  const size_t tiles = k == AttnKernel::forward ? (a + b) * hdp : k == AttnKernel::dq ? (2 * a + b) * hdp : 2 * (a + b) * hdp;
  return 4 * (tiles + a * b);
}

AttnTiles attention_tiles(AttnKernel k, int64_t hd, const EncodeLimits& lim, const OpCall& c) {
  ET_CHECK_KIND(ErrorKind::unsupported, hd >= 1 && hd <= kAttnMaxHeadDim, op_name(c.op), ": head dim ", hd,
                " > ", kAttnMaxHeadDim, " has no ", lim.backend, " kernel (the CPU backend takes any)");
  static constexpr AttnTiles kList[] = {{8, 8, 4}, {8, 8, 2}, {8, 4, 2}, {8, 4, 1}, {8, 2, 1}, {8, 1, 1}, {4, 1, 1}, {2, 1, 1}};
  for (const AttnTiles& t : kList)
    if (t.invocations() <= lim.max_invocations &&
        attention_shared_bytes(k, static_cast<uint32_t>(hd), t) <= lim.max_shared_bytes)
      return t;
  fail_kind(ErrorKind::unsupported, op_name(c.op), ": head dim ", hd, " needs ",
            attention_shared_bytes(k, static_cast<uint32_t>(hd), kList[7]), " bytes of workgroup memory; the ",
            lim.backend, " device has ", lim.max_shared_bytes);
}

uint32_t attention_swizzle(uint32_t slots) {
  uint32_t p = slots & (~slots + 1);  // lowest set bit: the largest power of two dividing slots
  return (p > 8 ? 8 : p) - 1;
}

}  // namespace edgetrain::gpu
