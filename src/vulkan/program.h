// The Vulkan backend (tensors as device buffers, synchronous transfers) and its Program: finalize encodes
// every call, allocates scratch, builds descriptor sets and records ONE command buffer with a barrier
// wherever a call depends on an earlier one (program.cpp says when); replay writes the slot values into the
// host-visible scalar block, submits and waits.
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>

#include "edgetrain/backends.h"
#include "vulkan/context.h"
#include "vulkan/coop_layout.h"
#include "vulkan/kernel.h"
#include "vulkan/memory.h"
#include "vulkan/pipelines.h"
#include "vulkan/profile.h"

namespace edgetrain::vk {

class VulkanBackend : public Backend {
 public:
  explicit VulkanBackend(const BackendOptions& opts);
  ~VulkanBackend() override;
  std::string name() const override { return "vulkan"; }
  std::string device_name() const override { return ctx_->properties().deviceName; }
  bool supports(Op op) const override { return encoder_for(op) != nullptr; }
  Fp16Speed fp16_speed() const override;
  uint64_t memory_capacity() const override { return ctx_->limits().device_local_heap; }
  uint64_t binding_alignment() const override { return ctx_->limits().storage_offset_alignment; }
  uint32_t max_call_bindings() const override { return ctx_->limits().max_storage_buffers; }
  std::unique_ptr<Program> new_program() override;
  void release(uint64_t id) override;

  // For the runtime and tests.
  Context& context() { return *ctx_; }
  Memory& memory() { return *mem_; }
  Transfer& transfer() { return *xfer_; }
  Pipelines& pipelines() { return *pipes_; }
  std::mutex& mutex() { return mu_; }
  const DeviceBuffer& buffer(uint64_t id) const;
  const DeviceBuffer& dummy() const { return dummy_; }
  EncodeContext encode_context() const;
  Profiler* profiler() const { return prof_.get(); }  // nullptr unless EDGETRAIN_PROFILE is set

 protected:
  uint64_t device_binding_bytes() const override { return ctx_->limits().max_storage_range; }
  uint64_t allocate(size_t bytes) override;
  void write(uint64_t id, const void* data, size_t bytes) override;
  void read(uint64_t id, void* data, size_t bytes) override;

 private:
  std::unique_ptr<Context> ctx_;
  std::unique_ptr<Memory> mem_;
  std::unique_ptr<Transfer> xfer_;
  std::unique_ptr<Pipelines> pipes_;
  std::mutex mu_;
  std::unordered_map<uint64_t, DeviceBuffer> buffers_;
  uint64_t next_id_ = 1;
  DeviceBuffer dummy_;
  std::unique_ptr<Profiler> prof_;
  CoopAccLayout coop_layout_;  // probed at start where the device has cooperative matrices
};

// A descriptor set of the padded binding count whose binding 0 is `buffer` and the rest the backend's
// dummy, from a pool of its own that it frees: for the probe at start (coop_layout.cpp) and tools that
// dispatch one kernel outside a program (bench/vk_coop_ceiling.cpp).
class OneBufferSet {
 public:
  OneBufferSet(VulkanBackend& vb, VkBuffer buffer);
  ~OneBufferSet();
  OneBufferSet(const OneBufferSet&) = delete;
  OneBufferSet& operator=(const OneBufferSet&) = delete;
  VkDescriptorSet set() const { return set_; }
  uint32_t bindings() const { return bindings_; }

 private:
  VkDevice dev_;
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
  VkDescriptorSet set_ = VK_NULL_HANDLE;
  uint32_t bindings_;
};

class VulkanProgram : public Program {
 public:
  explicit VulkanProgram(VulkanBackend& b) : Program(b), vb_(b) {}
  ~VulkanProgram() override;

  size_t dispatch_count() const { return dispatches_; }
  size_t barrier_count() const { return barriers_; }  // between dispatches (the program's first and last aside)
  // Staging dispatches left out because the operand they stage was still in the pooled scratch.
  size_t skipped_stagings() const { return skipped_stagings_; }
  // Low-rank updates folded into the GEMM of the 4-bit product before them (fuse_low_rank_update).
  size_t fused_updates() const { return fused_updates_; }
  double device_seconds() const override { return device_seconds_; }

 protected:
  void on_finalize() override;
  void execute() override;

 private:
  VulkanBackend& vb_;
  HostBuffer scalars_;        // what the host writes before each replay
  DeviceBuffer scalars_dev_;  // the copy kernels read: copied from scalars_ at the start of every replay
  std::vector<DeviceBuffer> scratch_;
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  size_t dispatches_ = 0;
  size_t barriers_ = 0;
  size_t skipped_stagings_ = 0;
  size_t fused_updates_ = 0;
  VkQueryPool queries_ = VK_NULL_HANDLE;     // profiling only: 2 timestamps per dispatch
  VkQueryPool span_ = VK_NULL_HANDLE;        // otherwise 2: the replay's start and end (device_seconds)
  double device_seconds_ = -1;
  std::shared_ptr<ProgramProfile> profile_;  // profiling only
  std::string what_;  // "replay of [op, op, ...]" for messages
};

}  // namespace edgetrain::vk
