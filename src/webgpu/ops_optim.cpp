// WebGPU encoders of the optimizer helpers: the global gradient norm and the clip coefficient.
#include <algorithm>

#include "clip_coef.wgsl.h"
#include "grad_norm.wgsl.h"
#include "webgpu/kernel.h"

namespace edgetrain::wg {

// One sum of squares per input into a scratch slot, then the root of their sum (all fixed-order trees).
// Partial sums of squares: each tensor is cut into at most kMaxParts chunks of >= 16 floats per invocation,
// one workgroup each, writing to its own scratch slot; then one workgroup sums all partials and takes the
// root. Chunks depend only on the sizes, so the result is the same on every run and device.
void encode_grad_norm(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  constexpr uint64_t kMaxParts = 1024;
  const uint32_t wg = ctx.wg_size(256);
  uint32_t slots = 0;
  for (size_t i = 0; i < c.in.size(); ++i) {
    const uint64_t n = static_cast<uint64_t>(c.in[i].numel());
    const uint64_t parts = std::clamp<uint64_t>(ceil_div(n, 16ull * wg), 1, kMaxParts);
    const uint64_t chunk = std::max<uint64_t>(1, ceil_div(n, parts));
    Dispatch d(ET_WG_KERNEL(grad_norm));
    d.constant("WG", wg).constant("SQUARE", 1).constant("ROOT", 0);
    d.in(static_cast<int>(i)).scratch(0).uniform();
    d.arg(u32(static_cast<int64_t>(n), c)).arg(kNanBits).arg(slots).arg(u32(static_cast<int64_t>(chunk), c));
    grid_1d(ceil_div(n, chunk) + (n == 0), ctx, d.groups);
    out.dispatches.push_back(std::move(d));
    slots += static_cast<uint32_t>(ceil_div(n, chunk) + (n == 0));
  }
  out.scratch_bytes.push_back(static_cast<size_t>(slots) * 4);
  Dispatch d(ET_WG_KERNEL(grad_norm));
  d.constant("WG", wg).constant("SQUARE", 0).constant("ROOT", 1);
  d.scratch(0, Access::read).out(0).uniform();
  d.arg(slots).arg(kNanBits).arg(0u).arg(slots);
  out.dispatches.push_back(std::move(d));
}

void encode_clip_coef(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  Dispatch d(ET_WG_KERNEL(clip_coef));
  d.in(0).out(0).scalars().uniform();
  d.arg(ctx.float_index[0]);
  out.dispatches.push_back(std::move(d));
}

}  // namespace edgetrain::wg
