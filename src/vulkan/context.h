// The Vulkan device context: instance (with the validation layer and its message capture when asked),
// physical-device choice, logical device, one compute queue, and the limits encoders need.
#pragma once

#include <vulkan/vulkan.h>

#include "vulkan/coop_khr.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "edgetrain/backends.h"
#include "vulkan/kernel.h"

namespace edgetrain::vk {

// Throws Error "vulkan: <what> failed: <result name>" unless r is VK_SUCCESS.
void check(VkResult r, const char* what);
const char* result_name(VkResult r);
// Whether physical device pd offers the device extension `name`.
bool device_offers(VkPhysicalDevice pd, const char* name);

struct Limits {
  uint32_t max_groups[3] = {65535, 65535, 65535};
  uint32_t max_invocations = 128;
  uint32_t max_shared_bytes = 16384;
  uint32_t subgroup_size = 32;
  VkDeviceSize max_storage_range = 1u << 27;
  VkDeviceSize storage_offset_alignment = 256;  // minStorageBufferOffsetAlignment: where a view may start
  uint32_t max_storage_buffers = 4;  // maxPerStageDescriptorStorageBuffers: buffers one kernel may bind
  VkDeviceSize device_local_heap = 0;  // bytes of the largest device-local heap
  // VK_NV_cooperative_matrix with 16x16x16 fp16 x fp16 -> fp32 subgroup tiles, shaderFloat16 and the Vulkan
  // memory model: the tensor-core GEMM path (ops_gemm_coop.cpp). Enabled at device creation unless
  // EDGETRAIN_VK_COOPMAT=0 (Tuning::coopmat).
  bool coopmat = false;
  // Cooperative matrices 2 (coop_matrix2.h) on top of those, and the kernels of shaders/cm2/ built: the fp16
  // GEMMs (ops_gemm_coop.cpp) and attention forward (ops_llama.cpp) there. Enabled unless EDGETRAIN_VK_CM2=0
  // (Tuning::cm2); not while the validation layer is on unless EDGETRAIN_VK_CM2=all: Debian 12's layer
  // predates the extension.
  bool cm2 = false;
  // VK_KHR_cooperative_matrix's fp16 fragment shape for the same GEMMs (coop_khr.h; khr/gemm_coop_khr.comp):
  // where NVIDIA's extension is absent, enabled unless EDGETRAIN_VK_COOPMAT=0 (on a software device such as
  // lavapipe only with EDGETRAIN_VK_COOPMAT=all, for tests: there it emulates the tensor cores); and beside
  // cooperative matrices 2, which enable the extension anyway, unless EDGETRAIN_VK_COOP_KHR=0.
  KhrCoopShape coop_khr;
  // Multiprocessors (VK_NV_shader_sm_builtins' shaderSMCount; 0 where the device does not say): how many
  // workgroups of the tensor-core GEMM run at once, for its split-K choice.
  uint32_t multiprocessors = 0;
  // EDGETRAIN_VK_PIPELINE_STATS=FILE and VK_KHR_pipeline_executable_properties: every compute pipeline's
  // compiler statistics (registers, shared memory, ...) are appended to `pipeline_stats` as it is created.
  std::string pipeline_stats;
};

class Context {
 public:
  // Creates instance + device per opts (device index or name substring; env EDGETRAIN_VULKAN_DEVICE,
  // EDGETRAIN_VULKAN_VALIDATION=1, EDGETRAIN_VULKAN_SYNC_VALIDATION=1). Throws Error with a clear reason.
  explicit Context(const BackendOptions& opts);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  VkInstance instance() const { return instance_; }
  VkPhysicalDevice physical() const { return phys_; }
  VkDevice device() const { return device_; }
  VkQueue queue() const { return queue_; }
  uint32_t queue_family() const { return queue_family_; }
  // Valid bits of the compute queue's timestamps (0: it cannot write them).
  uint32_t timestamp_bits() const { return timestamp_bits_; }
  // Whether the queue's timestamps can time work: valid bits and a tick period.
  bool timestamps() const { return timestamp_bits_ > 0 && props_.limits.timestampPeriod > 0; }
  // A pool of `queries` timestamp queries (the caller destroys it), and the nanoseconds from one
  // timestamp to a later one (wrapping at the valid bits).
  VkQueryPool make_timestamp_pool(uint32_t queries) const;
  double timestamp_ns(uint64_t from, uint64_t to) const {
    const uint64_t mask = timestamp_bits_ >= 64 ? ~uint64_t(0) : (uint64_t(1) << timestamp_bits_) - 1;
    return static_cast<double>((to - from) & mask) * props_.limits.timestampPeriod;
  }
  const VkPhysicalDeviceProperties& properties() const { return props_; }
  const VkPhysicalDeviceMemoryProperties& memory_properties() const { return mem_props_; }
  const Limits& limits() const { return limits_; }
  const Tuning& tuning() const { return tuning_; }
  bool validation() const { return validation_; }
  // A device-level entry point (lets tests make raw calls without linking the loader themselves).
  PFN_vkVoidFunction device_proc(const char* name) const;

  // Validation messages (warning or error) collected since the last call; they are cleared.
  std::vector<std::string> take_messages();
  // Throws Error listing every collected validation message, naming `where`.
  void throw_if_messages(const char* where);
  // For the callback.
  void add_message(std::string m);

 private:
  void destroy();
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  VkPhysicalDevice phys_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  uint32_t timestamp_bits_ = 0;
  VkPhysicalDeviceProperties props_{};
  VkPhysicalDeviceMemoryProperties mem_props_{};
  Limits limits_;
  Tuning tuning_ = Tuning::from_env();
  bool validation_ = false;
  uint32_t validation_layer_version_ = 0;  // the validation layer's specVersion when it is on
  std::mutex msg_mu_;
  std::vector<std::string> messages_;
};

// Every physical device with kind, driver and limits; never throws.
std::vector<DeviceInfo> list_vulkan_devices();

}  // namespace edgetrain::vk
