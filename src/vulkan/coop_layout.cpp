// probe_coop_acc_layout: one dispatch of coop_layout.comp at backend start, and the fit of its answer.
#include "vulkan/coop_layout.h"

#include <cstring>
#include <vector>

#include "coop_layout.spv.h"
#include "vulkan/program.h"

namespace edgetrain::vk {

CoopAccLayout fit_coop_acc_layout(const float* out) {
  CoopAccLayout l;
  if (out[0] != 8.0f) {
    l.what = "accumulator tiles hold " + std::to_string(out[0]) + " elements per lane, not 8";
    return l;
  }
  // Lane 0 gives each element's row half and column offset; every lane must then follow the form.
  for (uint32_t i = 0; i < 8; ++i) {
    const float v = out[1 + i];
    const int pos = static_cast<int>(v), r = pos / 16, c = pos % 16;
    if (v != float(pos) || pos < 0 || pos >= 256 || (r != 0 && r != 8)) {
      l.what = "lane 0 holds element (" + std::to_string(r) + ", " + std::to_string(c) + ")";
      return l;
    }
    l.rows_high |= uint32_t(r == 8) << i;
    l.columns |= uint32_t(c) << (4 * i);
  }
  bool seen[256] = {};
  for (uint32_t lane = 0; lane < 32; ++lane)
    for (uint32_t i = 0; i < 8; ++i) {
      const uint32_t r = (lane >> 2) + 8 * ((l.rows_high >> i) & 1), c = 2 * (lane & 3) + ((l.columns >> (4 * i)) & 15);
      const float want = float(r * 16 + c);
      if (c > 15 || out[1 + lane * 8 + i] != want || seen[r * 16 + c]) {  // r <= 7 + 8 always
        l.what = "lane " + std::to_string(lane) + " element " + std::to_string(i) + " is not where lanes 4g..4g+3 sharing rows g, g+8 would put it";
        return l;
      }
      seen[r * 16 + c] = true;
    }
  l.known = true;
  return l;
}

CoopAccLayout probe_coop_acc_layout(VulkanBackend& vb) {
  Context& ctx = vb.context();
  const VkDevice dev = ctx.device();
  HostBuffer out = vb.memory().create_host((1 + 32 * 8) * sizeof(float));
  std::memset(out.mapped, 0, out.size);
  VkCommandBuffer cb = VK_NULL_HANDLE;
  CoopAccLayout l;
  try {
    OneBufferSet one(vb, out.buffer);
    const uint32_t nbind = one.bindings();
    const VkDescriptorSet set = one.set();
    cb = allocate_command_buffer(dev, vb.transfer().pool());
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check(vkBeginCommandBuffer(cb, &bi), "vkBeginCommandBuffer");
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, vb.pipelines().get(ET_VK_KERNEL(coop_layout), {}, nbind));
    vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, vb.pipelines().layout(nbind), 0, 1, &set, 0, nullptr);
    vkCmdDispatch(cb, 1, 1, 1);
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0,
                         nullptr);
    check(vkEndCommandBuffer(cb), "vkEndCommandBuffer");
    vb.transfer().submit(cb, "cooperative-matrix layout probe");
    l = fit_coop_acc_layout(static_cast<const float*>(out.mapped));
  } catch (...) {
    if (cb) vkFreeCommandBuffers(dev, vb.transfer().pool(), 1, &cb);
    vb.memory().destroy_host(out);
    throw;
  }
  vkFreeCommandBuffers(dev, vb.transfer().pool(), 1, &cb);
  vb.memory().destroy_host(out);
  return l;
}

}  // namespace edgetrain::vk
