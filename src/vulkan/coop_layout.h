// The element layout of the tensor cores' fp32 accumulator tiles, asked of the device once: the attention
// kernels (attention_coop*.comp) do their softmax and gradient arithmetic on the accumulators' elements in
// registers, which needs each element's row and column.
#pragma once

#include <cstdint>
#include <string>

namespace edgetrain::vk {

class VulkanBackend;

// Element i (< 8) of lane l of a 16 x 16 fp32 cooperative matrix sits at row (l >> 2) + 8 * bit i of
// rows_high and column 2 * (l & 3) + nibble i of columns: lanes 4g..4g+3 share rows g and g + 8 (the
// layout of NVIDIA's mma tiles, element order as the driver reports it). known is false when the device
// keeps them otherwise; `what` then says how.
struct CoopAccLayout {
  bool known = false;
  uint32_t rows_high = 0;
  uint32_t columns = 0;
  std::string what;
};

// Runs coop_layout.comp once (the backend must have cooperative matrices) and fits its answer to the form
// above.
CoopAccLayout probe_coop_acc_layout(VulkanBackend& vb);
// The same fit from the probe's raw output (out[0] = elements per lane, then 8 positions per lane); for
// tests.
CoopAccLayout fit_coop_acc_layout(const float* out);

}  // namespace edgetrain::vk
