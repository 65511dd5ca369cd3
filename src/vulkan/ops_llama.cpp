// Vulkan encoders of the Llama-block family: rms_norm (+backward), rope (+backward), silu_mul (+backward),
// embedding (+backward, a deterministic scatter-add), gather and causal attention (+backward). Kernels:
// shaders/rms_norm*.comp, rope.comp, silu_mul*.comp, embedding*.comp, gather.comp, attention*.comp (the
// f16 flag on devices with cooperative matrices: attention_coop*.comp, on the tensor cores; on devices with
// cooperative matrices 2: cm2/attention_cm2.comp and cm2/attention_cm2_backward.comp).
#include <algorithm>

#include "attention.spv.h"
#include "attention_backward.spv.h"
#include "attention_coop.spv.h"
#include "attention_coop_backward.spv.h"
#include "attention_cm2_copy16.spv.h"
#include "attention_coop_copy16.spv.h"
#if EDGETRAIN_VK_CM2
#include "attention_cm2.spv.h"
#include "attention_cm2_backward.spv.h"
#endif
#include "core/attention_tiles.h"
#include "embedding.spv.h"
#include "embedding_backward.spv.h"
#include "gather.spv.h"
#include "rms_norm.spv.h"
#include "rms_norm_backward.spv.h"
#include "rope.spv.h"
#include "silu_mul.spv.h"
#include "silu_mul_backward.spv.h"
#include "vulkan/coop_matrix2.h"
#include "vulkan/kernel.h"

namespace edgetrain::vk {

void encode_rms_norm(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape& s = c.in[0].shape();
  u32(s.numel(), c);
  uint32_t D = u32(s.last(), c), rows = u32(s.rows(), c);
  if (rows == 0) return;
  uint32_t wg = reduce_wg(ctx);
  Dispatch d(ET_VK_KERNEL(rms_norm), {wg});
  d.arg(D).arg(rows).arg(ctx.float_index[0]);
  grid_1d(rows, ctx, d.groups);
  out.dispatches.push_back(d);
}

namespace {
// Rows per dw partial of rms_norm_backward.
constexpr uint32_t kDwChunk = 64;
}  // namespace

void encode_rms_norm_backward(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape& s = c.in[1].shape();
  u32(s.numel(), c);
  uint32_t D = u32(s.last(), c), rows = u32(s.rows(), c);
  uint32_t n_chunks = (rows + kDwChunk - 1) / kDwChunk;
  uint32_t acc = c.ints[0] != 0 ? 1u : 0u;
  const bool want_dw = c.ints.size() < 2 || c.ints[1] != 0;  // dw = 0: a frozen w, dw left as it is
  uint32_t wg = reduce_wg(ctx);
  out.scratch_bytes.push_back(std::max<size_t>(16, size_t(n_chunks) * D * sizeof(float)));
  u32(uint64_t(n_chunks) * D, c);
  auto make = [&](uint32_t mode) {
    Dispatch d(ET_VK_KERNEL(rms_norm_backward), {wg, mode});
    d.arg(D).arg(rows).arg(kDwChunk).arg(n_chunks).arg(acc);
    return d;
  };
  if (rows > 0 && D > 0) {
    Dispatch dx = make(0);
    grid_1d(rows, ctx, dx.groups);
    out.dispatches.push_back(dx);
    if (!want_dw) return;
    Dispatch part = make(1);
    threads_grid(part, uint64_t(n_chunks) * D, wg, ctx);
    out.dispatches.push_back(part);
  }
  if (D > 0 && want_dw) {
    Dispatch dw = make(2);
    threads_grid(dw, D, wg, ctx);
    out.dispatches.push_back(dw);
  }
}

namespace {
void rope_like(const OpCall& c, const EncodeContext& ctx, Encoded& out, uint32_t backward) {
  const Shape& s = c.in[0].shape();
  int r = s.rank();
  u32(s.numel(), c);
  uint32_t T = u32(s[r - 3], c), H = u32(s[r - 2], c), D = u32(s[r - 1], c);
  uint32_t n = u32(s.numel() / std::max<int64_t>(1, int64_t(H) * D) * (D / 2), c);  // B*T*D/2
  if (n == 0 || H == 0) return;
  const uint32_t has_freqs = c.has_in(1) ? 1u : 0u;
  const uint32_t has_pos = c.has_in(2) ? 1u : 0u;
  Dispatch d(ET_VK_KERNEL(rope), {backward, has_freqs, has_pos});
  d.arg(n).arg(T).arg(H).arg(D).arg(ctx.float_index[0]).arg(ctx.float_index[1]);
  threads_grid(d, n, kWG, ctx);
  out.dispatches.push_back(d);
}
}  // namespace

void encode_rope(const OpCall& c, const EncodeContext& ctx, Encoded& out) { rope_like(c, ctx, out, 0); }
void encode_rope_backward(const OpCall& c, const EncodeContext& ctx, Encoded& out) { rope_like(c, ctx, out, 1); }

void encode_silu_mul(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  uint32_t n = u32(c.in[0].numel(), c);
  if (n == 0) return;
  const uint32_t vec = n % 4 == 0 ? 1u : 0u;
  Dispatch d(ET_VK_KERNEL(silu_mul), {vec});
  d.arg(vec ? n / 4 : n);
  threads_grid(d, vec ? n / 4 : n, kWG, ctx);
  out.dispatches.push_back(d);
}

void encode_silu_mul_backward(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  uint32_t n = u32(c.in[0].numel(), c);
  if (n == 0) return;
  Dispatch d(ET_VK_KERNEL(silu_mul_backward));
  d.arg(n);
  threads_grid(d, n, kWG, ctx);
  out.dispatches.push_back(d);
}

void encode_embedding(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape& w = c.in[0].shape();
  uint32_t n = u32(c.out[0].numel(), c);
  if (n == 0) return;
  const int64_t first = c.ints.size() > 0 ? c.ints[0] : 0, total = c.ints.size() > 1 ? c.ints[1] : w[0];
  Dispatch d(ET_VK_KERNEL(embedding));
  d.arg(n).arg(u32(w[0], c)).arg(u32(w[1], c)).arg(u32(first, c)).arg(u32(total, c));
  threads_grid(d, n, kWG, ctx);
  out.dispatches.push_back(d);
}

// Zero dw (unless accumulating), stable-sort token positions by index into scratch, then one pass where
// the first position of each run of equal indices of this part sums its run in token order.
void encode_embedding_backward(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape& dw = c.out[0].shape();
  uint32_t V = u32(dw[0], c), D = u32(dw[1], c), n = u32(c.in[1].numel(), c);
  u32(int64_t(V) * D, c);
  u32(int64_t(n) * D, c);
  uint32_t acc = c.ints[0] != 0 ? 1u : 0u, first = u32(c.ints.size() > 1 ? c.ints[1] : 0, c);
  uint32_t wg = reduce_wg(ctx);
  out.scratch_bytes.push_back(std::max<size_t>(16, size_t(n) * sizeof(uint32_t)));
  auto make = [&](uint32_t mode) {
    Dispatch d(ET_VK_KERNEL(embedding_backward), {wg, mode});
    d.arg(n).arg(V).arg(D).arg(acc).arg(first);
    return d;
  };
  if (!acc && uint64_t(V) * D > 0) {
    Dispatch z = make(0);
    threads_grid(z, uint64_t(V) * D, wg, ctx);
    out.dispatches.push_back(z);
  }
  if (n == 0 || D == 0) return;
  Dispatch sort = make(1);
  threads_grid(sort, n, wg, ctx);
  out.dispatches.push_back(sort);
  Dispatch add = make(2);
  threads_grid(add, uint64_t(n) * D, wg, ctx);
  out.dispatches.push_back(add);
}

void encode_gather(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape &xs = c.in[0].shape(), &is = c.in[1].shape();
  uint32_t n = u32(is.numel(), c);
  if (n == 0) return;
  int r = xs.rank();
  int64_t dim = c.ints[0] < 0 ? c.ints[0] + r : c.ints[0];
  u32(xs.numel(), c);
  Dims4 st = row_strides(xs, c);
  Dispatch d(ET_VK_KERNEL(gather));
  d.arg(pad4(is, c)).arg(st).arg(n).arg(static_cast<uint32_t>(4 - r + dim)).arg(u32(xs[static_cast<int>(dim)], c));
  threads_grid(d, n, kWG, ctx);
  out.dispatches.push_back(d);
}

namespace {
struct AttnShape {
  uint32_t B, T, S, H, KV, hd;
};
// q [B,T,H,hd] and k [B,S,KV,hd] of an attention call (inputs qi, qi + 1), with every offset the kernels
// form checked to fit 32 bits.
AttnShape attention_shape(const OpCall& c, size_t qi) {
  const Shape &q = c.in[qi].shape(), &k = c.in[qi + 1].shape();
  u32(q.numel(), c);
  u32(k.numel(), c);
  return {u32(q[0], c), u32(q[1], c), u32(k[1], c), u32(q[2], c), u32(k[2], c), u32(q[3], c)};
}
// The tensor-core kernels (attention_coop*.comp) for a call with the f16 flag on a device with fp16
// cooperative matrices whose accumulator layout is known (coop_layout.h), subgroups of 32 and room for
// their tiles; 0 when they do not apply, else the rows of their B tiles.
uint32_t coop_attention_rows(const OpCall& c, const AttnShape& a, const EncodeContext& ctx) {
  if (!f16_operands(c) || !ctx.coopmat || !ctx.coop_acc_known || ctx.subgroup_size != 32 || ctx.max_invocations < 128)
    return 0;
  return gpu::attention_coop_rows(a.hd, ctx.max_shared_bytes);
}
// B16 of the tensor-core backward (attention_coop_backward.comp): its B tiles read from fp16 copies in the pooled
// scratch, which attention_coop_copy16.comp makes first; offsets in uvec4s, the q, dout, k and v
// copies after D (B * H * T floats, the dq pass's output). Where the head dim is not a multiple of 8 or the
// copies would pass a binding's limit, the kernels read the fp32 rows. (attention_coop.comp reads fp32 rows: its
// copies cost more than they saved, docs/PERFORMANCE.md; the cm2 forward makes its own, encode_attention_cm2.)
struct AttnCopies {
  bool on = false;
  uint32_t q16 = 0, d16 = 0, k16 = 0, v16 = 0;
  uint64_t nq8 = 0, nk8 = 0;  // uvec4s of q's (and dout's) copy, of k's (and v's)
  uint64_t d_bytes = 0;  // D, from the start of the pooled scratch
  uint64_t bytes = 0;    // the pooled scratch the call needs
};
AttnCopies attention_copies(const AttnShape& a, uint32_t coop_rows, const EncodeContext& ctx) {
  AttnCopies cp;
  cp.d_bytes = uint64_t(a.B) * a.H * a.T * 4;
  cp.bytes = std::max<uint64_t>(16, cp.d_bytes);
  if (!coop_rows || a.hd % 8 != 0) return cp;
  const uint64_t nq8 = uint64_t(a.B) * a.T * a.H * a.hd / 8, nk8 = uint64_t(a.B) * a.S * a.KV * a.hd / 8;
  const uint64_t base = (cp.d_bytes + 15) / 16, n8 = 2 * nq8 + 2 * nk8;
  if ((base + n8) * 16 > ctx.max_storage_range || base + n8 >= (uint64_t{1} << 32)) return cp;
  cp.on = true;
  cp.nq8 = nq8;
  cp.nk8 = nk8;
  cp.bytes = (base + n8) * 16;
  cp.q16 = static_cast<uint32_t>(base);
  cp.d16 = static_cast<uint32_t>(base + nq8);
  cp.k16 = static_cast<uint32_t>(base + 2 * nq8);
  cp.v16 = static_cast<uint32_t>(base + 2 * nq8 + nk8);
  return cp;
}

// One dispatch of kernel `kind`: with coop_rows (coop_attention_rows, 0: none) attention_coop.comp or
// attention_coop_backward.comp, else attention.comp or attention_backward.comp with their tiles; the
// backward's MODE is 0 for dq, 1 for dk/dv. B * heads * blocks workgroups, blocks = A tiles per (batch,
// head): query blocks, or key blocks for dk/dv.
Dispatch attention_dispatch(gpu::AttnKernel kind, const AttnShape& a, uint32_t coop_rows, const AttnCopies& cp,
                            const OpCall& c, const EncodeContext& ctx) {
  const bool forward = kind == gpu::AttnKernel::forward;
  const uint32_t heads = kind == gpu::AttnKernel::dkdv ? a.KV : a.H, rows = kind == gpu::AttnKernel::dkdv ? a.S : a.T;
  const uint32_t mode = kind == gpu::AttnKernel::dq ? 0u : 1u;
  // HAS_POS: the pos input (3 of the forward, 6 of the backward) is bound (else a dummy).
  const size_t pos = forward ? 3 : 6;
  const uint32_t has_pos = c.in.size() > pos && c.in[pos].defined() ? 1u : 0u;
  uint32_t a_rows;
  std::vector<uint32_t> spec;
  if (coop_rows) {  // constants HC, BR, HAS_POS, the accumulator layout, then the backward's MODE and B16
    a_rows = gpu::kAttnCoopRows;
    spec = {gpu::attention_capacity(a.hd), coop_rows, has_pos, ctx.coop_acc_rows_high, ctx.coop_acc_columns};
    if (!forward) spec.insert(spec.end(), {mode, cp.on ? 1u : 0u});
  } else {  // the tile constants 0-5, then MODE, then HAS_POS
    const gpu::AttnTiles t = gpu::attention_tiles(kind, a.hd, ctx, c);
    a_rows = t.a_rows();
    spec = {t.invocations(), t.ri, t.kj, t.hc, gpu::attention_swizzle(t.hc / 4),
            gpu::attention_swizzle(t.b_rows() / 4)};
    if (!forward) spec.push_back(mode);
    spec.push_back(has_pos);
  }
  const Kernel kernel = coop_rows ? (forward ? ET_VK_KERNEL(attention_coop) : ET_VK_KERNEL(attention_coop_backward))
                                  : (forward ? ET_VK_KERNEL(attention) : ET_VK_KERNEL(attention_backward));
  const uint32_t blocks = static_cast<uint32_t>(ceil_div(rows, a_rows));
  Dispatch d(kernel, spec);
  d.arg(a.B).arg(a.T).arg(a.S).arg(a.H).arg(a.KV).arg(a.hd).arg(blocks).arg(ctx.float_index[0]);
  if (coop_rows && !forward) {
    d.arg(cp.q16).arg(cp.d16).arg(cp.k16).arg(cp.v16);
    // What it writes in the pooled scratch: the dq pass's D.
    d.pooled_known = true;
    d.pooled_begin = 0;
    d.pooled_end = kind == gpu::AttnKernel::dq ? cp.d_bytes : 0;
  }
  grid_1d(uint64_t(a.B) * heads * blocks, ctx, d.groups);
  return d;
}

// attention_coop_copy16.comp: the fp16 copies of q, dout, k and v (AttnCopies), 8 values per invocation.
Dispatch attention_copy16_dispatch(const AttnCopies& cp, const EncodeContext& ctx) {
  Dispatch d(ET_VK_KERNEL(attention_coop_copy16), {});
  d.arg(static_cast<uint32_t>(cp.nq8)).arg(static_cast<uint32_t>(cp.nk8));
  d.arg(cp.q16).arg(cp.d16).arg(cp.k16).arg(cp.v16);
  d.pooled_known = true;
  d.pooled_begin = uint64_t(cp.q16) * 16;
  d.pooled_end = cp.bytes;
  grid_1d((2 * cp.nq8 + 2 * cp.nk8 + 255) / 256, ctx, d.groups);
  return d;
}

// The cooperative-matrix-2 forward (cm2/attention_cm2.comp): for a call with the f16 flag on a device that
// has them (Limits::cm2) and a head dim that is a multiple of 16 up to 128. One workgroup per (batch, head,
// block of 64 queries). attention_cm2_copy16.comp first writes fp16 copies of q, k and v into the pooled
// scratch, which its tensor loads read as they are; where they would pass a binding's limit or 32-bit
// offsets it reads the fp32 rows, rounding them as it loads them (the same values). H200 figures:
// docs/PERFORMANCE.md (thirteenth and twentieth sessions).
bool cm2_attention(const OpCall& c, const AttnShape& a, const EncodeContext& ctx) {
  return cm2_built() && f16_operands(c) && ctx.cm2 && a.hd % 16 == 0 && a.hd <= 128 && a.T > 0;
}
void encode_attention_cm2(const OpCall& c, const AttnShape& a, const EncodeContext& ctx, Encoded& out) {
#if EDGETRAIN_VK_CM2
  const uint32_t has_pos = c.in.size() > 3 && c.in[3].defined() ? 1u : 0u;
  const uint32_t nqb = static_cast<uint32_t>(ceil_div(a.T, 64));
  // The fp16 copies, in uvec4s of 8 halves: q [B*T][H*hd], then k and v [B*S][KV*hd].
  const uint64_t nq8 = uint64_t(a.B) * a.T * a.H * a.hd / 8, nk8 = uint64_t(a.B) * a.S * a.KV * a.hd / 8;
  const uint64_t n8 = nq8 + 2 * nk8;
  const bool copies = n8 * 16 <= ctx.max_storage_range && n8 * 8 < (uint64_t{1} << 32);
  const uint32_t q16 = 0, k16 = static_cast<uint32_t>(nq8), v16 = static_cast<uint32_t>(nq8 + nk8);
  if (copies) {
    Dispatch cp(ET_VK_KERNEL(attention_cm2_copy16), {});
    cp.arg(static_cast<uint32_t>(nq8)).arg(static_cast<uint32_t>(nk8)).arg(q16).arg(k16).arg(v16);
    cp.pooled_known = true;
    cp.pooled_end = n8 * 16;
    grid_1d((n8 + 255) / 256, ctx, cp.groups);
    out.dispatches.push_back(cp);
    out.pooled_scratch_bytes = static_cast<size_t>(n8 * 16);
  }
  Dispatch d(ET_VK_KERNEL(attention_cm2), {a.hd, has_pos, copies ? 1u : 0u});
  d.arg(a.B).arg(a.T).arg(a.S).arg(a.H).arg(a.KV).arg(a.hd).arg(nqb).arg(ctx.float_index[0]);
  d.arg(q16).arg(k16).arg(v16);
  d.pooled_known = true;  // reads the copies, writes nothing there
  grid_1d(uint64_t(a.B) * a.H * nqb, ctx, d.groups);
  out.dispatches.push_back(d);
#else
  (void)c, (void)a, (void)ctx, (void)out;
#endif
}
}  // namespace

void encode_attention(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const AttnShape a = attention_shape(c, 0);
  if (uint64_t(a.B) * a.T == 0) return;
  if (cm2_attention(c, a, ctx)) {
    encode_attention_cm2(c, a, ctx, out);
    return;
  }
  out.dispatches.push_back(attention_dispatch(gpu::AttnKernel::forward, a, coop_attention_rows(c, a, ctx), {}, c, ctx));
}

namespace {
// The cooperative-matrix-2 backward (cm2/attention_cm2_backward.comp), where the forward takes cm2 and the
// fp16 copies of q, dout, k and v (attention_coop_copy16.comp, AttnCopies) fit one binding with element
// offsets below 2^32 (with GQA, each query head's shares of dk and dv after them too): the copies, then dq
// (which writes D), then dk/dv (with GQA the shares, then their sums). False (nothing appended) elsewhere.
// H200 figures: docs/PERFORMANCE.md (twenty-second session).
bool encode_attention_backward_cm2(const OpCall& c, const AttnShape& a, const EncodeContext& ctx, Encoded& out) {
#if EDGETRAIN_VK_CM2
  if (!cm2_attention(c, a, ctx) || a.T == 0) return false;
  const AttnCopies cp = attention_copies(a, gpu::kAttnCoopRows, ctx);
  if (!cp.on || cp.bytes / 2 >= (uint64_t{1} << 32)) return false;
  const bool gqa = a.H != a.KV;
  const uint64_t share = uint64_t(a.B) * a.S * a.H * a.hd;  // floats of one gradient's shares
  const uint64_t bytes = gqa ? cp.bytes + 2 * share * 4 : cp.bytes;
  if (bytes > ctx.max_storage_range || bytes / 4 >= (uint64_t{1} << 32)) return false;
  const uint32_t part = static_cast<uint32_t>(cp.bytes / 4);
  out.pooled_scratch_bytes = static_cast<size_t>(bytes);
  out.dispatches.push_back(attention_copy16_dispatch(cp, ctx));
  const uint32_t has_pos = c.in.size() > 6 && c.in[6].defined() ? 1u : 0u;
  for (uint32_t mode : {0u, 1u, 2u}) {
    if (mode == 2 && !gqa) break;
    const uint32_t blocks = static_cast<uint32_t>(ceil_div(mode == 0 ? a.T : a.S, 64));
    Dispatch d(ET_VK_KERNEL(attention_cm2_backward), {a.hd, has_pos, mode});
    d.arg(a.B).arg(a.T).arg(a.S).arg(a.H).arg(a.KV).arg(a.hd).arg(blocks).arg(ctx.float_index[0]);
    d.arg(cp.q16).arg(cp.d16).arg(cp.k16).arg(cp.v16).arg(part);
    d.pooled_known = true;  // dq writes D at the scratch's start, dk/dv (GQA) the shares; all read the copies
    d.pooled_begin = mode == 1 && gqa ? cp.bytes : 0;
    d.pooled_end = mode == 0 ? cp.d_bytes : mode == 1 && gqa ? bytes : 0;
    if (mode == 2) grid_1d(ceil_div(2 * uint64_t(a.B) * a.S * a.KV * a.hd, 128), ctx, d.groups);
    else grid_1d(uint64_t(a.B) * a.H * blocks, ctx, d.groups);
    out.dispatches.push_back(d);
  }
  return true;
#else
  (void)c, (void)a, (void)ctx, (void)out;
  return false;
#endif
}
}  // namespace

// dq (which writes D = rowsum(dout * out) to scratch), then dk/dv, which reads D; with B16 the fp16 copies
// of q, dout, k and v first.
void encode_attention_backward(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const AttnShape a = attention_shape(c, 1);
  if (uint64_t(a.B) * a.S == 0) return;
  if (encode_attention_backward_cm2(c, a, ctx, out)) return;
  const uint32_t coop_rows = coop_attention_rows(c, a, ctx);
  const AttnCopies cp = attention_copies(a, coop_rows, ctx);
  out.pooled_scratch_bytes = static_cast<size_t>(cp.bytes);  // D (and the copies), within the call
  if (cp.on) out.dispatches.push_back(attention_copy16_dispatch(cp, ctx));
  if (a.T > 0) out.dispatches.push_back(attention_dispatch(gpu::AttnKernel::dq, a, coop_rows, cp, c, ctx));
  out.dispatches.push_back(attention_dispatch(gpu::AttnKernel::dkdv, a, coop_rows, cp, c, ctx));
}

}  // namespace edgetrain::vk
