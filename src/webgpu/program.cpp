// The WebGPU backend and its programs (see program.h and kernel.h).
//
// Replay design: a WGPUCommandBuffer can be submitted once, and compute has no render bundles, so a
// program keeps what is expensive (pipelines, bind groups, scratch and uniform buffers, all built at
// finalize) and re-encodes the recorded dispatch list into fresh command buffers on every replay, each
// submitted as soon as it is encoded (see execute). That encoding is a few calls per dispatch (set
// pipeline, set bind group, dispatch): no shape validation, no pipeline or bind-group creation. Per-replay
// scalars are one wgpuQueueWriteBuffer into the scalar block, ordered before the first submit by the queue.
#include "webgpu/program.h"

#include <algorithm>
#include <cstring>

#include "edgetrain/backends.h"

namespace edgetrain {

namespace wg {
namespace {

uint64_t round4(uint64_t b) { return std::max<uint64_t>(16, (b + 3) / 4 * 4); }

class WebGpuProgram : public Program {
 public:
  explicit WebGpuProgram(WebGpuBackend& b) : Program(b), b_(b) {}
  ~WebGpuProgram() override {
    if (wgpu::dawn_exiting()) return;
    const wgpu::Dawn& d = b_.d();
    for (Step& s : steps_)
      if (s.group) d.BindGroupRelease(s.group);
    for (wgpu::Buffer buf : owned_) {
      d.BufferDestroy(buf);
      d.BufferRelease(buf);
    }
  }

 protected:
  void on_finalize() override;
  void execute() override;

 private:
  struct Step {
    wgpu::ComputePipeline pipeline;
    wgpu::BindGroup group;
    uint32_t groups[3];
  };
  WebGpuBackend& b_;
  std::vector<Step> steps_;
  std::vector<wgpu::Buffer> owned_;  // scalar block, uniform buffer, scratch buffers
  wgpu::Buffer scalars_ = nullptr;
  std::vector<float> constants_;     // the call constants, stored after the slots
};

void WebGpuProgram::on_finalize() {
  std::lock_guard<std::mutex> lock(b_.mutex());
  const wgpu::Dawn& d = b_.d();
  wgpu::Context& ctx = b_.ctx();
  const size_t n_slots = slot_values().size();
  EncodeContext ectx = b_.encode_context();

  struct Pending {
    size_t call;
    Dispatch dispatch;
    size_t scratch_base;
  };
  std::vector<Pending> pending;
  std::vector<size_t> scratch_sizes;
  size_t pooled_bytes = 0;
  for (size_t ci = 0; ci < calls().size(); ++ci) {
    const OpCall& c = calls()[ci];
    Encoder enc = encoder_for(c.op);
    ET_CHECK_KIND(ErrorKind::unsupported, enc, "webgpu: op ", op_name(c.op),
                  " has no WebGPU kernel (supports() is false)");
    ectx.float_index.clear();
    for (const Scalar& s : c.floats) {
      if (s.is_slot()) {
        ectx.float_index.push_back(static_cast<uint32_t>(s.slot));
      } else {
        ectx.float_index.push_back(static_cast<uint32_t>(n_slots + constants_.size()));
        constants_.push_back(s.value);
      }
    }
    Encoded e;
    enc(c, ectx, e);
    size_t base = scratch_sizes.size();
    for (size_t s : e.scratch_bytes) scratch_sizes.push_back(s);
    pooled_bytes = std::max(pooled_bytes, e.pooled_scratch_bytes);
    for (Dispatch& dsp : e.dispatches) pending.push_back({ci, std::move(dsp), base});
  }

  scalars_ = b_.create_buffer((n_slots + constants_.size()) * 4, wgpu::kUsageStorage | wgpu::kUsageCopyDst,
                              "scalar block");
  owned_.push_back(scalars_);
  std::vector<wgpu::Buffer> scratch;
  for (size_t s : scratch_sizes) {
    scratch.push_back(b_.create_buffer(s, wgpu::kUsageStorage | wgpu::kUsageCopySrc | wgpu::kUsageCopyDst,
                                       "scratch"));
    owned_.push_back(scratch.back());
  }
  wgpu::Buffer pooled = nullptr;
  if (pooled_bytes > 0) {
    pooled = b_.create_buffer(pooled_bytes, wgpu::kUsageStorage, "pooled scratch");
    owned_.push_back(pooled);
  }
  // One uniform buffer holds every dispatch's parameters, each at an aligned offset.
  const uint64_t align = std::max<uint32_t>(16, ctx.limits.minUniformBufferOffsetAlignment);
  std::vector<uint8_t> uniform;
  std::vector<uint64_t> param_offset;
  for (Pending& p : pending) {
    std::vector<uint8_t>& prm = p.dispatch.params;
    prm.resize(std::max<size_t>(16, (prm.size() + 15) / 16 * 16), 0);
    uint64_t off = (uniform.size() + align - 1) / align * align;
    uniform.resize(off + prm.size(), 0);
    std::memcpy(uniform.data() + off, prm.data(), prm.size());
    param_offset.push_back(off);
  }
  wgpu::Buffer ubuf = nullptr;
  if (!uniform.empty()) {
    ubuf = b_.create_buffer(uniform.size(), wgpu::kUsageUniform | wgpu::kUsageCopyDst, "parameters");
    owned_.push_back(ubuf);
    d.QueueWriteBuffer(ctx.queue, ubuf, 0, uniform.data(), uniform.size());
  }

  // A view (Tensor::rows) binds its own range of the buffer: how a tensor larger than one binding is
  // taken a part at a time. A whole tensor binds the whole buffer.
  auto bind_tensor = [&](wgpu::BindGroupEntry& e, const Tensor& t, const OpCall& c) {
    e.buffer = b_.buffer(t.id());
    const uint64_t whole = b_.buffer_size(t.id());
    ET_CHECK_KIND(ErrorKind::unsupported, round4(t.nbytes()) <= ctx.limits.maxStorageBufferBindingSize, "webgpu: ",
                  t.str(), " (", t.nbytes(), " bytes) exceeds the device's maxStorageBufferBindingSize ",
                  ctx.limits.maxStorageBufferBindingSize, " in call ", c.str());
    if (t.offset() == 0 && (t.nbytes() + 4 > whole || whole <= ctx.limits.maxStorageBufferBindingSize)) return;
    ET_CHECK(t.offset() % ctx.limits.minStorageBufferOffsetAlignment == 0, "webgpu: ", t.str(), " starts at byte ",
             t.offset(), ", not a multiple of minStorageBufferOffsetAlignment ",
             ctx.limits.minStorageBufferOffsetAlignment);
    e.offset = t.offset();
    e.size = round4(t.nbytes());
  };
  for (size_t pi = 0; pi < pending.size(); ++pi) {
    const Pending& p = pending[pi];
    const OpCall& c = calls()[p.call];
    const Dispatch& dsp = p.dispatch;
    const Pipeline& pl = b_.pipeline(dsp);
    std::vector<wgpu::BindGroupEntry> entries;
    for (size_t i = 0; i < dsp.binds.size(); ++i) {
      const Bind& bd = dsp.binds[i];
      wgpu::BindGroupEntry e{};
      e.binding = static_cast<uint32_t>(i);
      e.size = wgpu::kWholeSize;
      switch (bd.src) {
        case Src::input:
          if (c.in.at(bd.index).defined()) bind_tensor(e, c.in[bd.index], c);
          else e.buffer = b_.dummy();
          break;
        case Src::output: bind_tensor(e, c.out.at(bd.index), c); break;
        case Src::scratch: e.buffer = scratch.at(p.scratch_base + bd.index); break;
        case Src::pooled: e.buffer = pooled; break;
        case Src::scalars: e.buffer = scalars_; break;
        case Src::dummy: e.buffer = b_.dummy(); break;
        case Src::params:
          e.buffer = ubuf;
          e.offset = param_offset[pi];
          e.size = dsp.params.size();
          break;
      }
      entries.push_back(e);
    }
    wgpu::BindGroupDescriptor bgd{};
    bgd.label = wgpu::sv(dsp.kernel.name);
    bgd.layout = pl.layout;
    bgd.entryCount = entries.size();
    bgd.entries = entries.data();
    ctx.push_scopes();
    wgpu::BindGroup g = d.DeviceCreateBindGroup(ctx.device, &bgd);
    try {
      ctx.pop_scopes(cat("bind group of kernel '", dsp.kernel.name, "' for ", c.str()));
    } catch (...) {
      if (g) d.BindGroupRelease(g);
      throw;
    }
    for (int i = 0; i < 3; ++i)
      ET_CHECK_KIND(ErrorKind::unsupported, dsp.groups[i] <= ectx.max_groups[i], "webgpu: kernel ", dsp.kernel.name,
                    " needs ", dsp.groups[i], " workgroups on axis ", i, ", more than the device's ",
                    ectx.max_groups[i], " (call ", c.str(), ")");
    if (dsp.groups[0] && dsp.groups[1] && dsp.groups[2])
      steps_.push_back({pl.pipeline, g, {dsp.groups[0], dsp.groups[1], dsp.groups[2]}});
    else
      d.BindGroupRelease(g);
  }
  ctx.check("finalize");
}

void WebGpuProgram::execute() {
  std::lock_guard<std::mutex> lock(b_.mutex());
  const wgpu::Dawn& d = b_.d();
  wgpu::Context& ctx = b_.ctx();
  std::vector<float> block = slot_values();
  block.insert(block.end(), constants_.begin(), constants_.end());
  if (!block.empty()) d.QueueWriteBuffer(ctx.queue, scalars_, 0, block.data(), block.size() * 4);
  if (steps_.empty()) return;
  // Submitted kSubmitEvery dispatches at a time, without waiting: Dawn validates each dispatch as it is
  // encoded and records Vulkan commands at submission, a few microseconds per dispatch on the CPU, so the
  // GPU runs the first dispatches while the rest are encoded. Measured on an H200 (base qat step, update
  // phase of ~110 dispatches; docs/PERFORMANCE.md): one submission 2.64 / 2.79 ms, every 32 2.40 / 2.35,
  // every 8 2.33 / 2.31 (whole step: 224.4 / 225.5, 222.6 / 222.5, 223.7 / 223.6 ms).
  constexpr size_t kSubmitEvery = 32;
  for (size_t begin = 0; begin < steps_.size(); begin += kSubmitEvery) {
    const size_t end = std::min(steps_.size(), begin + kSubmitEvery);
    wgpu::CommandEncoder enc = d.DeviceCreateCommandEncoder(ctx.device, nullptr);
    wgpu::ComputePassEncoder pass = d.CommandEncoderBeginComputePass(enc, nullptr);
    for (size_t i = begin; i < end; ++i) {
      const Step& s = steps_[i];
      d.ComputePassEncoderSetPipeline(pass, s.pipeline);
      d.ComputePassEncoderSetBindGroup(pass, 0, s.group, 0, nullptr);
      d.ComputePassEncoderDispatchWorkgroups(pass, s.groups[0], s.groups[1], s.groups[2]);
    }
    d.ComputePassEncoderEnd(pass);
    d.ComputePassEncoderRelease(pass);
    wgpu::CommandBuffer cb = d.CommandEncoderFinish(enc, nullptr);
    d.CommandEncoderRelease(enc);
    if (end == steps_.size()) {
      b_.submit_and_wait(cb, "replay");
    } else {
      d.QueueSubmit(ctx.queue, 1, &cb);
      d.CommandBufferRelease(cb);
    }
  }
}

}  // namespace

WebGpuBackend::WebGpuBackend(const BackendOptions& opts) : ctx_(std::make_unique<wgpu::Context>(opts)) {
  dummy_ = create_buffer(16, wgpu::kUsageStorage | wgpu::kUsageCopyDst, "dummy");
}

WebGpuBackend::~WebGpuBackend() {
  if (wgpu::dawn_exiting()) {
    (void)ctx_.release();  // Dawn may already be torn down: leak instead of calling it
    return;
  }
  const wgpu::Dawn& dn = d();
  for (auto& [k, p] : pipelines_) {
    dn.ComputePipelineRelease(p.pipeline);
    dn.BindGroupLayoutRelease(p.layout);
  }
  for (auto& [k, m] : modules_) dn.ShaderModuleRelease(m);
  for (auto& [id, b] : buffers_) {
    dn.BufferDestroy(b.buffer);
    dn.BufferRelease(b.buffer);
  }
  if (dummy_) dn.BufferRelease(dummy_);
  if (small_download_) {
    dn.BufferDestroy(small_download_);
    dn.BufferRelease(small_download_);
  }
}

std::unique_ptr<Program> WebGpuBackend::new_program() { return std::make_unique<WebGpuProgram>(*this); }

Backend::Fp16Speed WebGpuBackend::fp16_speed() const {
  if (!ctx_->info.shader_f16)
    return {false, "the WebGPU adapter '" + ctx_->info.name + "' has no shader-f16, and fp16 precision on WebGPU needs it", false};
  const wgpu::AdapterSummary& s = ctx_->info;
  if (s.matrix.M && !s.software())
    return {true, cat("fp16 subgroup matrices (", s.matrix.M, "x", s.matrix.N, "x", s.matrix.K,
                      ", Dawn's experimental feature): the fp16 GEMMs run on the matrix units")};
  if (s.matrix.M)
    return {false, "a software adapter, whose subgroup matrices (taken only where forced for tests) are emulated: "
                   "fp16 operands would be rounded, then multiplied in fp32"};
  return {false, "the WebGPU adapter offers no f16 subgroup matrices: fp16 operands are rounded, then multiplied on "
                 "the fp32 units"};
}

wgpu::Buffer WebGpuBackend::create_buffer(uint64_t bytes, wgpu::Flags usage, const char* label) {
  uint64_t size = round4(bytes);
  ET_CHECK_KIND(ErrorKind::unsupported, size <= ctx_->limits.maxBufferSize, "webgpu: a buffer of ", bytes,
                " bytes exceeds the device's maxBufferSize ", ctx_->limits.maxBufferSize);
  wgpu::BufferDescriptor bd{};
  bd.label = wgpu::sv(label);
  bd.usage = usage;
  bd.size = size;
  ctx_->push_scopes();
  wgpu::Buffer b = ctx_->d.DeviceCreateBuffer(ctx_->device, &bd);
  ctx_->pop_scopes(cat("creating a ", size, "-byte buffer (", label, ")"));
  return b;
}

uint64_t WebGpuBackend::allocate(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  wgpu::Buffer b = create_buffer(bytes, wgpu::kUsageStorage | wgpu::kUsageCopySrc | wgpu::kUsageCopyDst, "tensor");
  uint64_t id = next_id_++;
  buffers_[id] = {b, round4(bytes)};
  return id;
}

void WebGpuBackend::release(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = buffers_.find(id);
  if (it == buffers_.end()) return;
  if (wgpu::dawn_exiting()) {  // a tensor freed during exit: leak the handle (see arm_exit_teardown)
    buffers_.erase(it);
    return;
  }
  d().BufferDestroy(it->second.buffer);
  d().BufferRelease(it->second.buffer);
  buffers_.erase(it);
}

wgpu::Buffer WebGpuBackend::buffer(uint64_t id) const {
  auto it = buffers_.find(id);
  ET_CHECK(it != buffers_.end(), "webgpu: no buffer with id ", id);
  return it->second.buffer;
}

uint64_t WebGpuBackend::buffer_size(uint64_t id) const {
  auto it = buffers_.find(id);
  ET_CHECK(it != buffers_.end(), "webgpu: no buffer with id ", id);
  return it->second.size;
}

void WebGpuBackend::write(uint64_t id, const void* data, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  wgpu::Buffer b = buffer(id);
  size_t whole = bytes / 4 * 4;
  if (whole) d().QueueWriteBuffer(ctx_->queue, b, 0, data, whole);
  if (whole != bytes) {  // queue writes are in 4-byte units; the tail word's padding bytes are zero
    uint8_t tail[4] = {0, 0, 0, 0};
    std::memcpy(tail, static_cast<const uint8_t*>(data) + whole, bytes - whole);
    d().QueueWriteBuffer(ctx_->queue, b, whole, tail, 4);
  }
  ctx_->check("upload");
}

void WebGpuBackend::read(uint64_t id, void* data, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const wgpu::Dawn& dn = d();
  uint64_t size = round4(bytes);
  const bool small = size <= kSmallDownload;
  if (small && !small_download_)
    small_download_ = create_buffer(kSmallDownload, wgpu::kUsageMapRead | wgpu::kUsageCopyDst, "small download");
  wgpu::Buffer staging =
      small ? small_download_ : create_buffer(size, wgpu::kUsageMapRead | wgpu::kUsageCopyDst, "download");
  wgpu::CommandEncoder enc = dn.DeviceCreateCommandEncoder(ctx_->device, nullptr);
  dn.CommandEncoderCopyBufferToBuffer(enc, buffer(id), 0, staging, 0, size);
  wgpu::CommandBuffer cb = dn.CommandEncoderFinish(enc, nullptr);
  dn.CommandEncoderRelease(enc);
  submit_and_wait(cb, "download");
  struct Mapped {
    uint32_t status = 0;
    std::string message;
  } m;
  wgpu::BufferMapCallbackInfo info{};
  info.mode = wgpu::kCallbackModeWaitAnyOnly;
  info.callback = [](uint32_t status, wgpu::StringView msg, void* u1, void*) {
    auto* r = static_cast<Mapped*>(u1);
    r->status = status;
    if (msg.data) r->message = msg.length == wgpu::kStrlen ? std::string(msg.data) : std::string(msg.data, msg.length);
  };
  info.userdata1 = &m;
  ctx_->wait(dn.BufferMapAsync(staging, wgpu::kMapRead, 0, size, info), "mapping a download buffer");
  const void* p = m.status == wgpu::kStatusSuccess ? dn.BufferGetConstMappedRange(staging, 0, size) : nullptr;
  if (p) std::memcpy(data, p, bytes);
  dn.BufferUnmap(staging);
  if (!small) {
    dn.BufferDestroy(staging);
    dn.BufferRelease(staging);
  }
  ET_CHECK_KIND(ErrorKind::device, p, "webgpu: mapping a ", size, "-byte download buffer failed: ", m.message);
  ctx_->check("download");
}

void WebGpuBackend::submit_and_wait(wgpu::CommandBuffer cb, const char* what) {
  const wgpu::Dawn& dn = d();
  dn.QueueSubmit(ctx_->queue, 1, &cb);
  dn.CommandBufferRelease(cb);
  uint32_t status = 0;
  wgpu::QueueWorkDoneCallbackInfo info{};
  info.mode = wgpu::kCallbackModeWaitAnyOnly;
  info.callback = [](uint32_t s, wgpu::StringView, void* u1, void*) { *static_cast<uint32_t*>(u1) = s; };
  info.userdata1 = &status;
  ctx_->wait(dn.QueueOnSubmittedWorkDone(ctx_->queue, info), what);
  ctx_->check(what);
  ET_CHECK_KIND(ErrorKind::device, status == wgpu::kStatusSuccess, "webgpu: the queue reported status ", status,
                " after ", what);
}

const Pipeline& WebGpuBackend::pipeline(const Dispatch& dsp) {
  std::string key = dsp.kernel.name;
  for (auto& [k, v] : dsp.consts) key += cat("|", k, "=", v);
  key += "|";
  for (const Bind& b : dsp.binds) key += static_cast<char>('0' + static_cast<int>(b.access));
  auto it = pipelines_.find(key);
  if (it != pipelines_.end()) return it->second;

  const wgpu::Dawn& dn = d();
  wgpu::arm_exit_teardown();  // Dawn may have created static state lazily since the last registration
  wgpu::ShaderModule& mod = modules_[dsp.kernel.name];
  if (!mod) mod = ctx_->compile(dsp.kernel.name, dsp.kernel.subgroup_matrix ? coop_prelude() + dsp.kernel.wgsl
                                                                            : std::string(dsp.kernel.wgsl));

  std::vector<wgpu::BindGroupLayoutEntry> entries;
  for (size_t i = 0; i < dsp.binds.size(); ++i) {
    wgpu::BindGroupLayoutEntry e{};
    e.binding = static_cast<uint32_t>(i);
    e.visibility = wgpu::kStageCompute;
    e.buffer.type = dsp.binds[i].access == Access::uniform      ? wgpu::kBindingUniform
                    : dsp.binds[i].access == Access::read_write ? wgpu::kBindingStorage
                                                                : wgpu::kBindingReadOnlyStorage;
    entries.push_back(e);
  }
  wgpu::BindGroupLayoutDescriptor ld{};
  ld.label = wgpu::sv(dsp.kernel.name);
  ld.entryCount = entries.size();
  ld.entries = entries.data();
  std::vector<wgpu::ConstantEntry> consts;
  for (auto& [k, v] : dsp.consts) {
    wgpu::ConstantEntry c{};
    c.key = {k.data(), k.size()};
    c.value = v;
    consts.push_back(c);
  }
  ctx_->push_scopes();
  Pipeline p;
  p.layout = dn.DeviceCreateBindGroupLayout(ctx_->device, &ld);
  wgpu::PipelineLayoutDescriptor pld{};
  pld.label = wgpu::sv(dsp.kernel.name);
  pld.bindGroupLayoutCount = 1;
  pld.bindGroupLayouts = &p.layout;
  wgpu::PipelineLayout layout = dn.DeviceCreatePipelineLayout(ctx_->device, &pld);
  wgpu::ComputePipelineDescriptor cd{};
  cd.label = wgpu::sv(dsp.kernel.name);
  cd.layout = layout;
  cd.compute.module = mod;
  cd.compute.entryPoint = wgpu::sv("main");
  cd.compute.constantCount = consts.size();
  cd.compute.constants = consts.data();
  p.pipeline = dn.DeviceCreateComputePipeline(ctx_->device, &cd);
  dn.PipelineLayoutRelease(layout);
  try {
    ctx_->pop_scopes(cat("pipeline of shader '", dsp.kernel.name, "' (", key, ")"));
  } catch (...) {
    if (p.pipeline) dn.ComputePipelineRelease(p.pipeline);
    if (p.layout) dn.BindGroupLayoutRelease(p.layout);
    throw;
  }
  return pipelines_[key] = p;
}

EncodeContext WebGpuBackend::encode_context() const {
  const wgpu::Limits& l = ctx_->limits;
  EncodeContext e;
  e.backend = "webgpu";
  for (uint32_t& g : e.max_groups) g = l.maxComputeWorkgroupsPerDimension;
  e.max_invocations = l.maxComputeInvocationsPerWorkgroup;
  e.max_size_x = l.maxComputeWorkgroupSizeX;
  e.max_shared_bytes = l.maxComputeWorkgroupStorageSize;
  e.max_binding_bytes = l.maxStorageBufferBindingSize;
  e.matrix = ctx_->info.matrix.M;
  e.software = ctx_->info.software();
  e.tuning = tuning_;
  return e;
}

// Prepended to a subgroup-matrix kernel on its first line (so Dawn's line numbers stay the file's): the
// extensions, the uniformity check off (each subgroup's tiles follow its subgroup_id, the same for all its
// invocations), and the adapter's matrix shape and subgroup size.
std::string WebGpuBackend::coop_prelude() const {
  const wgpu::AdapterSummary::Matrix& m = ctx_->info.matrix;
  ET_CHECK(m.M != 0, "webgpu: a subgroup-matrix kernel on an adapter without f16 subgroup matrices");
  return cat("enable f16; enable chromium_experimental_subgroup_matrix; diagnostic(off, chromium.subgroup_matrix_uniformity); ",
             "const TM = ", m.M, "u; const SG = ", m.subgroup, "u; ");
}

void WebGpuBackend::compile_check(const std::string& name, const std::string& wgsl) {
  std::lock_guard<std::mutex> lock(mu_);
  wgpu::ShaderModule m = ctx_->compile(name, wgsl);
  d().ShaderModuleRelease(m);
}

}  // namespace wg

// ---- registry entry points (declared in src/backends.cpp) ----

std::vector<DeviceInfo> webgpu_devices() {
  wgpu::AdapterSummary s = wgpu::probe_adapter();
  if (!s.ok) return {{"webgpu", "-", "other", s.error, false}};
  std::string kind = s.software() ? "software"
                     : s.adapter_type == wgpu::kAdapterDiscrete   ? "discrete"
                     : s.adapter_type == wgpu::kAdapterIntegrated ? "integrated"
                                                                  : "other";
  std::string details = "Dawn " + s.backend_name + " backend";
  if (!s.description.empty()) details += ", " + s.description;
  if (!s.how.empty()) details += " (" + s.how + ")";
  if (!s.limits.empty()) details += "; " + s.limits;
  return {{"webgpu", s.name, kind, details, true}};
}

std::unique_ptr<Backend> make_webgpu_backend(const BackendOptions& opts) {
  return std::make_unique<wg::WebGpuBackend>(opts);
}

}  // namespace edgetrain
