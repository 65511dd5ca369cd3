// VulkanBackend: the device context, memory, transfers and pipelines of one Vulkan device (allocation,
// transfers, release, what fp16 buys there), and the registry entry points of backends.cpp. Programs:
// program.cpp.
#include <cstdio>

#include "vulkan/ops_gemm.h"
#include "vulkan/program.h"

namespace edgetrain::vk {

VulkanBackend::VulkanBackend(const BackendOptions& opts) {
  ctx_ = std::make_unique<Context>(opts);
  mem_ = std::make_unique<Memory>(*ctx_);
  xfer_ = std::make_unique<Transfer>(*ctx_, *mem_);
  pipes_ = std::make_unique<Pipelines>(*ctx_);
  dummy_ = mem_->create(16);
  xfer_->zero_fill_later(dummy_.buffer);
  prof_ = Profiler::from_env(*ctx_);
  if (ctx_->limits().coopmat) {
    coop_layout_ = probe_coop_acc_layout(*this);
    if (!coop_layout_.known)
      std::fprintf(stderr, "edgetrain vulkan: fp16 attention runs without the tensor cores: %s\n", coop_layout_.what.c_str());
  }
}

VulkanBackend::~VulkanBackend() {
  if (ctx_ && ctx_->device()) vkDeviceWaitIdle(ctx_->device());
  prof_.reset();  // writes the profile report
  for (auto& [id, b] : buffers_) mem_->destroy(b);
  buffers_.clear();
  if (mem_) mem_->destroy(dummy_);
  pipes_.reset();
  xfer_.reset();
  mem_.reset();
  if (ctx_)
    for (const std::string& m : ctx_->take_messages())
      std::fprintf(stderr, "edgetrain vulkan: validation message at shutdown: %s\n", m.c_str());
  ctx_.reset();
}

const DeviceBuffer& VulkanBackend::buffer(uint64_t id) const {
  auto it = buffers_.find(id);
  ET_CHECK(it != buffers_.end(), "vulkan: unknown tensor allocation ", id);
  return it->second;
}

EncodeContext VulkanBackend::encode_context() const {
  EncodeContext e;
  const Limits& l = ctx_->limits();
  e.backend = "vulkan";
  for (int i = 0; i < 3; ++i) e.max_groups[i] = l.max_groups[i];
  e.subgroup_size = l.subgroup_size;
  e.max_shared_bytes = l.max_shared_bytes;
  e.max_invocations = l.max_invocations;
  e.coopmat = l.coopmat;
  e.cm2 = l.cm2;
  e.coop_khr = l.coop_khr;
  e.coop_acc_known = coop_layout_.known;
  e.coop_acc_rows_high = coop_layout_.rows_high;
  e.coop_acc_columns = coop_layout_.columns;
  e.multiprocessors = l.multiprocessors;
  e.max_storage_range = l.max_storage_range;
  e.tuning = ctx_->tuning();
  return e;
}

// Fast where large products take the tensor-core path (ops_gemm_coop.cpp): there an fp16 GEMM is one
// product of fp16 tiles, where the fp32 one needs three (hi*hi + hi*lo + lo*hi) and the lo parts.
Backend::Fp16Speed VulkanBackend::fp16_speed() const {
  const EncodeContext e = encode_context();
  // A software device's cooperative matrices (lavapipe's, used only when forced for tests) are emulated.
  if (ctx_->properties().deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU)
    return {false, "a software device, without tensor cores (cooperative matrices there, taken only where forced "
                   "for tests, are emulated): fp16 operands would be rounded, then multiplied in fp32"};
  if (coop_for(4096, 4096, 4096, e))
    return {true, "fp16 cooperative matrices (tensor cores): one fp16 product per GEMM where fp32 needs three"};
  const char* why = e.tuning.coopmat == gpu::Force::never ? "tensor-core GEMMs turned off (EDGETRAIN_VK_COOPMAT=0)"
                    : e.coopmat ? "the tensor-core GEMMs need subgroups of 32, 48 KiB of shared memory and 256 invocations"
                                : "no fp16 cooperative matrices (VK_NV_cooperative_matrix, or VK_KHR_cooperative_matrix "
                                  "with a shape the kernel tiles)";
  return {false, std::string(why) + ": fp16 operands would be rounded, then multiplied on the fp32 FMA units"};
}

uint64_t VulkanBackend::allocate(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  DeviceBuffer b = mem_->create(bytes);
  xfer_->zero_fill_later(b.buffer);
  uint64_t id = next_id_++;
  buffers_[id] = b;
  return id;
}

void VulkanBackend::release(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = buffers_.find(id);
  if (it == buffers_.end()) return;
  xfer_->forget(it->second.buffer);
  mem_->destroy(it->second);
  buffers_.erase(it);
}

void VulkanBackend::write(uint64_t id, const void* data, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  xfer_->upload(buffer(id).buffer, data, bytes);
}

void VulkanBackend::read(uint64_t id, void* data, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  xfer_->download(buffer(id).buffer, data, bytes);
}

std::unique_ptr<Program> VulkanBackend::new_program() { return std::make_unique<VulkanProgram>(*this); }

}  // namespace edgetrain::vk

namespace edgetrain {

std::vector<DeviceInfo> vulkan_devices() { return vk::list_vulkan_devices(); }

std::unique_ptr<Backend> make_vulkan_backend(const BackendOptions& opts) {
  return std::make_unique<vk::VulkanBackend>(opts);
}

}  // namespace edgetrain
