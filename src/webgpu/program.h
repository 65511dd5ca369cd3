// The WebGPU backend: device buffers, uploads and downloads, a pipeline cache, and programs that turn a
// recorded op list into cached pipelines + bind groups at finalize and re-encode them on every replay.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "edgetrain/backends.h"
#include "webgpu/context.h"
#include "webgpu/kernel.h"

namespace edgetrain {
// Registry entry points (also declared in src/backends.cpp).
std::vector<DeviceInfo> webgpu_devices();
std::unique_ptr<Backend> make_webgpu_backend(const BackendOptions& opts);
}  // namespace edgetrain

namespace edgetrain::wg {

struct Pipeline {
  wgpu::ComputePipeline pipeline = nullptr;
  wgpu::BindGroupLayout layout = nullptr;
};

class WebGpuBackend : public Backend {
 public:
  explicit WebGpuBackend(const BackendOptions& opts);
  ~WebGpuBackend() override;
  std::string name() const override { return "webgpu"; }
  std::string device_name() const override { return ctx_->info.name; }
  bool supports(Op op) const override { return encoder_for(op) != nullptr; }
  Fp16Speed fp16_speed() const override;
  // WebGPU does not say how much memory the device has: memory_capacity() stays unknown.
  uint64_t binding_alignment() const override { return ctx_->limits.minStorageBufferOffsetAlignment; }
  std::unique_ptr<Program> new_program() override;
  void release(uint64_t id) override;

  wgpu::Context& ctx() { return *ctx_; }
  const wgpu::Dawn& d() const { return ctx_->d; }
  wgpu::Buffer buffer(uint64_t id) const;
  uint64_t buffer_size(uint64_t id) const;
  wgpu::Buffer dummy() const { return dummy_; }
  // A raw buffer with the given usage (size rounded up to 4, at least 16); zero-filled by WebGPU.
  wgpu::Buffer create_buffer(uint64_t bytes, wgpu::Flags usage, const char* label);
  // The pipeline for a dispatch (cached by kernel, override constants and binding types).
  const Pipeline& pipeline(const Dispatch& d);
  EncodeContext encode_context() const;
  // Submits a command buffer and waits until the queue has finished it; raises Dawn's errors.
  void submit_and_wait(wgpu::CommandBuffer cb, const char* what);
  std::mutex& mutex() { return mu_; }
  // Compiles WGSL into a module and drops it (tests: a compile error must name the shader and the line).
  void compile_check(const std::string& name, const std::string& wgsl);
  std::string coop_prelude() const;

 protected:
  uint64_t device_binding_bytes() const override { return ctx_->limits.maxStorageBufferBindingSize; }
  uint64_t allocate(size_t bytes) override;
  void write(uint64_t id, const void* data, size_t bytes) override;
  void read(uint64_t id, void* data, size_t bytes) override;

 private:
  struct Buf {
    wgpu::Buffer buffer;
    uint64_t size;
  };
  std::unique_ptr<wgpu::Context> ctx_;
  std::mutex mu_;
  std::unordered_map<uint64_t, Buf> buffers_;
  uint64_t next_id_ = 1;
  wgpu::Buffer dummy_ = nullptr;
  // Downloads of at most kSmallDownload bytes (a loss, a gradient norm: every step) map this one buffer
  // instead of a new one each: creating and destroying a mappable buffer is most of such a round trip.
  static constexpr uint64_t kSmallDownload = 64 << 10;
  wgpu::Buffer small_download_ = nullptr;
  std::map<std::string, wgpu::ShaderModule> modules_;
  std::map<std::string, Pipeline> pipelines_;
  Tuning tuning_ = Tuning::from_env();
};

}  // namespace edgetrain::wg
