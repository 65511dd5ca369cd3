// The products of a low-rank adapter, which the tiled GEMMs handle badly: a narrow output over a deep
// contraction (gemm_narrow.comp: x A^T, dy B, and the adapters' gradients) and a shallow contraction over a
// wide output (gemm_shallow.comp: t B^T and dt A, accumulated in place). Both are bound by the bytes of the
// wide operand or output; the tiles padded the narrow side to 64 or 128 (and K to 16 or 32).
// Measured on an H200 (docs/PERFORMANCE.md, fourteenth and fifteenth sessions).
#include <algorithm>

#include "gemm_narrow.spv.h"
#include "gemm_shallow.spv.h"
#include "vulkan/ops_gemm.h"

namespace edgetrain::vk {
namespace {

constexpr uint64_t kNarrow = 32;  // the widest narrow side (gemm_narrow.comp's JMAX) / deepest shallow K

bool narrow_allowed(const GemmArgs& g, const EncodeContext& ctx) {
  return ctx.tuning.coopmat != gpu::Force::all && g.layout == 0 &&
         g.batch == 1 && ctx.max_invocations >= 256 && ctx.max_shared_bytes >= 16 * 1024;
}

bool append_shallow(const GemmArgs& g, const EncodeContext& ctx, Encoded& out) {
  // Staged depth (KMAX) and the workgroup memory it takes: A's 64 rows and B's 128 columns, KMAX deep.
  const uint32_t kmax = g.K <= 16 ? 16u : 32u;
  if (uint64_t{kmax} * (64 + 128) * sizeof(float) > ctx.max_shared_bytes) return false;
  Dispatch d{ET_VK_KERNEL(gemm_shallow)};
  d.spec = {kmax, g.sa_red == 1 ? 1u : 0u, g.sb_col == 1 ? 1u : 0u, g.N % 4 == 0 ? 1u : 0u, g.f16 ? 1u : 0u};
  d.arg(static_cast<uint32_t>(g.M)).arg(static_cast<uint32_t>(g.N)).arg(static_cast<uint32_t>(g.K));
  d.arg(g.sa_row).arg(g.sa_red).arg(g.sb_red).arg(g.sb_col).arg(g.alpha_idx).arg(g.flags);
  d.groups[0] = static_cast<uint32_t>((g.N + 127) / 128);
  d.groups[1] = static_cast<uint32_t>((g.M + 63) / 64);
  if (d.groups[0] > ctx.max_groups[0] || d.groups[1] > ctx.max_groups[1]) return false;
  out.dispatches.push_back(std::move(d));
  return true;
}

}  // namespace

bool append_narrow_gemm(const GemmArgs& g, const EncodeContext& ctx, Encoded& out) {
  if (!narrow_allowed(g, ctx) || g.M == 0 || g.N == 0) return false;
  if (g.K >= 1 && g.K <= kNarrow && g.M >= 64 && g.N >= 64) return append_shallow(g, ctx, out);
  if (g.K < 64 || std::min(g.M, g.N) > kNarrow || std::max(g.M, g.N) < 64) return false;
  // P: the wide operand as (i, l); Q: the narrow one as (l, j). A narrow M is the transposed product.
  const bool p_is_b = g.N > kNarrow;
  uint32_t p_i, p_l, q_l, q_j, c_i, c_j;
  if (!p_is_b) {
    p_i = g.sa_row, p_l = g.sa_red, q_l = g.sb_red, q_j = g.sb_col, c_i = static_cast<uint32_t>(g.N), c_j = 1;
  } else {
    p_i = g.sb_col, p_l = g.sb_red, q_l = g.sa_red, q_j = g.sa_row, c_i = 1, c_j = static_cast<uint32_t>(g.N);
  }
  const bool row_mode = p_l == 1;
  if (!row_mode && p_i != 1) return false;
  const uint64_t I = p_is_b ? g.N : g.M, J = p_is_b ? g.M : g.N, L = g.K;
  const uint32_t jmax = J <= 8 ? 8 : J <= 16 ? 16 : 32;
  const uint64_t groups = row_mode ? (I + 15) / 16 : (I + 127) / 128;
  if (groups > ctx.max_groups[0]) return false;
  // Slices of the contraction (multiples of 128 deep) where the wide side alone gives few workgroups:
  // about four per multiprocessor on GPU-like devices (they run 128 invocations each); "all" forces up to 4.
  // The column mode's slices may be 128 rows deep (the row mode's 256): its lanes keep eight 4-byte loads in
  // flight each, too few bytes to cover memory's latency with fewer workgroups. H200, twentieth session:
  // the 1B step's dA = dt^T x [16, 2048] over 4096 rows, 16 -> 32 slices, 35 -> 27 us (with the reduction
  // 41 -> 34); the step 29,859 -> 30,015 tokens/s in the same call.
  uint64_t want = 1;
  if (ctx.tuning.split_k == gpu::Force::all) want = 4;
  else if (ctx.tuning.split_k != gpu::Force::never && gpu_like(ctx)) {
    const uint64_t target = 4 * (ctx.multiprocessors ? ctx.multiprocessors : 132);
    if (groups < target) want = std::min<uint64_t>((target + groups - 1) / groups, row_mode ? L / 256 : L / 128);
  }
  uint64_t chunk;
  uint64_t slices = gpu::splitk_slices(L, want, 128, chunk);
  if (slices * I * J >= (1ull << 32) || slices > ctx.max_groups[2]) slices = 1, chunk = L;
  Dispatch d{ET_VK_KERNEL(gemm_narrow)};
  const bool vec_p = row_mode && p_i % 4 == 0 && L % 4 == 0;
  d.spec = {row_mode ? 1u : 0u, jmax, p_is_b ? 1u : 0u, vec_p ? 1u : 0u, q_j == 1 ? 1u : 0u, slices > 1 ? 1u : 0u,
            g.f16 ? 1u : 0u};
  d.arg(static_cast<uint32_t>(I)).arg(static_cast<uint32_t>(J)).arg(static_cast<uint32_t>(L));
  d.arg(p_i).arg(p_l).arg(q_l).arg(q_j).arg(c_i).arg(c_j).arg(g.alpha_idx).arg(g.flags);
  d.arg(static_cast<uint32_t>(chunk));
  d.groups[0] = static_cast<uint32_t>(groups);
  d.groups[2] = static_cast<uint32_t>(slices);
  out.dispatches.push_back(std::move(d));
  if (slices == 1) return true;
  append_splitk_reduce(g.M * g.N, static_cast<uint32_t>(slices), g.alpha_idx, g.flags, 0, ctx, out);
  out.scratch_bytes.push_back(static_cast<size_t>(slices) * g.M * g.N * sizeof(float));
  return true;
}

}  // namespace edgetrain::vk
