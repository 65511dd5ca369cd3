// Device-local sub-allocation (first fit with coalescing free lists per 64 MiB block), host-visible
// buffers, and synchronous transfers (zero fills, staged uploads and downloads).
#include "vulkan/memory.h"

#include <algorithm>
#include <cstring>

namespace edgetrain::vk {

namespace {
constexpr VkDeviceSize kStagingChunk = VkDeviceSize(64) << 20;
constexpr VkBufferUsageFlags kUsage =
    VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;

VkDeviceSize align_up(VkDeviceSize v, VkDeviceSize a) { return (v + a - 1) / a * a; }

[[noreturn]] void out_of_memory(size_t bytes, const Context& ctx) {
  fail_kind(ErrorKind::device, "vulkan: out of device memory allocating ", bytes, " bytes (device-local heap: ",
            ctx.limits().device_local_heap, " bytes)");
}
}  // namespace

VkCommandBuffer allocate_command_buffer(VkDevice dev, VkCommandPool pool) {
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkCommandBuffer cb = VK_NULL_HANDLE;
  check(vkAllocateCommandBuffers(dev, &ai, &cb), "vkAllocateCommandBuffers");
  return cb;
}

void memory_barrier(VkCommandBuffer cb, VkPipelineStageFlags src_stage, VkAccessFlags src_access,
                    VkPipelineStageFlags dst_stage, VkAccessFlags dst_access) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = src_access;
  mb.dstAccessMask = dst_access;
  vkCmdPipelineBarrier(cb, src_stage, dst_stage, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

// ---- Memory ----

Memory::Memory(Context& ctx) : ctx_(ctx) {}

Memory::~Memory() {
  for (Block& b : blocks_)
    if (b.memory) vkFreeMemory(ctx_.device(), b.memory, nullptr);
}

uint32_t Memory::find_type(uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer) const {
  const auto& mp = ctx_.memory_properties();
  int fallback = -1;
  for (uint32_t i = 0; i < mp.memoryTypeCount; ++i) {
    if (!(bits & (1u << i)) || (mp.memoryTypes[i].propertyFlags & want) != want) continue;
    if ((mp.memoryTypes[i].propertyFlags & prefer) == prefer) return i;
    if (fallback < 0) fallback = static_cast<int>(i);
  }
  ET_CHECK_KIND(ErrorKind::unsupported, fallback >= 0, "vulkan: no memory type with flags ", want,
                " for a buffer (type bits ", bits, ")");
  return static_cast<uint32_t>(fallback);
}

// Where the cooperative-matrix-2 kernels run, every buffer has a device address: their loads convert
// elements through decode functions, which take buffer references (shaders/cm2/attention_cm2.comp).
VkBufferUsageFlags Memory::usage() const {
  return kUsage | (ctx_.limits().cm2 ? VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT : 0);
}

VkDeviceMemory Memory::allocate_memory(VkDeviceSize bytes, uint32_t type, size_t requested) {
  VkMemoryAllocateFlagsInfo fi{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
  fi.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, ctx_.limits().cm2 ? &fi : nullptr};
  ai.allocationSize = bytes;
  ai.memoryTypeIndex = type;
  VkDeviceMemory m = VK_NULL_HANDLE;
  VkResult r = vkAllocateMemory(ctx_.device(), &ai, nullptr, &m);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) out_of_memory(requested, ctx_);
  check(r, "vkAllocateMemory");
  return m;
}

DeviceBuffer Memory::create(size_t bytes) {
  DeviceBuffer b;
  b.size = align_up(std::max<VkDeviceSize>(bytes, 16), 16);
  if (b.size > ctx_.limits().device_local_heap) out_of_memory(bytes, ctx_);
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = b.size;
  bi.usage = usage();
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkResult r = vkCreateBuffer(ctx_.device(), &bi, nullptr, &b.buffer);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) out_of_memory(bytes, ctx_);
  check(r, "vkCreateBuffer");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(ctx_.device(), b.buffer, &req);
  try {
    uint32_t type = find_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
    if (req.size > kBlockBytes / 2) {
      b.dedicated = allocate_memory(req.size, type, bytes);
      check(vkBindBufferMemory(ctx_.device(), b.buffer, b.dedicated, 0), "vkBindBufferMemory");
      return b;
    }
    VkDeviceSize need = align_up(req.size, req.alignment);
    for (int pass = 0; pass < 2 && b.block < 0; ++pass) {
      if (pass == 1) {
        Block nb;
        nb.memory = allocate_memory(kBlockBytes, type, bytes);
        nb.type = type;
        nb.size = kBlockBytes;
        nb.free[0] = kBlockBytes;
        blocks_.push_back(std::move(nb));
      }
      for (size_t bi2 = 0; bi2 < blocks_.size() && b.block < 0; ++bi2) {
        Block& blk = blocks_[bi2];
        if (blk.type != type || !blk.memory) continue;
        for (auto it = blk.free.begin(); it != blk.free.end(); ++it) {
          VkDeviceSize start = align_up(it->first, req.alignment), end = it->first + it->second;
          if (start + need > end) continue;
          VkDeviceSize fo = it->first;
          blk.free.erase(it);
          if (start > fo) blk.free[fo] = start - fo;
          if (start + need < end) blk.free[start + need] = end - (start + need);
          b.block = static_cast<int>(bi2);
          b.offset = start;
          b.mem_size = need;
          break;
        }
      }
    }
    check(vkBindBufferMemory(ctx_.device(), b.buffer, blocks_[b.block].memory, b.offset), "vkBindBufferMemory");
  } catch (...) {
    DeviceBuffer tmp = b;
    destroy(tmp);
    throw;
  }
  return b;
}

void Memory::destroy(DeviceBuffer& b) {
  if (b.buffer) vkDestroyBuffer(ctx_.device(), b.buffer, nullptr);
  if (b.dedicated) vkFreeMemory(ctx_.device(), b.dedicated, nullptr);
  if (b.block >= 0) {
    Block& blk = blocks_[b.block];
    auto it = blk.free.emplace(b.offset, b.mem_size).first;
    auto next = std::next(it);
    if (next != blk.free.end() && it->first + it->second == next->first) {
      it->second += next->second;
      blk.free.erase(next);
    }
    if (it != blk.free.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        blk.free.erase(it);
      }
    }
  }
  b = DeviceBuffer{};
}

HostBuffer Memory::create_host(size_t bytes) {
  HostBuffer h;
  h.size = align_up(std::max<VkDeviceSize>(bytes, 16), 16);
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = h.size;
  bi.usage = usage();
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(vkCreateBuffer(ctx_.device(), &bi, nullptr, &h.buffer), "vkCreateBuffer (host-visible)");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(ctx_.device(), h.buffer, &req);
  try {
    uint32_t type = find_type(req.memoryTypeBits,
                              VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                              VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    h.memory = allocate_memory(req.size, type, bytes);
    check(vkBindBufferMemory(ctx_.device(), h.buffer, h.memory, 0), "vkBindBufferMemory (host-visible)");
    check(vkMapMemory(ctx_.device(), h.memory, 0, VK_WHOLE_SIZE, 0, &h.mapped), "vkMapMemory");
  } catch (...) {
    destroy_host(h);
    throw;
  }
  return h;
}

void Memory::destroy_host(HostBuffer& h) {
  if (h.buffer) vkDestroyBuffer(ctx_.device(), h.buffer, nullptr);
  if (h.memory) vkFreeMemory(ctx_.device(), h.memory, nullptr);  // unmaps implicitly
  h = HostBuffer{};
}

// ---- Transfer ----

Transfer::Transfer(Context& ctx, Memory& mem) : ctx_(ctx), mem_(mem) {
  VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = ctx.queue_family();
  check(vkCreateCommandPool(ctx.device(), &pi, nullptr, &pool_), "vkCreateCommandPool");
  cmd_ = allocate_command_buffer(ctx.device(), pool_);
  VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  check(vkCreateFence(ctx.device(), &fi, nullptr, &fence_), "vkCreateFence");
}

Transfer::~Transfer() {
  mem_.destroy_host(staging_);
  if (fence_) vkDestroyFence(ctx_.device(), fence_, nullptr);
  if (pool_) vkDestroyCommandPool(ctx_.device(), pool_, nullptr);
}

void Transfer::zero_fill_later(VkBuffer b) { pending_fills_.push_back(b); }

void Transfer::forget(VkBuffer b) {
  pending_fills_.erase(std::remove(pending_fills_.begin(), pending_fills_.end(), b), pending_fills_.end());
}

void Transfer::ensure_staging(size_t bytes) {
  VkDeviceSize want = std::min<VkDeviceSize>(std::max<VkDeviceSize>(bytes, 1 << 16), kStagingChunk);
  if (staging_.size >= want) return;
  mem_.destroy_host(staging_);
  VkDeviceSize sz = 1 << 16;
  while (sz < want) sz *= 2;
  staging_ = mem_.create_host(sz);
}

void Transfer::begin() {
  check(vkResetCommandBuffer(cmd_, 0), "vkResetCommandBuffer");
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(vkBeginCommandBuffer(cmd_, &bi), "vkBeginCommandBuffer");
  // Work of earlier submissions (kernels, copies) before anything in this one.
  memory_barrier(cmd_, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
                 VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
  if (!pending_fills_.empty()) {
    for (VkBuffer b : pending_fills_) vkCmdFillBuffer(cmd_, b, 0, VK_WHOLE_SIZE, 0);
    pending_fills_.clear();
    memory_barrier(cmd_, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
                   VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
  }
}

void Transfer::end_and_submit(const char* what) {
  memory_barrier(cmd_, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                 VK_PIPELINE_STAGE_ALL_COMMANDS_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                 VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT | VK_ACCESS_HOST_READ_BIT);
  check(vkEndCommandBuffer(cmd_), "vkEndCommandBuffer");
  wait_submit(cmd_, what);
}

void Transfer::wait_submit(VkCommandBuffer cb, const char* what) {
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cb;
  check(vkResetFences(ctx_.device(), 1, &fence_), "vkResetFences");
  check(vkQueueSubmit(ctx_.queue(), 1, &si, fence_), "vkQueueSubmit");
  check(vkWaitForFences(ctx_.device(), 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences");
  ctx_.throw_if_messages(what);
}

void Transfer::submit(VkCommandBuffer cb, const char* what) {
  if (!pending_fills_.empty()) {
    begin();
    end_and_submit("zero fill");
  }
  wait_submit(cb, what);
}

void Transfer::upload(VkBuffer dst, const void* data, size_t bytes) {
  ensure_staging(bytes);
  const auto* src = static_cast<const unsigned char*>(data);
  for (size_t done = 0; done < bytes;) {
    size_t n = std::min<size_t>(bytes - done, staging_.size);
    std::memcpy(staging_.mapped, src + done, n);
    begin();
    VkBufferCopy c{0, done, n};
    vkCmdCopyBuffer(cmd_, staging_.buffer, dst, 1, &c);
    end_and_submit("upload");
    done += n;
  }
}

void Transfer::download(VkBuffer src, void* data, size_t bytes) {
  ensure_staging(bytes);
  auto* dst = static_cast<unsigned char*>(data);
  for (size_t done = 0; done < bytes;) {
    size_t n = std::min<size_t>(bytes - done, staging_.size);
    begin();
    VkBufferCopy c{done, 0, n};
    vkCmdCopyBuffer(cmd_, src, staging_.buffer, 1, &c);
    end_and_submit("download");
    std::memcpy(dst + done, staging_.mapped, n);
    done += n;
  }
}

}  // namespace edgetrain::vk
