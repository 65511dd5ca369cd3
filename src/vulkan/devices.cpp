// Which Vulkan devices there are and what each offers: ranking, queue family, limits, the tensor-core
// extensions' support, the one-line description `edgetrain info` prints, and the device list.
#include "vulkan/devices.h"

#include "vulkan/coop_matrix2.h"

#include <algorithm>
#include <cstring>

namespace edgetrain::vk {

const char* kind_of(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "software";
    default: return "other";
  }
}

int rank_of(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
  }
}

std::string version_str(uint32_t v) {
  return cat(VK_API_VERSION_MAJOR(v), ".", VK_API_VERSION_MINOR(v), ".", VK_API_VERSION_PATCH(v));
}

std::vector<VkQueueFamilyProperties> queue_families(VkPhysicalDevice pd) {
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, nullptr);
  std::vector<VkQueueFamilyProperties> fams(n);
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, fams.data());
  return fams;
}

int compute_family(VkPhysicalDevice pd) {
  const std::vector<VkQueueFamilyProperties> fams = queue_families(pd);
  for (size_t i = 0; i < fams.size(); ++i)
    if (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT) return static_cast<int>(i);
  return -1;
}

Limits read_limits(VkPhysicalDevice pd) {
  Limits l;
  VkPhysicalDeviceSubgroupProperties sub{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &sub};
  vkGetPhysicalDeviceProperties2(pd, &p2);
  const VkPhysicalDeviceLimits& lim = p2.properties.limits;
  for (int i = 0; i < 3; ++i) l.max_groups[i] = lim.maxComputeWorkGroupCount[i];
  l.max_invocations = lim.maxComputeWorkGroupInvocations;
  l.max_shared_bytes = lim.maxComputeSharedMemorySize;
  l.subgroup_size = sub.subgroupSize ? sub.subgroupSize : 1;
  l.max_storage_range = lim.maxStorageBufferRange;
  l.storage_offset_alignment = lim.minStorageBufferOffsetAlignment;
  l.max_storage_buffers = lim.maxPerStageDescriptorStorageBuffers;
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(pd, &mp);
  for (uint32_t i = 0; i < mp.memoryHeapCount; ++i)
    if (mp.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      l.device_local_heap = std::max(l.device_local_heap, mp.memoryHeaps[i].size);
  return l;
}

bool coopmat_supported(VkInstance inst, VkPhysicalDevice pd) {
  if (!device_offers(pd, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME)) return false;
  VkPhysicalDeviceCooperativeMatrixFeaturesNV cm{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  VkPhysicalDeviceVulkan12Features v12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, &cm};
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &v12};
  vkGetPhysicalDeviceFeatures2(pd, &f2);
  if (!cm.cooperativeMatrix || !v12.shaderFloat16 || !v12.vulkanMemoryModel) return false;
  auto props_fn = reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV>(
      vkGetInstanceProcAddr(inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV"));
  if (!props_fn) return false;
  uint32_t count = 0;
  if (props_fn(pd, &count, nullptr) != VK_SUCCESS || count == 0) return false;
  std::vector<VkCooperativeMatrixPropertiesNV> props(count, {VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV});
  if (props_fn(pd, &count, props.data()) != VK_SUCCESS) return false;
  for (const auto& p : props)
    if (p.MSize == 16 && p.NSize == 16 && p.KSize == 16 && p.AType == VK_COMPONENT_TYPE_FLOAT16_NV &&
        p.BType == VK_COMPONENT_TYPE_FLOAT16_NV && p.CType == VK_COMPONENT_TYPE_FLOAT32_NV &&
        p.DType == VK_COMPONENT_TYPE_FLOAT32_NV && p.scope == VK_SCOPE_SUBGROUP_NV)
      return true;
  return false;
}

std::string details_of(VkInstance inst, VkPhysicalDevice pd) {
  VkPhysicalDeviceProperties p;
  vkGetPhysicalDeviceProperties(pd, &p);
  std::string drv;
  if (p.apiVersion >= VK_API_VERSION_1_2) {
    VkPhysicalDeviceDriverProperties d{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &d};
    vkGetPhysicalDeviceProperties2(pd, &p2);
    drv = cat(d.driverName, " ", d.driverInfo);
  }
  Limits l = read_limits(pd);
  // Which tensor-core GEMMs: with cooperative matrices 2, VK_KHR_cooperative_matrix's shape for those cm2 does
  // not take; else NVIDIA's extension; else KHR's shape (its kernel built with glslang 15) or why the
  // device's cannot serve.
  const bool cm2 = cm2_built() && cm2_supported(inst, pd);
  std::string coop;
  if (coopmat_supported(inst, pd)) {
    const KhrCoopShape khr = cm2 ? khr_coop_shape(inst, pd) : KhrCoopShape{};
    coop = !khr ? ", fp16 cooperative matrices (tensor-core GEMMs; fp16 attention)"
                : cat(", fp16 cooperative matrices (fp16 attention; tensor-core GEMMs through KHR's ", khr.m, "x",
                      khr.n, "x", khr.k, ")");
  } else if (cm2_built() && device_offers(pd, kKhrCoopExtension)) {
    std::string why;
    const KhrCoopShape khr = khr_coop_shape(inst, pd, &why);
    coop = !khr ? cat(", VK_KHR_cooperative_matrix unused: ", why)
                : cat(", KHR fp16 cooperative matrices ", khr.m, "x", khr.n, "x", khr.k, " (tensor-core GEMMs",
                      p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? "; emulated: only with EDGETRAIN_VK_COOPMAT=all)" : ")");
  }
  return cat("Vulkan ", version_str(p.apiVersion), ", driver ", drv.empty() ? version_str(p.driverVersion) : drv,
             ", subgroup ", l.subgroup_size, ", shared memory ", l.max_shared_bytes, " B, max workgroup ",
             l.max_invocations, ", storage range ", l.max_storage_range, " B, device memory ",
             l.device_local_heap >> 20, " MiB", coop, cm2 ? ", cooperative matrices 2 (fp16 GEMMs and attention forward)" : "");
}

uint32_t instance_version() {
  uint32_t v = VK_API_VERSION_1_0;
  auto fn = reinterpret_cast<PFN_vkEnumerateInstanceVersion>(vkGetInstanceProcAddr(nullptr, "vkEnumerateInstanceVersion"));
  if (fn) fn(&v);
  return v;
}

std::vector<VkPhysicalDevice> physical_devices(VkInstance inst) {
  uint32_t n = 0;
  check(vkEnumeratePhysicalDevices(inst, &n, nullptr), "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> ds(n);
  check(vkEnumeratePhysicalDevices(inst, &n, ds.data()), "vkEnumeratePhysicalDevices");
  ds.resize(n);
  return ds;
}

std::vector<DeviceInfo> list_vulkan_devices() {
  std::vector<DeviceInfo> out;
  try {
    uint32_t iv = instance_version();
    if (iv < VK_API_VERSION_1_2) {
      out.push_back({"vulkan", "-", "other", "Vulkan loader " + version_str(iv) + " is older than 1.2", false});
      return out;
    }
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.apiVersion = VK_API_VERSION_1_2;
    VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ici.pApplicationInfo = &app;
    VkInstance inst = VK_NULL_HANDLE;
    VkResult r = vkCreateInstance(&ici, nullptr, &inst);
    if (r != VK_SUCCESS) {
      out.push_back({"vulkan", "-", "other", cat("no Vulkan: vkCreateInstance failed: ", result_name(r)), false});
      return out;
    }
    std::vector<VkPhysicalDevice> devs;
    try {
      devs = physical_devices(inst);
    } catch (const Error& e) {
      out.push_back({"vulkan", "-", "other", e.what(), false});
    }
    if (devs.empty() && out.empty()) out.push_back({"vulkan", "-", "other", "no Vulkan: no physical device", false});
    for (size_t i = 0; i < devs.size(); ++i) {
      VkPhysicalDeviceProperties p;
      vkGetPhysicalDeviceProperties(devs[i], &p);
      DeviceInfo d{"vulkan", p.deviceName, kind_of(p.deviceType), cat("#", i, ": ", details_of(inst, devs[i])), true};
      if (p.apiVersion < VK_API_VERSION_1_2) d.usable = false, d.details += " (unusable: needs Vulkan 1.2)";
      if (compute_family(devs[i]) < 0) d.usable = false, d.details += " (unusable: no compute queue)";
      out.push_back(d);
    }
    vkDestroyInstance(inst, nullptr);
  } catch (...) {
    out.push_back({"vulkan", "-", "other", "no Vulkan: device enumeration failed", false});
  }
  return out;
}

bool device_offers(VkPhysicalDevice pd, const char* name) {
  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> avail(n);
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, avail.data());
  for (const auto& e : avail)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

}  // namespace edgetrain::vk
