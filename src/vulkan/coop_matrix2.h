// Cooperative matrices 2 (VK_NV_cooperative_matrix2): workgroup-scope matrices that the driver lays out and
// feeds, tensor-addressed loads, row reductions and per-element operations. The kernels that use them (the
// fp16 GEMM and the fp16 attention forward) live in shaders/cm2/ (built only where scripts/setup.sh could
// fetch glslang 15; EDGETRAIN_VK_CM2). This file
// says whether a device offers them and which features enable them; Debian 12's Vulkan headers (1.3.239)
// predate the extension, so its structures are declared here as the specification defines them.
#pragma once

#include <vulkan/vulkan.h>

#include "vulkan/coop_khr.h"  // KhrCoopMatrixFeatures

namespace edgetrain::vk {

struct Cm2FeaturesNV {  // VkPhysicalDeviceCooperativeMatrix2FeaturesNV
  VkStructureType sType = static_cast<VkStructureType>(1000593000);
  void* pNext = nullptr;
  VkBool32 workgroup_scope = VK_FALSE, flexible_dimensions = VK_FALSE, reductions = VK_FALSE,
           conversions = VK_FALSE, per_element_operations = VK_FALSE, tensor_addressing = VK_FALSE,
           block_loads = VK_FALSE;
};

// Whether the kernels of shaders/cm2/ are in this build.
constexpr bool cm2_built() { return EDGETRAIN_VK_CM2 != 0; }

// Whether pd offers what those kernels need: VK_NV_cooperative_matrix2 with workgroup scope (fp16 x fp16
// -> fp32 matrices of 64 x 16k for 128 invocations), flexible dimensions, tensor addressing, reductions,
// conversions and per-element operations;
// VK_KHR_cooperative_matrix; Vulkan 1.3 (their SPIR-V is 1.6); 16-bit storage, fp16 arithmetic and the
// Vulkan memory model; buffer device addresses (memory.cpp).
bool cm2_supported(VkInstance inst, VkPhysicalDevice pd);

// The extensions and feature structures that enable them at device creation.
inline constexpr const char* kCm2Extensions[] = {"VK_KHR_cooperative_matrix", "VK_NV_cooperative_matrix2"};
struct Cm2Enable {
  KhrCoopMatrixFeatures khr;
  Cm2FeaturesNV cm2;
  VkPhysicalDeviceVulkan11Features v11{};  // chain() sets its sType
  // Turns the features on and chains them before `next`; returns the head of the chain. The caller's
  // Vulkan 1.2 features must add shaderFloat16, vulkanMemoryModel and bufferDeviceAddress.
  void* chain(void* next);
};

}  // namespace edgetrain::vk
