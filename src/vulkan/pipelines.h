// Compute pipelines for the Vulkan backend: shader modules per kernel, descriptor-set and pipeline layouts
// per binding count (all storage buffers, 128 bytes of push constants), and pipelines cached by
// (kernel, specialization constants, binding count) so eager runs and re-records compile nothing twice.
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "vulkan/context.h"
#include "vulkan/kernel.h"

namespace edgetrain::vk {

// Every descriptor set has at least this many bindings; those past a call's own are bound to a dummy
// buffer. Lets one shader serve calls whose binding lists differ (e.g. gemm for mm and for linear+bias).
constexpr uint32_t kMinBindings = 8;
constexpr uint32_t kPushBytes = 128;

class Pipelines {
 public:
  explicit Pipelines(Context& ctx);
  ~Pipelines();
  Pipelines(const Pipelines&) = delete;
  Pipelines& operator=(const Pipelines&) = delete;

  static uint32_t padded_bindings(uint32_t n) { return n < kMinBindings ? kMinBindings : n; }
  VkDescriptorSetLayout set_layout(uint32_t bindings);  // bindings already padded
  VkPipelineLayout layout(uint32_t bindings);
  VkPipeline get(const Kernel& k, const std::vector<uint32_t>& spec, uint32_t bindings);
  // Per binding of set 0, whether kernel k declares a buffer there that it may write (no `readonly` on some
  // declaration of it): what the synchronization validation assumes a dispatch writes, and what the
  // programs' barriers follow (program.cpp). Read from the SPIR-V once per kernel.
  const std::vector<bool>& writable_bindings(const Kernel& k);
  size_t size() const { return pipelines_.size(); }

 private:
  struct Layout {
    VkDescriptorSetLayout set = VK_NULL_HANDLE;
    VkPipelineLayout pipeline = VK_NULL_HANDLE;
  };
  Layout& layout_for(uint32_t bindings);
  VkShaderModule module(const Kernel& k);
  void write_stats(const Kernel& k, const std::vector<uint32_t>& spec, VkPipeline p);  // Limits::pipeline_stats

  Context& ctx_;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  bool fail_pipelines_ = false;  // test-only fault injection (EDGETRAIN_VK_FAULT=pipeline), see the constructor
  std::map<uint32_t, Layout> layouts_;
  std::map<const uint32_t*, VkShaderModule> modules_;
  std::map<const uint32_t*, std::vector<bool>> writable_;
  std::map<std::tuple<const uint32_t*, std::vector<uint32_t>, uint32_t>, VkPipeline> pipelines_;
};

}  // namespace edgetrain::vk
