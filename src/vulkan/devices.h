// What the Vulkan devices offer, read before and while a Context chooses one (devices.cpp); the public
// device_offers and list_vulkan_devices are declared in context.h.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <string>
#include <vector>

#include "vulkan/context.h"

namespace edgetrain::vk {

const char* kind_of(VkPhysicalDeviceType t);  // "discrete", "integrated", "software", "other"
// Lower is better: discrete > integrated > virtual > cpu (software) > other.
int rank_of(VkPhysicalDeviceType t);
std::string version_str(uint32_t v);  // "1.3.239"
std::vector<VkQueueFamilyProperties> queue_families(VkPhysicalDevice pd);
int compute_family(VkPhysicalDevice pd);  // the first queue family with compute; -1 where none
Limits read_limits(VkPhysicalDevice pd);  // the limits encoders need; the extensions' fields stay unset
// Whether pd offers what gemm_coop.comp needs (see Limits::coopmat). The instance supplies the NV query.
bool coopmat_supported(VkInstance inst, VkPhysicalDevice pd);
// The line `edgetrain info` prints for pd: version, driver, limits, which tensor-core GEMMs it takes.
std::string details_of(VkInstance inst, VkPhysicalDevice pd);
uint32_t instance_version();  // the loader's Vulkan version
std::vector<VkPhysicalDevice> physical_devices(VkInstance inst);

}  // namespace edgetrain::vk
