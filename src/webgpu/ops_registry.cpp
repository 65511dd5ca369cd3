// Which encoder serves which op (each family file answers for its own ops), and the grid helpers.
#include <algorithm>

#include "webgpu/kernel.h"

namespace edgetrain::wg {

Encoder train_encoder(Op op);
Encoder gemm_encoder(Op op);
Encoder elementwise_encoder(Op op);
Encoder optim_encoder(Op op);

Encoder encoder_for(Op op) {
  for (auto family : {train_encoder, gemm_encoder, elementwise_encoder, optim_encoder})
    if (Encoder e = family(op)) return e;
  return nullptr;
}

uint32_t EncodeContext::wg_size(uint32_t want) const {
  uint32_t limit = std::min(max_invocations, max_size_x), s = 1;
  while (s * 2 <= want && s * 2 <= limit) s *= 2;
  return s;
}

void grid_1d(uint64_t workgroups, const EncodeContext& ctx, uint32_t groups[3]) {
  uint64_t x = std::max<uint64_t>(1, std::min<uint64_t>(workgroups, ctx.max_groups));
  uint64_t y = std::max<uint64_t>(1, ceil_div(workgroups, x));
  ET_CHECK(y <= ctx.max_groups, "webgpu: ", workgroups, " workgroups exceed the device grid limits");
  groups[0] = static_cast<uint32_t>(x);
  groups[1] = static_cast<uint32_t>(y);
  groups[2] = 1;
}

}  // namespace edgetrain::wg
