// Which encoder serves which op: each family file answers for its own ops.
#include <algorithm>

#include "vulkan/kernel.h"

namespace edgetrain::vk {

// One lookup per family file (ops_<family>.cpp); each returns nullptr for ops it does not own.
Encoder train_encoder(Op op);
Encoder gemm_encoder(Op op);
Encoder elementwise_encoder(Op op);
Encoder copy_encoder(Op op);
Encoder reduce_encoder(Op op);
Encoder llama_encoder(Op op);
Encoder optim_encoder(Op op);

Encoder encoder_for(Op op) {
  for (auto family : {train_encoder, gemm_encoder, elementwise_encoder, copy_encoder, reduce_encoder,
                      llama_encoder, optim_encoder})
    if (Encoder e = family(op)) return e;
  return nullptr;
}

void grid_1d(uint64_t workgroups, const EncodeContext& ctx, uint32_t groups[3]) {
  uint64_t x = std::max<uint64_t>(1, std::min<uint64_t>(workgroups, ctx.max_groups[0]));
  uint64_t y = (workgroups + x - 1) / x;
  ET_CHECK_KIND(ErrorKind::unsupported, y <= ctx.max_groups[1], "vulkan: ", workgroups,
                " workgroups exceed the device grid limits");
  groups[0] = static_cast<uint32_t>(x);
  groups[1] = static_cast<uint32_t>(std::max<uint64_t>(1, y));
  groups[2] = 1;
}

}  // namespace edgetrain::vk
