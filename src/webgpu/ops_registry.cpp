// Which encoder serves which op (each family file answers for its own ops), and the grid helpers.
#include <algorithm>

#include "webgpu/kernel.h"

namespace edgetrain::wg {

Encoder train_encoder(Op op);
Encoder gemm_encoder(Op op);
Encoder elementwise_encoder(Op op);
Encoder optim_encoder(Op op);
Encoder reduce_encoder(Op op);
Encoder llama_encoder(Op op);
Encoder copy_encoder(Op op);

Encoder encoder_for(Op op) {
  for (auto family : {train_encoder, gemm_encoder, elementwise_encoder, optim_encoder, reduce_encoder, llama_encoder,
                      copy_encoder})
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
  ET_CHECK_KIND(ErrorKind::unsupported, y <= ctx.max_groups, "webgpu: ", workgroups,
                " workgroups exceed the device grid limits");
  groups[0] = static_cast<uint32_t>(x);
  groups[1] = static_cast<uint32_t>(y);
  groups[2] = 1;
}

}  // namespace edgetrain::wg

namespace edgetrain::wg {

Shape4 shape4(const Shape& s) {
  Shape4 r;
  const int pad = 4 - s.rank();
  for (int i = 0; i < s.rank(); ++i) r.dims[pad + i] = u32(s[i]);
  return r;
}

Shape4 bcast_strides(const Shape& operand, const Shape& out) {
  Shape4 r;
  for (int i = 0; i < 4; ++i) r.dims[i] = 0;
  int64_t stride = 1;
  for (int i = operand.rank() - 1; i >= 0; --i) {
    int d = 4 - (operand.rank() - i);
    int od = out.rank() - (operand.rank() - i);
    bool broadcast = operand[i] == 1 && (od < 0 || out[od] != 1);
    r.dims[d] = broadcast ? 0 : u32(stride);
    stride *= operand[i];
  }
  return r;
}

}  // namespace edgetrain::wg
