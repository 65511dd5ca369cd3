// WebGPU encoders of the optimizer ops: in-place AdamW.
#include "adamw.wgsl.h"
#include "webgpu/kernel.h"

namespace edgetrain::wg {
namespace {

void enc_adamw_step(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const int64_t n = c.in[0].numel();
  if (n == 0) return;
  Dispatch d(ET_WG_KERNEL(adamw));
  uint32_t wg = ctx.wg_size(256);
  d.constant("WG", wg);
  d.out(0).out(1).out(2).in(3).scalars().uniform();
  d.arg(u32(n));
  for (int i = 0; i < 7; ++i) d.arg(ctx.float_index[i]);
  grid_1d(ceil_div(static_cast<uint64_t>(n), wg), ctx, d.groups);
  out.dispatches.push_back(std::move(d));
}

}  // namespace

Encoder optim_encoder(Op op) {
  switch (op) {
    case Op::adamw_step: return enc_adamw_step;
    default: return nullptr;
  }
}

}  // namespace edgetrain::wg
