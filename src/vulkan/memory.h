// Device memory for the Vulkan backend: every tensor is its own VkBuffer (bound at offset 0 in
// descriptors), placed in device-local memory sub-allocated from 64 MiB blocks (big tensors get their own
// allocation); host-visible mapped buffers for scalar blocks and staging; and the transfer queue work
// (zero fills, uploads, downloads) submitted synchronously through one reusable command buffer.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "vulkan/context.h"

namespace edgetrain::vk {

struct DeviceBuffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize size = 0;      // bytes of the VkBuffer (>= requested, multiple of 16)
  int block = -1;             // sub-allocation block, or -1 for a dedicated allocation
  VkDeviceSize offset = 0;    // in the block
  VkDeviceSize mem_size = 0;  // bytes taken from the block
  VkDeviceMemory dedicated = VK_NULL_HANDLE;
};

struct HostBuffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void* mapped = nullptr;
  VkDeviceSize size = 0;
};

class Memory {
 public:
  static constexpr VkDeviceSize kBlockBytes = VkDeviceSize(64) << 20;

  explicit Memory(Context& ctx);
  ~Memory();
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;

  // Device-local storage buffer of at least `bytes` (0 allowed); contents undefined (callers zero-fill).
  // Throws "vulkan: out of device memory allocating N bytes" when the device cannot hold it.
  DeviceBuffer create(size_t bytes);
  void destroy(DeviceBuffer& b);
  // Host-visible, coherent, persistently mapped storage/transfer buffer.
  HostBuffer create_host(size_t bytes);
  void destroy_host(HostBuffer& b);

  size_t live_blocks() const { return blocks_.size(); }

 private:
  VkBufferUsageFlags usage() const;
  struct Block {
    VkDeviceMemory memory = VK_NULL_HANDLE;
    uint32_t type = 0;
    VkDeviceSize size = 0;
    std::map<VkDeviceSize, VkDeviceSize> free;  // offset -> bytes, coalesced
  };
  VkDeviceMemory allocate_memory(VkDeviceSize bytes, uint32_t type, size_t requested);
  uint32_t find_type(uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer) const;

  Context& ctx_;
  std::vector<Block> blocks_;
};

// Synchronous transfer work on the context's queue. Zero fills of new buffers are batched and flushed
// before the next submission of any kind.
class Transfer {
 public:
  Transfer(Context& ctx, Memory& mem);
  ~Transfer();

  void zero_fill_later(VkBuffer b);
  void forget(VkBuffer b);  // a buffer being destroyed must not be filled later
  void upload(VkBuffer dst, const void* data, size_t bytes);
  void download(VkBuffer src, void* data, size_t bytes);
  // Flushes pending fills, then submits cb and waits for it; validation messages become an Error.
  void submit(VkCommandBuffer cb, const char* what);
  VkCommandPool pool() const { return pool_; }

 private:
  void begin();                         // starts the one-shot command buffer with pending fills
  void end_and_submit(const char* what);
  void wait_submit(VkCommandBuffer cb, const char* what);
  void ensure_staging(size_t bytes);

  Context& ctx_;
  Memory& mem_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  HostBuffer staging_;
  std::vector<VkBuffer> pending_fills_;
};

// A primary command buffer from `pool` (the caller frees it or keeps it with the pool).
VkCommandBuffer allocate_command_buffer(VkDevice dev, VkCommandPool pool);

// A full memory barrier between two command-buffer stages (used between dispatches and around copies).
void memory_barrier(VkCommandBuffer cb, VkPipelineStageFlags src_stage, VkAccessFlags src_access,
                    VkPipelineStageFlags dst_stage, VkAccessFlags dst_access);

}  // namespace edgetrain::vk
