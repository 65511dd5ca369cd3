// Tile choice of the GPU attention kernels (attention_tiles.h).
#include "core/attention_tiles.h"

namespace edgetrain::gpu {

size_t attention_shared_bytes(AttnKernel k, AttnTiles t) {
  const size_t hc = t.hc, a = t.a_rows(), b = t.b_rows();
  // forward: Q tile, K/V tile (K, then V in the same memory), P tile (also the row reductions);
  // dq: Q and dout tiles, K/V tile, dS tile; dk/dv: K and V tiles, Q and dout tiles, P/dS tile.
  const size_t rows = k == AttnKernel::forward ? a + b : k == AttnKernel::dq ? 2 * a + b : 2 * (a + b);
  return 4 * (rows * hc + a * b);
}

AttnTiles attention_tiles(AttnKernel k, int64_t hd, const EncodeLimits& lim, const OpCall& c) {
  ET_CHECK_KIND(ErrorKind::unsupported, hd >= 1 && hd <= kAttnMaxHeadDim, op_name(c.op), ": head dim ", hd,
                " > ", kAttnMaxHeadDim, " has no ", lim.backend, " kernel (the CPU backend takes any)");
  uint32_t hc = 16;
  while (hc < hd) hc *= 2;
  static constexpr AttnTiles kList[] = {{8, 8, 4}, {8, 8, 2}, {8, 4, 2}, {8, 4, 1}, {8, 2, 1},
                                        {8, 1, 1}, {4, 1, 1}, {2, 1, 1}};
  AttnTiles t{};
  for (AttnTiles cand : kList) {
    cand.hc = hc;
    t = cand;
    if (t.invocations() <= lim.max_invocations && attention_shared_bytes(k, t) <= lim.max_shared_bytes) return t;
  }
  fail_kind(ErrorKind::unsupported, op_name(c.op), ": head dim ", hd, " needs ", attention_shared_bytes(k, t),
            " bytes of workgroup memory; the ", lim.backend, " device has ", lim.max_shared_bytes);
}

// Past 64 the kernels move output columns through the stage 64 at a time, so the capacity is 128 there.
uint32_t attention_capacity(int64_t hd) { return hd > 64 ? 128 : static_cast<uint32_t>((hd + 15) / 16 * 16); }

// attention_coop.glsl: two B tiles of fp16 rows (pitch hc + 8), a 16-row fp32 stage per subgroup for the
// output rows (pitch min(hc, 64) + 4), and the backward's lse and D of a B tile.
size_t attention_coop_shared_bytes(uint32_t hc, uint32_t br) {
  const size_t cw = hc < 64 ? hc : 64, sp = cw + 4;
  return 2 * br * (hc + 8) * 2 + 4 * 16 * sp * 4 + 2 * br * 4;
}

uint32_t attention_coop_rows(int64_t hd, size_t max_shared) {
  if (hd < 1 || hd > kAttnMaxHeadDim) return 0;
  for (uint32_t br : {64u, 32u})
    if (attention_coop_shared_bytes(attention_capacity(hd), br) <= max_shared) return br;
  return 0;
}

uint32_t attention_swizzle(uint32_t slots) { return (slots < 8 ? slots : 8) - 1; }

}  // namespace edgetrain::gpu
