// The tensor-core path of every large GEMM (mm, bmm, linear, linear_dW, linear_q4gsw and its backward) on
// devices with fp16 cooperative matrices: gemm_split.comp turns each operand into power-of-two-scaled fp16
// hi/lo parts in the program's pooled scratch (two passes per operand), then gemm_coop.comp multiplies them
// keeping fp32 accuracy (three part products, fp32 accumulation; the error analysis is in the shader).
// With the f16 flag the operands are fp16 by definition: one pass per operand writes its rounded fp16
// values (no exponents, no lo part) and gemm_coop.comp does one product; an operand whose rows are
// contiguous (KIND 1) keeps that k-major orientation (no transpose) and gemm_coop.comp reads it transposed.
// Where the device has cooperative matrices 2, fp16 products run cm2/gemm_cm2.comp over the same staged
// parts instead (a 4-bit weight then staged k-major too); H200 figures in docs/PERFORMANCE.md. Where the
// device has VK_KHR_cooperative_matrix — alone, or beside cooperative matrices 2 — khr/gemm_coop_khr.comp
// (gemm_coop.comp's kernel with the device's fragment shape; coop_khr.h) takes gemm_coop.comp's place, its
// k step from khr_coop_tile.
#include <algorithm>
#include <cstring>
#include <vector>

#include "gemm_coop.spv.h"
#include "gemm_split.spv.h"
#include "vulkan/coop_matrix2.h"
#include "vulkan/ops_gemm.h"
#if EDGETRAIN_VK_CM2
#include "gemm_cm2.spv.h"
#include "gemm_coop_khr.spv.h"
#endif

namespace edgetrain::vk {

namespace {

uint64_t round_up(uint64_t v, uint64_t m) { return (v + m - 1) / m * m; }

// gemm_cm2.comp's tile: BM x BN outputs per workgroup of wg invocations, bk-deep loads; per_sm: how many
// such workgroups a multiprocessor holds (split-K counts them). 128x128 tiles, 32 deep, for every product but
// the narrow ones (N <= 32: a low-rank adapter's x A^T and dy B), whose tile is N wide (rounded up to 16)
// and 64 deep. H200, eighteenth session (docs/PERFORMANCE.md): 256 invocations on 128x256, 256x128 or
// 128x128 tiles, 64 deep, were no faster for the large products (the 1B qlora step 0.93-1.0x, 256x256
// 0.68x); the narrow tile took x A^T [4096, 16] over 2048 from 0.062 to 0.034 ms and the 1B step from
// 24.2K to 25.9K tokens/s (128-wide: 7/8 of each tile was padding, a quarter of the slots filled).
struct Cm2Tile {
  uint32_t wg = 128, bm = 128, bn = 128, bk = 32, per_sm = 2;
};
Cm2Tile cm2_tile(uint64_t N) {
  if (N > 32) return Cm2Tile{};
  return Cm2Tile{128, 128, static_cast<uint32_t>(std::max<uint64_t>(16, round_up(N, 16))), 64, 4};
}

// Sizes and offsets into the scratch, checked to fit the kernels' 32-bit indices.
uint32_t index32(uint64_t v) {
  ET_CHECK(v < (1ull << 32), "vulkan coop gemm: index ", v, " does not fit 32 bits");
  return static_cast<uint32_t>(v);
}

// Ints of scratch for KIND 1's chunk maxima (see gemm_split.comp).
uint64_t partial_ints(const CoopOperand& o, uint64_t Rp, uint64_t batch) {
  return o.kind == 1 ? batch * std::max<uint64_t>(1, (o.K + 255) / 256) * Rp : 0;
}

// The passes of gemm_split.comp for one operand: exponents (KIND 1: chunk maxima, then exponents), parts.
// f16: only the parts pass (MODE 1; KIND 1: MODE 3, k-major), writing hi alone; `kmajor` (a B for
// gemm_cm2.comp): a 4-bit weight MODE 4, an fp32 KIND 0 MODE 5, both k-major.
void split(const CoopOperand& o, uint64_t Rp, uint64_t Kp, uint32_t batch, uint32_t scr_bind, uint64_t hi,
           uint64_t lo, uint64_t ex, uint64_t px, bool f16, bool kmajor, const EncodeContext& ctx, Encoded& out) {
  const uint32_t f16_mode = o.kind == 1 ? 3u : !kmajor ? 1u : o.kind == 0 ? 5u : 4u;
  std::vector<uint32_t> modes = f16 ? std::vector<uint32_t>{f16_mode}
                                : o.kind == 1 ? std::vector<uint32_t>{0, 2, 1} : std::vector<uint32_t>{0, 1};
  const uint64_t chunks = std::max<uint64_t>(1, (o.K + 255) / 256);
  for (uint32_t mode : modes) {
    Dispatch d{ET_VK_KERNEL(gemm_split)};
    d.spec = {o.src_bind, o.scale_bind, scr_bind, o.kind, mode, f16 ? 1u : 0u};
    d.arg(index32(o.R)).arg(index32(o.K)).arg(index32(Rp)).arg(index32(Kp));
    d.arg(o.sr).arg(o.sk).arg(o.sbatch);
    // f16 reads no lo part, exponents or maxima: zeros there keep one operand's staging identical
    // whatever the other operand is (program.cpp compares them).
    d.arg(index32(hi)).arg(index32(f16 ? 0 : lo)).arg(index32(f16 ? 0 : ex));
    d.arg(o.q4_N).arg(index32((o.q4_N + 7) / 8)).arg(o.q4_gs).arg(index32(f16 ? 0 : px));
    uint64_t groups;
    if (mode == 0) groups = o.kind == 1 ? (Rp / 32) * chunks : o.kind == 2 ? Rp / 32 : Rp;
    else if (mode == 2) groups = (Rp + 255) / 256;
    else if (mode == 3) groups = (Kp * (Rp / 8) + 255) / 256;
    else if (mode == 4) groups = ((Kp / 4) * (Rp / 8) + 255) / 256;  // a thread per W_4X8 block (8 x 4)
    else if (mode == 5) groups = (Rp / 64) * (Kp / 32);                 // a 64 x 32 tile per workgroup
    else if (o.kind == 1) groups = (Rp / 32) * ((Kp + 63) / 64);
    else if (f16 && o.kind == 2) groups = (Rp / 8) * ((Kp / 8 + 31) / 32);
    else groups = (Rp * (Kp / 8) + 255) / 256;
    grid_1d(std::max<uint64_t>(groups, 1), ctx, d.groups);
    d.groups[2] = batch;
    if (f16) {  // one pass, writing hi alone: the same operand staged again can be skipped (program.cpp)
      d.pooled_known = true;
      d.pooled_begin = hi * 16;
      d.pooled_end = hi * 16 + batch * Rp * Kp * 2;
      d.stage_reads = {o.src_bind};
      if (o.kind >= 2) d.stage_reads.push_back(o.scale_bind);
      d.stage_bind_specs = 3;  // SRC_BIND, SCALE_BIND, SCR_BIND
    }
    out.dispatches.push_back(std::move(d));
  }
}

// Split-K: a deep product with few 128x128 output tiles leaves most of a large GPU idle (a step's linear_dW,
// dW [768, 768] over 8192 tokens, is 36 workgroups on a 132-multiprocessor H200: a third of the speed of a
// 4096^3 product), so its contraction is cut into slices of kslice (a multiple of the k step bk) run
// side by side over z; the partial sums go to the pooled scratch and gemm_splitk_reduce.comp adds them in a
// fixed order (deterministic). Where the device says how many multiprocessors it has, the slices are the
// fewest (each >= 512 deep) whose workgroups fill >= 90% of the waves they take, one workgroup resident per
// multiprocessor (its registers); gemm_cm2.comp's count per_sm per multiprocessor (Cm2Tile) and slices
// >= 256 deep. Elsewhere enough for ~264 workgroups. Tuning::split_k as for the fp32
// kernels: "0" never, "all" up to 4 slices wherever allowed (to test the edges).
uint64_t coop_slices(uint64_t tiles, uint64_t Kp, uint64_t bk, const CoopEpilogue& ep, bool cm2, uint64_t per_sm,
                     const EncodeContext& ctx, uint64_t& kslice) {
  kslice = Kp;
  const gpu::Force force = ctx.tuning.split_k;
  if (!ep.split_k || ep.batch != 1 || force == gpu::Force::never) return 1;
  // gemm_splitk_reduce.comp's bindings are layout 0's: out 2, scalars 3, scratch 4.
  if (ep.out_bind != 2 || ep.scalar_bind != 3 || ep.scratch_bind != 4) return 1;
  uint64_t want = 1;
  if (force != gpu::Force::all && ctx.multiprocessors > 0) {
    const uint64_t slots = ctx.multiprocessors * per_sm, most = std::min<uint64_t>(16, Kp / (cm2 ? 256 : 512));
    double best = 0.0;
    for (uint64_t s = 1; s <= std::max<uint64_t>(most, 1); ++s) {
      const uint64_t groups = tiles * s;
      const double busy = static_cast<double>(groups) / static_cast<double>((groups + slots - 1) / slots * slots);
      if (busy > best + 1e-9) best = busy, want = s;
      if (busy >= 0.9) break;
    }
  } else {
    want = gpu::splitk_want(tiles, Kp, 512, bk, force);
  }
  return gpu::splitk_slices(Kp, want, bk, kslice);
}

// Which tensor-core GEMM kernel the device takes: khr/gemm_coop_khr.comp where the context found a KHR shape
// (built with glslang 15; on NVIDIA GPUs with cooperative matrices 2 it runs gemm_coop.comp's kernel
// faster), else gemm_coop.comp (NVIDIA's extension, subgroups of 32, 48 KiB of shared memory), else none.
enum class CoopKernel { none, nv, khr };
CoopKernel coop_kernel(const EncodeContext& ctx) {
  if (ctx.max_invocations < 256) return CoopKernel::none;
  if (cm2_built() && ctx.coop_khr) return CoopKernel::khr;
  if (ctx.coopmat && ctx.subgroup_size == 32 && ctx.max_shared_bytes >= 48 * 1024) return CoopKernel::nv;
  return CoopKernel::none;
}

}  // namespace

bool coop_for(uint64_t M, uint64_t N, uint64_t K, const EncodeContext& ctx) {
  if (coop_kernel(ctx) == CoopKernel::none) return false;
  switch (ctx.tuning.coopmat) {
    case gpu::Force::never: return false;
    case gpu::Force::all: return true;
    // Measured on an H200 in a base-preset step: with K = 64 (attention scores) the split passes and the
    // epilogue cost more than the tensor cores save (1.2 ms vs 0.33 ms for the fp32 kernel). Products 16
    // wide with a deep contraction (a rank-16 LoRA's x A^T and its adapters' gradients) are faster here
    // although 7/8 of the 128-wide tile is padding: fp16 x A^T [4096, 16] over 2048 0.065 -> 0.046 ms,
    // dA/dB 0.070 -> 0.051 ms (the fp32-FMA kernels' 64-wide tiles waste 3/4, on slower units).
    default: return std::max(M, N) >= 128 && std::min(M, N) >= 16 && K >= 256;
  }
}

CoopOperand coop_fp32(uint32_t bind, uint64_t rows, uint64_t red, uint32_t s_row, uint32_t s_red, uint32_t s_batch) {
  CoopOperand o;
  o.kind = s_red != 1 && s_row == 1 ? 1 : 0;
  o.src_bind = bind;
  o.R = rows;
  o.K = red;
  o.sr = s_row;
  o.sk = s_red;
  o.sbatch = s_batch;
  return o;
}

bool append_coop(const CoopOperand& a, const CoopOperand& b, const CoopEpilogue& ep, bool f16,
                 const EncodeContext& ctx, Encoded& out) {
  ET_CHECK(a.K == b.K, "vulkan coop gemm: contraction lengths differ (", a.K, " vs ", b.K, ")");
  // gemm_coop.comp's k step: 64 with fp16 operands, 32 with the fp32 parts; the KHR form's per its tile.
  const CoopKernel kernel = coop_kernel(ctx);
  const bool khr = kernel == CoopKernel::khr;
  const KhrCoopTile khr_tile = khr ? khr_coop_tile(ctx.coop_khr, f16, ctx.max_shared_bytes) : KhrCoopTile{};
  if (kernel == CoopKernel::none || (khr && !khr_tile.ok)) return false;
  const uint64_t bk = khr ? khr_tile.bk : f16 ? 64 : 32;
  // fp16 operands on a device with cooperative matrices 2: cm2/gemm_cm2.comp reads the same parts through
  // tensor loads (element offsets in halves: the parts, padded to 128 rows at most, must lie in the first
  // 2^32) and takes the same push constants; its B is staged k-major (its fastest B layout: a 4-bit weight,
  // or an fp32 one with contiguous k on the 128-wide tile; the narrow tile's adapter A stays [N][K], as
  // measured), the parts padded to its tile. gemm_coop.comp's tiles are 128x128.
  const uint64_t M = a.R, N = b.R, Kp = round_up(a.K, bk), batch = ep.batch;
  // A 4-bit weight's tall, narrow fp16 products (M >= 4096 rows, N <= 1024: the base step's outputs and
  // input gradients of width 768) run faster on the KHR kernel than on cm2's GEMM (H200, twenty-fifth
  // session, call 1: 8192x768x768 0.081 vs 0.093 ms, 8192x768x2048 0.153 vs 0.195; at N = 2048 cm2 wins;
  // the base fp16 step +3.6% on an H100, twenty-sixth session). Not where a low-rank update would join the
  // product on cm2's GEMM (fuse_low_rank_update: that saves a pass over the output; not measured against).
  const bool narrow_q4_on_khr =
      khr && f16 && b.kind >= 2 && M >= 4096 && N <= 1024 && batch == 1 && !ctx.low_rank_update_follows;
  const bool cm2 = cm2_built() && f16 && ctx.cm2 && !narrow_q4_on_khr &&
                   batch * (round_up(M, 128) + round_up(N, 128)) * Kp < (1ull << 32);
  const Cm2Tile tile = cm2 ? cm2_tile(N) : Cm2Tile{};
  const uint64_t Mp = round_up(M, tile.bm), Np = round_up(N, tile.bn);
  // Scratch: A hi, A lo, B hi, B lo (halves), then the exponents of A's and B's rows (ints) and KIND 1's
  // chunk maxima. f16: A hi, B hi only (the other offsets are passed but never read).
  const uint64_t a_part = batch * Mp * Kp * 2, b_part = batch * Np * Kp * 2;
  const uint64_t ex_a = 2 * a_part + 2 * b_part, ex_b = ex_a + batch * Mp * 4, px_a = ex_b + batch * Np * 4;
  const uint64_t px_b = px_a + partial_ints(a, Mp, batch) * 4;
  const uint64_t parts_end = f16 ? a_part + b_part : px_b + partial_ints(b, Np, batch) * 4;
  // Split-K's partial sums [slice][M][N] after the parts (a float offset: parts_end is a multiple of 4).
  uint64_t kslice = Kp;
  const uint64_t slices =
      coop_slices((Mp / tile.bm) * (Np / tile.bn), Kp, bk, ep, cm2, cm2 ? tile.per_sm : 1, ctx, kslice);
  const uint64_t total = parts_end + (slices > 1 ? slices * M * N * 4 : 0);
  if (total > ctx.max_storage_range || total / 4 >= (1ull << 32)) return false;  // the fp32 kernels take it
  if (M == 0 || N == 0 || batch == 0) return true;
  const uint64_t a_hi = 0, a_lo = a_part, b_hi = f16 ? a_part : 2 * a_part, b_lo = 2 * a_part + b_part;
  const bool b_kmajor = cm2 && (b.kind >= 2 || (b.kind == 0 && tile.bn % 64 == 0));
  // An A whose rows are contiguous (KIND 1) is staged k-major, [Kp][Mp]; with neither side padded those are
  // the bytes of its source's own rows staged as a KIND 0 operand (MODE 1), so it is staged that way: the
  // same dispatch as the 4-bit input gradient's staging of dy, which the program then skips for a low-rank
  // adapter's dB = s dy^T t (program.cpp).
  const bool a_as_rows = cm2 && a.kind == 1 && batch == 1 && Mp == a.R && Kp == a.K && a.K % 128 == 0;
  const CoopOperand a_src = a_as_rows ? coop_fp32(a.src_bind, a.K, a.R, a.sk, 1, 0) : a;
  split(a_src, a_as_rows ? Kp : Mp, a_as_rows ? Mp : Kp, static_cast<uint32_t>(batch), ep.scratch_bind, a_hi / 16,
        a_lo / 16, ex_a / 4, px_a / 4, f16, false, ctx, out);
  split(b, Np, Kp, static_cast<uint32_t>(batch), ep.scratch_bind, b_hi / 16, b_lo / 16, ex_b / 4, px_b / 4, f16,
        b_kmajor, ctx, out);

  Dispatch d{ET_VK_KERNEL(gemm_coop)};
  d.spec = {ep.out_bind, ep.bias_bind, ep.scalar_bind, ep.scratch_bind, f16 ? 1u : 0u,
            f16 && a.kind == 1 ? 1u : 0u, f16 && b.kind == 1 ? 1u : 0u};
#if EDGETRAIN_VK_CM2
  if (khr) {
    d.kernel = ET_VK_KERNEL(gemm_coop_khr);
    const KhrCoopShape& s = ctx.coop_khr;
    d.spec.insert(d.spec.end(), {s.m, s.n, s.k, s.subgroup, khr_tile.sg_cols, khr_tile.bk});
  }
#endif
#if EDGETRAIN_VK_CM2
  if (cm2) {
    d = Dispatch{ET_VK_KERNEL(gemm_cm2)};
    d.spec = {ep.out_bind, ep.bias_bind, ep.scalar_bind, ep.scratch_bind, a.kind == 1 ? 1u : 0u,
              b.kind == 1 || b_kmajor ? 1u : 0u, tile.wg, tile.bm, tile.bn, tile.bk};
  }
#endif
  d.arg(index32(M)).arg(index32(N)).arg(index32(Kp)).arg(index32(Mp)).arg(index32(Np)).arg(ep.c_batch).arg(ep.alpha_idx).arg(ep.flags);
  d.arg(index32(a_hi / 16)).arg(index32(a_lo / 16)).arg(index32(b_hi / 16)).arg(index32(b_lo / 16));
  d.arg(index32(f16 ? 0 : ex_a / 4)).arg(index32(f16 ? 0 : ex_b / 4));  // f16 reads no exponents (as split())
  d.arg(index32(kslice)).arg(slices > 1 ? index32(parts_end / 4) : 0xffffffffu);
  d.arg(0u).arg(0u).arg(0u);  // no low-rank update folded in (fuse_low_rank_update sets these)
  d.groups[0] = index32(Np / tile.bn);
  d.groups[1] = index32(Mp / tile.bm);
  d.groups[2] = static_cast<uint32_t>(slices > 1 ? slices : batch);
  d.pooled_known = true;  // only split-K's partial sums
  d.pooled_begin = parts_end;
  d.pooled_end = slices > 1 ? total : parts_end;
  out.dispatches.push_back(std::move(d));
  out.pooled_scratch_bytes = static_cast<size_t>(total);
  if (slices > 1)
    append_splitk_reduce(index32(M * N), static_cast<uint32_t>(slices), ep.alpha_idx, ep.flags,
                         index32(parts_end / 4), ctx, out);
  return true;
}

bool low_rank_update_pair(const OpCall& prev, const OpCall& next, const EncodeContext& ctx) {
  if (!cm2_built() || !ctx.cm2 || (prev.op != Op::linear_q4gsw && prev.op != Op::linear_q4gsw_backward) ||
      next.op != Op::mm)
    return false;
  if (!f16_operands(prev) || !f16_operands(next) || next.ints.size() < 3 || next.ints[0] != 0 || next.ints[2] == 0)
    return false;
  if (next.floats.empty() || next.floats[0].is_slot() || next.floats[0].value != 1.0f) return false;
  const Tensor &out = prev.out.at(0), &into = next.out.at(0);
  return into.id() == out.id() && into.offset() == out.offset() && into.nbytes() == out.nbytes();
}

bool fuse_low_rank_update(const OpCall& prev, Encoded& prev_enc, const OpCall& next, const EncodeContext& ctx,
                          Encoded& next_enc) {
#if EDGETRAIN_VK_CM2
  if (!low_rank_update_pair(prev, next, ctx)) return false;
  // prev's GEMM on gemm_cm2.comp: one batch, alpha 1, not accumulating (what it computes is all of out).
  size_t g = 0;
  while (g < prev_enc.dispatches.size() && prev_enc.dispatches[g].kernel.spirv != kSpv_gemm_cm2) ++g;
  if (g == prev_enc.dispatches.size()) return false;
  Dispatch& gemm = prev_enc.dispatches[g];
  auto word = [&](size_t i) {
    uint32_t v;
    std::memcpy(&v, gemm.push.data() + 4 * i, 4);
    return v;
  };
  if (gemm.push.size() != coop_push::words * 4) return false;
  const uint64_t M = word(coop_push::M), N = word(coop_push::N), Mp = word(coop_push::Mp), Np = word(coop_push::Np),
                 bk = gemm.spec.at(9);
  if (gemm.groups[2] != 1 && word(coop_push::part) == 0xffffffffu) return false;  // batches
  if (word(coop_push::alpha_idx) != 0xffffffffu || (word(coop_push::flags) & 2u) != 0) return false;
  const bool tb = next.ints[1] != 0;
  const Shape &p = next.in[0].shape(), &q = next.in[1].shape();
  if (p.rank() != 2 || q.rank() != 2 || static_cast<uint64_t>(p[0]) != M) return false;
  const uint64_t r = static_cast<uint64_t>(p[1]);
  if (r == 0 || r > 64 || static_cast<uint64_t>(tb ? q[0] : q[1]) != N || static_cast<uint64_t>(tb ? q[1] : q[0]) != r)
    return false;
  if (tb && Np % 64 != 0) return false;  // Q [N, r] goes k-major through MODE 5's 64-row tiles
  // P's rows and Q k-major past everything prev's dispatches touch in the pooled scratch.
  const uint64_t rp = round_up(r, bk), a2 = round_up(prev_enc.pooled_scratch_bytes, 16), b2 = a2 + Mp * rp * 2,
                 end = b2 + Np * rp * 2;
  if (end > ctx.max_storage_range || end / 2 >= (1ull << 32)) return false;
  Encoded fused;
  const uint32_t pooled = static_cast<uint32_t>(next.in.size() + next.out.size() + 1);  // next binds no scratch
  const CoopOperand pa = coop_fp32(0, M, r, index32(r), 1, 0);
  const CoopOperand qb = tb ? coop_fp32(1, N, r, index32(r), 1, 0) : coop_fp32(1, N, r, 1, index32(N), 0);
  split(pa, Mp, rp, 1, pooled, a2 / 16, 0, 0, 0, true, false, ctx, fused);
  split(qb, Np, rp, 1, pooled, b2 / 16, 0, 0, 0, true, true, ctx, fused);
  const uint32_t ext[3] = {index32(a2 / 16), index32(b2 / 16), index32(rp)};
  std::memcpy(gemm.push.data() + coop_push::a2_hi * 4, ext, sizeof ext);  // a2_hi, b2_hi, kp2
  for (size_t i = g; i < prev_enc.dispatches.size(); ++i) {
    fused.dispatches.push_back(std::move(prev_enc.dispatches[i]));
    fused.dispatches.back().binds_call_before = true;
  }
  prev_enc.dispatches.erase(prev_enc.dispatches.begin() + static_cast<std::ptrdiff_t>(g), prev_enc.dispatches.end());
  fused.pooled_scratch_bytes = static_cast<size_t>(end);
  next_enc = std::move(fused);
  return true;
#else
  (void)prev, (void)prev_enc, (void)next, (void)ctx, (void)next_enc;
  return false;
#endif
}

}  // namespace edgetrain::vk
