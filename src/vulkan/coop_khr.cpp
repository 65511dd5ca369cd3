#include "vulkan/coop_khr.h"

#include <cstdlib>
#include <vector>

#include "edgetrain/error.h"
#include "vulkan/context.h"  // device_offers

namespace edgetrain::vk {
namespace {
struct KhrCoopPropertiesEntry {  // VkCooperativeMatrixPropertiesKHR
  VkStructureType sType = static_cast<VkStructureType>(1000506001);
  void* pNext = nullptr;
  uint32_t m = 0, n = 0, k = 0;
  int32_t a_type = 0, b_type = 0, c_type = 0, result_type = 0;  // VkComponentTypeKHR: 0 fp16, 1 fp32
  VkBool32 saturating = VK_FALSE;
  int32_t scope = 0;  // VkScopeKHR: 3 subgroup
};
struct KhrCoopStages {  // VkPhysicalDeviceCooperativeMatrixPropertiesKHR
  VkStructureType sType = static_cast<VkStructureType>(1000506002);
  void* pNext = nullptr;
  VkShaderStageFlags stages = 0;
};
using PropertiesFn = VkResult(VKAPI_PTR*)(VkPhysicalDevice, uint32_t*, KhrCoopPropertiesEntry*);

// Shared memory of gemm_coop_body.glsl: four staged parts (F16: two, and one-row stand-ins for the lo
// parts) of 128 rows, bk + 8 halves each, and the 2048-float epilogue stage.
uint32_t shared_bytes(bool f16, uint32_t bk) {
  const uint32_t rows = f16 ? 2 * 128 + 2 : 4 * 128;
  return rows * (bk + 8) * 2 + 2048 * 4;
}

}  // namespace

KhrCoopTile khr_coop_tile(const KhrCoopShape& s, bool f16, uint32_t max_shared) {
  KhrCoopTile best;
  if (!s || s.subgroup == 0 || 256 % s.subgroup != 0 || (s.m * s.n) % s.subgroup != 0) return best;
  const uint32_t groups = 256 / s.subgroup;
  // The subgroups' grid: fp16 operands favour blocks twice as tall as wide (gemm_coop.comp's 64 x 32 on an
  // H200), the fp32 parts the transpose (their lo fragments double the A side).
  int best_gap = 1 << 30;
  for (uint32_t cols = 1; cols <= groups; ++cols) {
    if (groups % cols != 0) continue;
    const uint32_t rows = groups / cols;
    if (128 % (rows * s.m) != 0 || 128 % (cols * s.n) != 0) continue;
    const uint32_t fm = 128 / (rows * s.m), fn = 128 / (cols * s.n);
    if (fm > 4 || fn > 4 || fm * fn < 8) continue;
    const int tall = static_cast<int>(fm * s.m), wide = static_cast<int>(fn * s.n);
    const int gap = f16 ? std::abs(tall - 2 * wide) : std::abs(wide - 2 * tall);
    if (gap < best_gap) best_gap = gap, best = KhrCoopTile{true, cols, fm, fn, 0};
  }
  if (!best.ok) return best;
  uint32_t bk = f16 ? 64 : 32;
  while (bk > 16 && shared_bytes(f16, bk) > max_shared) bk /= 2;
  if (shared_bytes(f16, bk) > max_shared || bk % s.k != 0) return KhrCoopTile{};
  best.bk = bk;
  return best;
}

KhrCoopShape khr_coop_shape(VkInstance inst, VkPhysicalDevice pd, std::string* why) {
  auto none = [why](std::string reason) {
    if (why) *why = std::move(reason);
    return KhrCoopShape{};
  };
  if (!device_offers(pd, kKhrCoopExtension)) return none("no VK_KHR_cooperative_matrix");
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(pd, &props);
  KhrCoopMatrixFeatures cm;
  VkPhysicalDeviceVulkan12Features v12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, &cm};
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &v12};
  vkGetPhysicalDeviceFeatures2(pd, &f2);
  if (!cm.cooperative_matrix || !v12.shaderFloat16 || !v12.vulkanMemoryModel)
    return none("VK_KHR_cooperative_matrix without its feature, shaderFloat16 or the Vulkan memory model");
  // The subgroup size compute shaders run at, which must not vary (Vulkan 1.3's subgroup size control
  // says; without it, unknown).
  if (props.apiVersion < VK_API_VERSION_1_3) return none("subgroup size range unknown (Vulkan < 1.3)");
  KhrCoopStages stages;
  VkPhysicalDeviceSubgroupSizeControlProperties size{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES,
                                                     &stages};
  VkPhysicalDeviceSubgroupProperties sub{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES, &size};
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &sub};
  vkGetPhysicalDeviceProperties2(pd, &p2);
  if (!(stages.stages & VK_SHADER_STAGE_COMPUTE_BIT)) return none("cooperative matrices not in compute shaders");
  if (size.minSubgroupSize != size.maxSubgroupSize || sub.subgroupSize != size.minSubgroupSize)
    return none(cat("subgroup size varies (", size.minSubgroupSize, "..", size.maxSubgroupSize,
                    "); the kernel needs it fixed"));
  auto list = reinterpret_cast<PropertiesFn>(
      vkGetInstanceProcAddr(inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"));
  uint32_t count = 0;
  if (!list || list(pd, &count, nullptr) != VK_SUCCESS || count == 0)
    return none("the device lists no cooperative matrix shapes");
  std::vector<KhrCoopPropertiesEntry> shapes(count);
  if (list(pd, &count, shapes.data()) != VK_SUCCESS) return none("listing the shapes failed");
  KhrCoopShape best;
  for (const auto& p : shapes) {
    if (p.scope != 3 || p.a_type != 0 || p.b_type != 0 || p.c_type != 1 || p.result_type != 1 || p.saturating) continue;
    const KhrCoopShape s{p.m, p.n, p.k, sub.subgroupSize};
    const uint32_t shared = props.limits.maxComputeSharedMemorySize;
    if (!khr_coop_tile(s, true, shared).ok || !khr_coop_tile(s, false, shared).ok) continue;
    if (!best || s.m * s.n * s.k > best.m * best.n * best.k) best = s;
  }
  if (!best) return none("no fp16 x fp16 -> fp32 subgroup shape tiles the kernel's 128 x 128 tile");
  return best;
}

}  // namespace edgetrain::vk
