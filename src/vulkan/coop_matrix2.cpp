#include "vulkan/coop_matrix2.h"

#include <vector>

#include "vulkan/context.h"

namespace edgetrain::vk {
namespace {
struct Cm2PropertiesNV {  // VkPhysicalDeviceCooperativeMatrix2PropertiesNV
  VkStructureType sType = static_cast<VkStructureType>(1000593002);
  void* pNext = nullptr;
  uint32_t workgroup_scope_max_invocations = 0, flexible_dimensions_max = 0, workgroup_scope_reserved_shared = 0;
};
struct FlexibleDimensionsNV {  // VkCooperativeMatrixFlexibleDimensionsPropertiesNV
  VkStructureType sType = static_cast<VkStructureType>(1000593001);
  void* pNext = nullptr;
  uint32_t m_granularity = 0, n_granularity = 0, k_granularity = 0;
  int32_t a_type = 0, b_type = 0, c_type = 0, result_type = 0;  // VkComponentTypeKHR: 0 fp16, 1 fp32
  VkBool32 saturating = VK_FALSE;
  int32_t scope = 0;  // VkScopeKHR: 2 workgroup
  uint32_t workgroup_invocations = 0;
};
using FlexibleDimensionsFn = VkResult(VKAPI_PTR*)(VkPhysicalDevice, uint32_t*, FlexibleDimensionsNV*);
}  // namespace

bool cm2_supported(VkInstance inst, VkPhysicalDevice pd) {
  VkPhysicalDeviceProperties p;
  vkGetPhysicalDeviceProperties(pd, &p);
  if (p.apiVersion < VK_API_VERSION_1_3) return false;
  for (const char* ext : kCm2Extensions)
    if (!device_offers(pd, ext)) return false;
  Cm2FeaturesNV cm2;
  KhrCoopMatrixFeatures khr;
  khr.pNext = &cm2;
  VkPhysicalDeviceVulkan12Features v12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, &khr};
  VkPhysicalDeviceVulkan11Features v11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, &v12};
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &v11};
  vkGetPhysicalDeviceFeatures2(pd, &f2);
  if (!khr.cooperative_matrix || !cm2.workgroup_scope || !cm2.flexible_dimensions || !cm2.tensor_addressing || !cm2.reductions ||
      !cm2.conversions || !cm2.per_element_operations || !v11.storageBuffer16BitAccess || !v12.shaderFloat16 ||
      !v12.vulkanMemoryModel || !v12.bufferDeviceAddress)
    return false;
  Cm2PropertiesNV props;
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &props};
  vkGetPhysicalDeviceProperties2(pd, &p2);
  if (props.workgroup_scope_max_invocations < 128) return false;
  // Workgroup-scope fp16 x fp16 -> fp32 matrices for 128 invocations whose granularities divide the
  // kernels' sizes (64 rows; 16-column multiples).
  auto flex = reinterpret_cast<FlexibleDimensionsFn>(
      vkGetInstanceProcAddr(inst, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV"));
  if (!flex) return false;
  uint32_t count = 0;
  if (flex(pd, &count, nullptr) != VK_SUCCESS || count == 0) return false;
  std::vector<FlexibleDimensionsNV> dims(count);
  if (flex(pd, &count, dims.data()) != VK_SUCCESS) return false;
  for (const auto& d : dims)
    if (d.scope == 2 && d.workgroup_invocations == 128 && d.a_type == 0 && d.b_type == 0 && d.c_type == 1 &&
        d.result_type == 1 && d.m_granularity && 64 % d.m_granularity == 0 && d.n_granularity &&
        16 % d.n_granularity == 0 && d.k_granularity && 16 % d.k_granularity == 0)
      return true;
  return false;
}

void* Cm2Enable::chain(void* next) {
  khr.cooperative_matrix = VK_TRUE;
  cm2.workgroup_scope = cm2.flexible_dimensions = cm2.tensor_addressing = cm2.reductions = cm2.conversions = cm2.per_element_operations = VK_TRUE;
  v11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  v11.storageBuffer16BitAccess = VK_TRUE;
  khr.pNext = &cm2;
  cm2.pNext = &v11;
  v11.pNext = next;
  return &khr;
}

}  // namespace edgetrain::vk
