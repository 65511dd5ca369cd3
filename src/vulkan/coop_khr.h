// VK_KHR_cooperative_matrix: the tensor-core GEMM where NVIDIA's extension is absent (Mesa 26's lavapipe,
// with which the tests run it) and, on NVIDIA GPUs with cooperative matrices 2, for the products cm2 does not
// take (there it runs faster than through NVIDIA's extension), through khr/gemm_coop_khr.comp,
// the same kernel as gemm_coop.comp with the fragment shape the device lists. The kernel needs the subgroup
// size fixed: AMD and Intel GPUs, whose compute subgroup size varies (32..64, 8..32), are refused with that
// reason until pipelines request a size (VK_EXT_subgroup_size_control; not done: no such device to test). This file reads that list and sizes
// the kernel's tile from it; Debian 12's Vulkan headers (1.3.239) predate the extension, so its structures
// are declared here as the specification defines them.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <string>

namespace edgetrain::vk {

struct KhrCoopMatrixFeatures {  // VkPhysicalDeviceCooperativeMatrixFeaturesKHR
  VkStructureType sType = static_cast<VkStructureType>(1000506000);
  void* pNext = nullptr;
  VkBool32 cooperative_matrix = VK_FALSE, robust_buffer_access = VK_FALSE;
};

// One fp16 x fp16 -> fp32 subgroup fragment shape, m x k by k x n (0: none), with the subgroup size the
// device runs compute shaders at (the kernel needs it fixed: minSubgroupSize == maxSubgroupSize).
struct KhrCoopShape {
  uint32_t m = 0, n = 0, k = 0, subgroup = 0;
  explicit operator bool() const { return m != 0; }
};

// The shape gemm_coop_khr.comp can use on pd (the largest listed that tiles its 128 x 128 tile across 256
// invocations; see khr_coop_tile), or none with the reason in *why. Needs the extension, its feature, the
// compute stage, shaderFloat16 and the Vulkan memory model.
KhrCoopShape khr_coop_shape(VkInstance inst, VkPhysicalDevice pd, std::string* why = nullptr);

// gemm_coop_khr.comp's specialization for a shape: the subgroups across the tile's columns (sg_cols; the
// rest go down its rows), fragments per subgroup fm x fn (at most 4 x 4, at least 8 in all so that one
// fragment per subgroup fits the epilogue's 2048-float stage), and the k step bk (64 with fp16 operands,
// 32 with the fp32 parts, halved while the staged slices would not fit max_shared bytes; a multiple of 16
// and of k). ok false: the shape does not tile.
struct KhrCoopTile {
  bool ok = false;
  uint32_t sg_cols = 0, fm = 0, fn = 0, bk = 0;
};
KhrCoopTile khr_coop_tile(const KhrCoopShape& s, bool f16, uint32_t max_shared);

// The extension and the features that enable it at device creation (with shaderFloat16 and
// vulkanMemoryModel of the caller's Vulkan 1.2 features).
inline constexpr const char* kKhrCoopExtension = "VK_KHR_cooperative_matrix";

}  // namespace edgetrain::vk
