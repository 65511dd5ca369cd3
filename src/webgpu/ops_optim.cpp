// WebGPU encoders of the optimizer helpers: the global gradient norm and the clip coefficient.
#include <algorithm>
#include <vector>

#include "clip_coef.wgsl.h"
#include "grad_norm.wgsl.h"
#include "grad_norm_squares.wgsl.h"
#include "webgpu/kernel.h"

namespace edgetrain::wg {

// Partial sums of squares (grad_norm_squares.wgsl, up to kGroup gradients per dispatch): each tensor is cut
// into at most kMaxParts chunks of >= 16 floats per invocation, one workgroup each, writing to its own
// scratch slot; then one workgroup sums all partials and takes the root (grad_norm.wgsl, ROOT). Chunks depend
// only on the sizes, so the result is the same on every run and device.
void encode_grad_norm(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  constexpr uint64_t kMaxParts = 1024;
  constexpr size_t kGroup = 7;  // grad_norm_squares.wgsl's inputs: with its output, WebGPU's 8 storage buffers
  const uint32_t wg = ctx.wg_size(256);
  uint32_t slots = 0;
  std::vector<size_t> group;  // the non-empty inputs of the next dispatch
  auto flush = [&] {
    if (group.empty()) return;
    Dispatch d(ET_WG_KERNEL(grad_norm_squares));
    d.constant("WG", wg);
    for (size_t j = 0; j < kGroup; ++j) {
      if (j < group.size()) d.in(static_cast<int>(group[j]));
      else d.dummy();
    }
    d.scratch(0).uniform();
    uint32_t n[8] = {}, chunk[8] = {}, first[8] = {}, groups = 0;
    for (size_t j = 0; j < group.size(); ++j) {
      const uint64_t len = static_cast<uint64_t>(c.in[group[j]].numel());
      const uint64_t parts = std::clamp<uint64_t>(ceil_div(len, 16ull * wg), 1, kMaxParts);
      n[j] = u32(static_cast<int64_t>(len), c);
      chunk[j] = static_cast<uint32_t>(ceil_div(len, parts));
      first[j] = groups;
      groups += static_cast<uint32_t>(ceil_div(len, chunk[j]));
    }
    d.arg(slots).arg(static_cast<uint32_t>(group.size())).arg(kNanBits).arg(groups);
    for (uint32_t v : n) d.arg(v);
    for (uint32_t v : chunk) d.arg(v);
    for (uint32_t v : first) d.arg(v);
    grid_1d(groups, ctx, d.groups);
    out.dispatches.push_back(std::move(d));
    slots += groups;
    group.clear();
  };
  for (size_t i = 0; i < c.in.size(); ++i) {
    if (c.in[i].numel() == 0) continue;
    group.push_back(i);
    if (group.size() == kGroup) flush();
  }
  flush();
  out.scratch_bytes.push_back(std::max<size_t>(16, static_cast<size_t>(slots) * 4));
  Dispatch d(ET_WG_KERNEL(grad_norm));
  d.constant("WG", wg).constant("ROOT", 1);
  d.scratch(0, Access::read).out(0).uniform();
  d.arg(slots).arg(kNanBits).arg(0u).arg(slots);
  out.dispatches.push_back(d);
}

void encode_clip_coef(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  Dispatch d(ET_WG_KERNEL(clip_coef));
  d.in(0).out(0).scalars().uniform();
  d.arg(ctx.float_index[0]);
  out.dispatches.push_back(std::move(d));
}

}  // namespace edgetrain::wg
