// WebGPU encoders of the optimizer helpers: the global gradient norm and the clip coefficient.
#include "clip_coef.wgsl.h"
#include "grad_norm.wgsl.h"
#include "webgpu/kernel.h"

namespace edgetrain::wg {

// One sum of squares per input into a scratch slot, then the root of their sum (all fixed-order trees).
void encode_grad_norm(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const uint32_t wg = ctx.wg_size(256);
  out.scratch_bytes.push_back(c.in.size() * 4);
  for (size_t i = 0; i < c.in.size(); ++i) {
    Dispatch d(ET_WG_KERNEL(grad_norm));
    d.constant("WG", wg).constant("SQUARE", 1).constant("ROOT", 0);
    d.in(static_cast<int>(i)).scratch(0).uniform();
    d.arg(u32(c.in[i].numel(), c)).arg(kNanBits).arg(static_cast<uint32_t>(i)).arg(0u);
    out.dispatches.push_back(std::move(d));
  }
  Dispatch d(ET_WG_KERNEL(grad_norm));
  d.constant("WG", wg).constant("SQUARE", 0).constant("ROOT", 1);
  d.scratch(0, Access::read).out(0).uniform();
  d.arg(static_cast<uint32_t>(c.in.size())).arg(kNanBits).arg(0u).arg(0u);
  out.dispatches.push_back(std::move(d));
}

void encode_clip_coef(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  Dispatch d(ET_WG_KERNEL(clip_coef));
  d.in(0).out(0).scalars().uniform();
  d.arg(ctx.float_index[0]);
  out.dispatches.push_back(std::move(d));
}

}  // namespace edgetrain::wg
