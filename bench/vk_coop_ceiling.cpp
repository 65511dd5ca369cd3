// edgetrain_vk_coop_ceiling: how fast the tensor cores run through VK_NV_cooperative_matrix on this device
// and driver, with gemm_coop.comp's workgroup shape, part by part (shaders/coop_ceiling.comp): the
// products alone, with fragment loads from workgroup memory, and with the per-slice stores and barriers.
// Prints TFLOP/s per variant, and the cooperative-matrix shapes the device lists (NV and KHR). Tells
// whether the GEMM's gap to cuBLAS lies in the products themselves or in feeding them.
//   edgetrain_vk_coop_ceiling [--iters N] [--groups-per-sm N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "coop_ceiling_2x4.spv.h"
#include "coop_ceiling_2x4_half.spv.h"
#include "coop_ceiling_2x2.spv.h"
#include "coop_ceiling_4x2.spv.h"
#include "coop_ceiling_4x4_s4.spv.h"
#include "vulkan/program.h"

namespace {

using namespace edgetrain;
using namespace edgetrain::vk;

const char* component_name(int t) {
  switch (t) {
    case 0: return "f16";   // VK_COMPONENT_TYPE_FLOAT16_KHR
    case 1: return "f32";
    case 2: return "f64";
    case 3: return "i8";
    case 4: return "i16";
    case 5: return "i32";
    case 6: return "i64";
    case 7: return "u8";
    case 8: return "u16";
    case 9: return "u32";
    case 10: return "u64";
    default: return "?";
  }
}

bool has_extension(Context& ctx, const char* name) {
  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(ctx.physical(), nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> avail(n);
  vkEnumerateDeviceExtensionProperties(ctx.physical(), nullptr, &n, avail.data());
  for (const auto& e : avail)
    if (!std::strcmp(e.extensionName, name)) return true;
  return false;
}

// The loader hands out entry points of extensions a device lacks; only those it lists are called.
void print_shapes(Context& ctx) {
  auto nv = !has_extension(ctx, "VK_NV_cooperative_matrix") ? nullptr : reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV>(
      vkGetInstanceProcAddr(ctx.instance(), "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV"));
  if (nv) {
    uint32_t n = 0;
    nv(ctx.physical(), &n, nullptr);
    std::vector<VkCooperativeMatrixPropertiesNV> p(n, {VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV});
    nv(ctx.physical(), &n, p.data());
    for (const auto& q : p)
      std::printf("NV  shape M%u N%u K%u  A %s B %s C %s D %s\n", q.MSize, q.NSize, q.KSize, component_name(q.AType),
                  component_name(q.BType), component_name(q.CType), component_name(q.DType));
  }
  // VK_KHR_cooperative_matrix postdates Debian 12's headers: its properties struct as the spec defines it.
  struct KhrProps {
    VkStructureType sType;
    void* pNext;
    uint32_t MSize, NSize, KSize;
    int AType, BType, CType, ResultType;
    VkBool32 saturatingAccumulation;
    int scope;
  };
  using KhrFn = VkResult(VKAPI_PTR*)(VkPhysicalDevice, uint32_t*, KhrProps*);
  auto khr = !has_extension(ctx, "VK_KHR_cooperative_matrix") ? nullptr : reinterpret_cast<KhrFn>(
      vkGetInstanceProcAddr(ctx.instance(), "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"));
  if (khr) {
    uint32_t n = 0;
    khr(ctx.physical(), &n, nullptr);
    std::vector<KhrProps> p(n, KhrProps{static_cast<VkStructureType>(1000506001), nullptr, 0, 0, 0, 0, 0, 0, 0, 0, 0});
    khr(ctx.physical(), &n, p.data());
    for (const auto& q : p)
      std::printf("KHR shape M%u N%u K%u  A %s B %s C %s R %s\n", q.MSize, q.NSize, q.KSize, component_name(q.AType),
                  component_name(q.BType), component_name(q.CType), component_name(q.ResultType));
  }
}

// Dispatches `groups` workgroups of kernel k (one binding: one tile's buffer it never writes, see the shader)
// `reps` times, each in its own submission; returns the fastest in seconds.
double time_kernel(VulkanBackend& vb, const Kernel& k, uint32_t mode, uint32_t groups, uint32_t iters, int reps) {
  Context& ctx = vb.context();
  const VkDevice dev = ctx.device();
  HostBuffer out = vb.memory().create_host(256 * sizeof(float));  // one 16x16 tile (never written)
  OneBufferSet one(vb, out.buffer);
  const uint32_t nbind = one.bindings();
  const VkDescriptorSet set = one.set();
  const VkPipeline pipe = vb.pipelines().get(k, {mode}, nbind);

  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    VkCommandBuffer cb = allocate_command_buffer(dev, vb.transfer().pool());
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check(vkBeginCommandBuffer(cb, &bi), "vkBeginCommandBuffer");
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
    vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, vb.pipelines().layout(nbind), 0, 1, &set, 0, nullptr);
    const uint32_t push[2] = {iters, 0u};
    vkCmdPushConstants(cb, vb.pipelines().layout(nbind), VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), push);
    vkCmdDispatch(cb, groups, 1, 1);
    check(vkEndCommandBuffer(cb), "vkEndCommandBuffer");
    const auto t0 = std::chrono::steady_clock::now();
    vb.transfer().submit(cb, "coop ceiling");
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    vkFreeCommandBuffers(dev, vb.transfer().pool(), 1, &cb);
    if (r > 0 && s < best) best = s;  // the first submission also warms the pipeline up
  }
  vb.memory().destroy_host(out);
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t iters = 4000, per_sm = 4;
  for (int i = 1; i < argc; i += 2) {
    const bool known = !std::strcmp(argv[i], "--iters") || !std::strcmp(argv[i], "--groups-per-sm");
    const int v = i + 1 < argc ? std::atoi(argv[i + 1]) : 0;
    if (!known || v <= 0) {
      std::fprintf(stderr, "edgetrain_vk_coop_ceiling: expected --iters N and/or --groups-per-sm N (N > 0), got '%s%s%s'\n",
                   argv[i], i + 1 < argc ? " " : "", i + 1 < argc ? argv[i + 1] : "");
      return 2;
    }
    (!std::strcmp(argv[i], "--iters") ? iters : per_sm) = static_cast<uint32_t>(v);
  }
  try {
    BackendOptions opts;
    VulkanBackend vb(opts);
    Context& ctx = vb.context();
    std::printf("device: %s, multiprocessors %u, tensor-core path %s\n", ctx.properties().deviceName,
                ctx.limits().multiprocessors, ctx.limits().coopmat ? "on" : "off");
    print_shapes(ctx);
    if (!ctx.limits().coopmat) {
      std::printf("no VK_NV_cooperative_matrix 16x16x16 fp16 path on this device: nothing to time\n");
      return 0;
    }
    const uint32_t sms = ctx.limits().multiprocessors ? ctx.limits().multiprocessors : 128;
    const uint32_t groups = sms * per_sm;
    struct Variant {
      const char* name;
      Kernel k;
      uint32_t frags;      // accumulators per subgroup
      uint32_t subgroups;  // per workgroup
    };
    const Variant variants[] = {
        {"2x4 fragments, uvec4 rows", ET_VK_KERNEL(coop_ceiling_2x4), 8, 8},
        {"2x4 fragments, float16_t rows", ET_VK_KERNEL(coop_ceiling_2x4_half), 8, 8},
        {"4x2 fragments, uvec4 rows (gemm_coop fp16)", ET_VK_KERNEL(coop_ceiling_4x2), 8, 8},
        {"2x2 fragments, uvec4 rows", ET_VK_KERNEL(coop_ceiling_2x2), 4, 8},
        {"4x4 fragments, 4 subgroups, uvec4 rows", ET_VK_KERNEL(coop_ceiling_4x4_s4), 16, 4},
    };
    const char* modes[] = {"products only", "+ fragment loads", "+ slice stores, barriers"};
    std::printf("%u workgroups (%u per multiprocessor), %u iterations of 4 k steps\n", groups, per_sm, iters);
    for (const Variant& v : variants)
      for (uint32_t mode = 0; mode < 3; ++mode) {
        const double s = time_kernel(vb, v.k, mode, groups, iters, 4);
        const double flop = double(groups) * iters * v.subgroups * 4 * v.frags * 2.0 * 16 * 16 * 16;
        std::printf("%-44s %-26s %8.3f ms %7.1f TFLOP/s\n", v.name, modes[mode], s * 1e3, flop / s / 1e12);
      }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "edgetrain_vk_coop_ceiling: %s\n", e.what());
    return 1;
  }
  return 0;
}
