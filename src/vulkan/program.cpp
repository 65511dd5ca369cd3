// VulkanProgram: encode once, record one command buffer, replay by rewriting the scalar block; the staged
// operands a program shares between its GEMMs. VulkanBackend and the registry entry points: backend.cpp.
#include "vulkan/program.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <unordered_set>

#include "vulkan/ops_gemm.h"

namespace edgetrain::vk {

namespace {

// Operands the tensor-core GEMMs have staged in a program's pooled scratch and that are still there, while
// its dispatches are recorded in order (the q, k and v projections, and qlora's x A^T, convert the same
// activations). A staging dispatch (Dispatch::stage_reads) identical to one of them, reading the same byte
// ranges, need not run. An image is forgotten when a call writes an overlapping range of what it was made
// from (an output: an op writes nothing else but scratch; not what a kernel declares writable, since
// generic kernels such as gemm_coop declare their inputs' bindings so), or its bytes of the pooled scratch.
class StagedOperands {
 public:
  // Whether dispatch d of a call binding `bound` would stage an operand that is still there.
  bool still_there(const Dispatch& d, const std::vector<VkDescriptorBufferInfo>& bound) const {
    if (d.stage_reads.empty()) return false;
    const Image im = image(d, bound);
    for (const Image& s : images_) {
      bool match = s.spirv == im.spirv && s.spec == im.spec && s.push == im.push && s.begin == im.begin &&
                   s.end == im.end && s.reads.size() == im.reads.size();
      for (size_t i = 0; match && i < s.reads.size(); ++i)
        match = s.reads[i].buffer == im.reads[i].buffer && s.reads[i].offset == im.reads[i].offset &&
                s.reads[i].range == im.reads[i].range;
      if (match) return true;
    }
    return false;
  }
  // Dispatch d ran: its call writes `outs` and, if it binds it, the pooled scratch (d's range where it says).
  void dispatched(const Dispatch& d, const std::vector<VkDescriptorBufferInfo>& bound,
                  const std::vector<VkDescriptorBufferInfo>& outs, bool binds_pooled) {
    if (binds_pooled) {
      if (!d.pooled_known) images_.clear();
      erase([&](const Image& s) { return s.begin < d.pooled_end && d.pooled_begin < s.end; });
    }
    for (const VkDescriptorBufferInfo& o : outs)
      erase([&](const Image& s) {
        for (const VkDescriptorBufferInfo& r : s.reads)
          if (r.buffer == o.buffer && r.offset < end_of(o) && o.offset < end_of(r)) return true;
        return false;
      });
    if (!d.stage_reads.empty()) images_.push_back(image(d, bound));
  }

 private:
  struct Image {
    const uint32_t* spirv;
    std::vector<uint32_t> spec;  // past the binding numbers (Dispatch::stage_bind_specs)
    std::vector<uint8_t> push;
    std::vector<VkDescriptorBufferInfo> reads;
    uint64_t begin, end;  // pooled scratch bytes
  };
  static Image image(const Dispatch& d, const std::vector<VkDescriptorBufferInfo>& bound) {
    const auto skip = static_cast<std::ptrdiff_t>(std::min<size_t>(d.stage_bind_specs, d.spec.size()));
    Image im{d.kernel.spirv, {d.spec.begin() + skip, d.spec.end()}, d.push, {}, d.pooled_begin, d.pooled_end};
    for (uint32_t i : d.stage_reads) im.reads.push_back(bound.at(i));
    return im;
  }
  static VkDeviceSize end_of(const VkDescriptorBufferInfo& r) {
    return r.range == VK_WHOLE_SIZE ? ~VkDeviceSize{0} : r.offset + r.range;
  }
  template <typename Pred>
  void erase(Pred p) {
    images_.erase(std::remove_if(images_.begin(), images_.end(), p), images_.end());
  }
  std::vector<Image> images_;
};

}  // namespace

// ---- VulkanProgram ----

VulkanProgram::~VulkanProgram() {
  std::lock_guard<std::mutex> lock(vb_.mutex());
  VkDevice d = vb_.context().device();
  if (cmd_) vkFreeCommandBuffers(d, vb_.transfer().pool(), 1, &cmd_);
  if (pool_) vkDestroyDescriptorPool(d, pool_, nullptr);
  if (queries_) vkDestroyQueryPool(d, queries_, nullptr);
  if (span_) vkDestroyQueryPool(d, span_, nullptr);
  for (DeviceBuffer& s : scratch_) {
    vb_.transfer().forget(s.buffer);
    vb_.memory().destroy(s);
  }
  vb_.memory().destroy_host(scalars_);
  if (scalars_dev_.buffer) {
    vb_.transfer().forget(scalars_dev_.buffer);
    vb_.memory().destroy(scalars_dev_);
  }
}

void VulkanProgram::on_finalize() {
  std::lock_guard<std::mutex> lock(vb_.mutex());
  Context& ctx = vb_.context();
  VkDevice dev = ctx.device();
  const auto& calls = this->calls();
  if (calls.empty()) return;

  // Scalar block: slots first, then every constant float argument in call order.
  std::vector<float> block = slot_values();
  EncodeContext base = vb_.encode_context();
  std::vector<Encoded> enc(calls.size());
  what_ = "replay of [";
  for (size_t c = 0; c < calls.size(); ++c) {
    const OpCall& call = calls[c];
    what_ += (c ? ", " : "") + std::string(op_name(call.op));
    Encoder e = encoder_for(call.op);
    ET_CHECK_KIND(ErrorKind::unsupported, e, "vulkan: no kernel for op ", op_name(call.op), " (call: ", call.str(),
                  ")");
    EncodeContext ec = base;
    for (const Scalar& f : call.floats) {
      if (f.is_slot()) {
        ec.float_index.push_back(static_cast<uint32_t>(f.slot));
      } else {
        ec.float_index.push_back(static_cast<uint32_t>(block.size()));
        block.push_back(f.value);
      }
    }
    ec.low_rank_update_follows = c + 1 < calls.size() && low_rank_update_pair(call, calls[c + 1], ec);
    e(call, ec, enc[c]);
    // A low-rank update right after the 4-bit product it adds to joins that product's GEMM (ops_gemm.h).
    if (c > 0 && fuse_low_rank_update(calls[c - 1], enc[c - 1], call, ec, enc[c])) ++fused_updates_;
  }
  what_ += "]";
  scalars_ = vb_.memory().create_host(block.size() * sizeof(float));
  if (!block.empty()) std::memcpy(scalars_.mapped, block.data(), block.size() * sizeof(float));  // a program may have none
  // Kernels read the scalars from device memory: every workgroup reads them, and host-visible memory sits
  // across PCIe on discrete GPUs.
  scalars_dev_ = vb_.memory().create(block.size() * sizeof(float));

  // Descriptor sets: one per call, binding convention of kernel.h, padded with the dummy buffer.
  uint32_t total_bindings = 0;
  std::vector<uint32_t> nbind(calls.size());
  for (size_t c = 0; c < calls.size(); ++c) {
    uint32_t n = static_cast<uint32_t>(calls[c].in.size() + calls[c].out.size() + 1 + enc[c].scratch_bytes.size() +
                                       (enc[c].pooled_scratch_bytes ? 1 : 0));
    nbind[c] = Pipelines::padded_bindings(n);
    total_bindings += nbind[c];
  }
  VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, total_bindings};
  VkDescriptorPoolCreateInfo pci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pci.maxSets = static_cast<uint32_t>(calls.size());
  pci.poolSizeCount = 1;
  pci.pPoolSizes = &ps;
  check(vkCreateDescriptorPool(dev, &pci, nullptr, &pool_), "vkCreateDescriptorPool");

  const VkDeviceSize max_range = ctx.limits().max_storage_range;
  size_t pooled_bytes = 0;
  for (const Encoded& e : enc) pooled_bytes = std::max(pooled_bytes, e.pooled_scratch_bytes);
  DeviceBuffer pooled{};  // a copy of the handle: scratch_ grows below
  if (pooled_bytes) {
    scratch_.push_back(vb_.memory().create(pooled_bytes));
    vb_.transfer().zero_fill_later(scratch_.back().buffer);
    pooled = scratch_.back();
  }
  std::vector<VkDescriptorSet> sets(calls.size());
  std::vector<std::vector<VkBuffer>> bound(calls.size());  // per call, the buffer at each binding
  std::vector<std::vector<VkDescriptorBufferInfo>> ranges(calls.size());  // and the range it binds
  for (size_t c = 0; c < calls.size(); ++c) {
    const OpCall& call = calls[c];
    VkDescriptorSetLayout sl = vb_.pipelines().set_layout(nbind[c]);
    VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = pool_;
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &sl;
    check(vkAllocateDescriptorSets(dev, &ai, &sets[c]), "vkAllocateDescriptorSets");
    std::vector<VkDescriptorBufferInfo> infos;
    auto add = [&](VkBuffer b, VkDeviceSize size, const std::string& what) {
      ET_CHECK_KIND(ErrorKind::unsupported, size <= max_range, "vulkan: ", what, " of ", size,
                    " bytes exceeds this device's maxStorageBufferRange (", max_range, " bytes) in call ", call.str());
      infos.push_back({b, 0, VK_WHOLE_SIZE});
    };
    // A view (Tensor::rows) binds its own range of the buffer: how a tensor larger than one binding is
    // taken a part at a time.
    auto add_tensor = [&](const Tensor& t, const char* what) {
      const DeviceBuffer& db = vb_.buffer(t.id());
      if ((t.offset() == 0 && t.nbytes() + 16 > db.size) || t.nbytes() == 0)
        return add(db.buffer, db.size, what + (" " + t.str()));
      const VkDeviceSize range = std::min<VkDeviceSize>((t.nbytes() + 3) / 4 * 4, db.size - t.offset());
      ET_CHECK(t.offset() % ctx.limits().storage_offset_alignment == 0, "vulkan: ", what, " ", t.str(), " starts at byte ",
               t.offset(), ", not a multiple of minStorageBufferOffsetAlignment ", ctx.limits().storage_offset_alignment);
      ET_CHECK_KIND(ErrorKind::unsupported, range <= max_range, "vulkan: ", what, " ", t.str(), " of ", range,
                    " bytes exceeds this device's maxStorageBufferRange (", max_range, " bytes) in call ", call.str());
      infos.push_back({db.buffer, t.offset(), range});
    };
    // Absent optional inputs and the padding bindings get a 16-byte zero buffer of the call's own: calls
    // that run at once (see the barriers below) then share no buffer that a kernel declares writable.
    VkBuffer dummy = VK_NULL_HANDLE;
    auto own_dummy = [&]() {
      if (!dummy) {
        scratch_.push_back(vb_.memory().create(16));
        vb_.transfer().zero_fill_later(scratch_.back().buffer);
        dummy = scratch_.back().buffer;
      }
      return dummy;
    };
    for (const Tensor& t : call.in) {
      if (!t.defined()) add(own_dummy(), 16, "dummy");
      else add_tensor(t, "input");
    }
    for (const Tensor& t : call.out) add_tensor(t, "output");
    add(scalars_dev_.buffer, scalars_dev_.size, "scalar block");
    for (size_t s : enc[c].scratch_bytes) {
      scratch_.push_back(vb_.memory().create(s));
      vb_.transfer().zero_fill_later(scratch_.back().buffer);
      add(scratch_.back().buffer, scratch_.back().size, "scratch buffer");
    }
    if (enc[c].pooled_scratch_bytes) add(pooled.buffer, pooled.size, "pooled scratch buffer");
    while (infos.size() < nbind[c]) infos.push_back({own_dummy(), 0, VK_WHOLE_SIZE});
    std::vector<VkWriteDescriptorSet> writes(infos.size());
    for (uint32_t i = 0; i < infos.size(); ++i) {
      writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      writes[i].dstSet = sets[c];
      writes[i].dstBinding = i;
      writes[i].descriptorCount = 1;
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[i].pBufferInfo = &infos[i];
    }
    vkUpdateDescriptorSets(dev, static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
    for (const VkDescriptorBufferInfo& info : infos) bound[c].push_back(info.buffer);
    ranges[c] = infos;
  }

  // Profiling (EDGETRAIN_PROFILE): a timestamp before and after every dispatch, both at the compute
  // stage, so "before" is when the previous dispatch finished and "after" when this one did.
  Profiler* prof = vb_.profiler();
  uint32_t query_count = 0;  // in the pool: the dispatches recorded may be fewer
  if (prof) {
    profile_ = prof->add_program();
    std::map<std::string, size_t> ops;
    for (const OpCall& call : calls) ++ops[op_name(call.op)];
    std::vector<std::pair<std::string, size_t>> by_count(ops.begin(), ops.end());
    std::stable_sort(by_count.begin(), by_count.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    std::string label = "program of " + std::to_string(calls.size()) + " calls [";
    for (size_t i = 0; i < by_count.size(); ++i) {
      if (label.size() > 200) {
        label += ", ...";
        break;
      }
      label += (i ? ", " : "") + by_count[i].first + " x" + std::to_string(by_count[i].second);
    }
    label += "]";
    profile_->label = label;
    // Two queries per dispatch that may be recorded; the dispatches recorded (a staging still in place is
    // left out) name theirs below, and only those are read back.
    for (size_t c = 0; c < calls.size(); ++c)
      for (const Dispatch& d : enc[c].dispatches) query_count += d.groups[0] && d.groups[1] && d.groups[2] ? 2 : 0;
    if (query_count) queries_ = ctx.make_timestamp_pool(query_count);
  }

  // Without the profiler, two timestamps time the whole replay on the device (device_seconds): a replay's
  // wall time beyond it is the submission and the wait (bench shows both).
  if (!queries_ && ctx.timestamps()) span_ = ctx.make_timestamp_pool(2);

  // One command buffer for the whole program.
  cmd_ = allocate_command_buffer(dev, vb_.transfer().pool());
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  check(vkBeginCommandBuffer(cmd_, &bi), "vkBeginCommandBuffer");
  if (queries_) vkCmdResetQueryPool(cmd_, queries_, 0, query_count);
  if (span_) {
    vkCmdResetQueryPool(cmd_, span_, 0, 2);
    vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, span_, 0);
  }
  if (!block.empty()) {
    VkBufferCopy region{0, 0, block.size() * sizeof(float)};
    vkCmdCopyBuffer(cmd_, scalars_.buffer, scalars_dev_.buffer, 1, &region);
  }
  // Uploads, fills and earlier replays happen before this program's first kernel.
  memory_barrier(cmd_, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT,
                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  // Barriers only where the work needs them: between the dispatches of one call (they pass values
  // through their scratch), and before a dispatch that reads a buffer written since the last barrier or
  // writes one read or written since then. Calls on disjoint buffers (the update's per-tensor AdamW and
  // requant, the q, k, v projections) then overlap on the device. A dispatch writes its call's outputs,
  // the pooled scratch, and whatever its kernel binds where it declares a writable buffer (generic kernels
  // such as the GEMMs declare bindings writable that hold inputs or the scalar block in some layouts: that
  // is what the synchronization validation assumes, so it is assumed here too); it reads the rest of what
  // it binds. Buffers, not byte ranges: the views of one tensor and the planned tensors that share an arena
  // buffer (plan_memory) are one buffer here. The profiler keeps a barrier before every dispatch: its
  // timestamps time one dispatch at a time.
  std::unordered_set<VkBuffer> written, read;  // since the last barrier
  const bool serial = queries_ != VK_NULL_HANDLE;
  bool first = true;
  StagedOperands staged;
  for (size_t c = 0; c < calls.size(); ++c) {
    std::unordered_set<VkBuffer> outputs;
    for (const Tensor& t : calls[c].out) outputs.insert(vb_.buffer(t.id()).buffer);
    if (enc[c].pooled_scratch_bytes) outputs.insert(pooled.buffer);
    bool call_first = true;
    for (const Dispatch& d : enc[c].dispatches) {
      if (d.groups[0] == 0 || d.groups[1] == 0 || d.groups[2] == 0) continue;
      const size_t sc = d.binds_call_before ? c - 1 : c;  // whose descriptor set it binds
      VkPipelineLayout pl = vb_.pipelines().layout(nbind[sc]);
      ET_CHECK(d.push.size() <= kPushBytes, "vulkan: kernel ", d.kernel.name, " has ", d.push.size(),
               " bytes of push constants (at most ", kPushBytes, ")");
      for (int i = 0; i < 3; ++i)
        ET_CHECK_KIND(ErrorKind::unsupported, d.groups[i] <= ctx.limits().max_groups[i], "vulkan: kernel ",
                      d.kernel.name, " needs ", d.groups[i], " workgroups on axis ", i, ", more than the device's ",
                      ctx.limits().max_groups[i], " (call ", calls[c].str(), ")");
      VkPipeline p = vb_.pipelines().get(d.kernel, d.spec, nbind[sc]);
      std::vector<VkBuffer> reads, writes(outputs.begin(), outputs.end());
      const std::vector<bool>& writable = vb_.pipelines().writable_bindings(d.kernel);
      for (size_t i = 0; i < bound[sc].size(); ++i)
        (i < writable.size() && writable[i] ? writes : reads).push_back(bound[sc][i]);
      // A staging whose operand is still in the pooled scratch is left out.
      const auto first_out = ranges[c].begin() + static_cast<std::ptrdiff_t>(calls[c].in.size());
      const std::vector<VkDescriptorBufferInfo> outs(first_out, first_out + static_cast<std::ptrdiff_t>(calls[c].out.size()));
      if (staged.still_there(d, ranges[sc])) {
        ++skipped_stagings_;
        continue;
      }
      staged.dispatched(d, ranges[sc], outs, enc[c].pooled_scratch_bytes > 0);
      bool hazard = false;
      for (VkBuffer b : reads) hazard |= written.count(b) > 0;
      for (VkBuffer b : writes) hazard |= written.count(b) > 0 || read.count(b) > 0;
      if (!first && (serial || hazard || !call_first)) {
        memory_barrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
        written.clear();
        read.clear();
        ++barriers_;
      }
      first = false;
      call_first = false;
      written.insert(writes.begin(), writes.end());
      read.insert(reads.begin(), reads.end());
      vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, p);
      vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, &sets[sc], 0, nullptr);
      if (!d.push.empty())
        vkCmdPushConstants(cmd_, pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, static_cast<uint32_t>(d.push.size()), d.push.data());
      const auto q = queries_ ? static_cast<uint32_t>(2 * profile_->key.size()) : 0u;
      if (queries_) {
        std::string name = d.kernel.name;
        name = name.substr(0, name.find('#'));  // grad_norm#<n>_<i> copies are one kernel
        profile_->key.push_back(name + " (" + op_name(calls[sc].op) + (sc != c ? " + mm" : "") + ")");
        profile_->call.push_back(name + " grid " + std::to_string(d.groups[0]) + "x" + std::to_string(d.groups[1]) +
                                 "x" + std::to_string(d.groups[2]) + ": " + calls[sc].str() +
                                 (sc != c ? " + " + calls[c].str() : ""));
        vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, queries_, q);
      }
      vkCmdDispatch(cmd_, d.groups[0], d.groups[1], d.groups[2]);
      if (queries_) vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, queries_, q + 1);
      ++dispatches_;
    }
  }
  memory_barrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                 VK_PIPELINE_STAGE_ALL_COMMANDS_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                 VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT | VK_ACCESS_HOST_READ_BIT);
  if (span_) vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, span_, 1);
  check(vkEndCommandBuffer(cmd_), "vkEndCommandBuffer");
  ctx.throw_if_messages("program finalize");
}

OneBufferSet::OneBufferSet(VulkanBackend& vb, VkBuffer buffer)
    : dev_(vb.context().device()), bindings_(Pipelines::padded_bindings(1)) {
  VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, bindings_};
  VkDescriptorPoolCreateInfo pci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pci.maxSets = 1;
  pci.poolSizeCount = 1;
  pci.pPoolSizes = &ps;
  check(vkCreateDescriptorPool(dev_, &pci, nullptr, &pool_), "vkCreateDescriptorPool");
  const VkDescriptorSetLayout sl = vb.pipelines().set_layout(bindings_);
  VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  ai.descriptorPool = pool_;
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &sl;
  if (VkResult r = vkAllocateDescriptorSets(dev_, &ai, &set_); r != VK_SUCCESS) {
    vkDestroyDescriptorPool(dev_, pool_, nullptr);
    check(r, "vkAllocateDescriptorSets");
  }
  std::vector<VkDescriptorBufferInfo> infos(bindings_, VkDescriptorBufferInfo{vb.dummy().buffer, 0, VK_WHOLE_SIZE});
  infos[0] = {buffer, 0, VK_WHOLE_SIZE};
  VkWriteDescriptorSet w{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
  w.dstSet = set_;
  w.descriptorCount = bindings_;
  w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
  w.pBufferInfo = infos.data();
  vkUpdateDescriptorSets(dev_, 1, &w, 0, nullptr);
}

OneBufferSet::~OneBufferSet() { vkDestroyDescriptorPool(dev_, pool_, nullptr); }

void VulkanProgram::execute() {
  if (!cmd_) return;
  std::lock_guard<std::mutex> lock(vb_.mutex());
  const auto& slots = slot_values();
  if (!slots.empty()) std::memcpy(scalars_.mapped, slots.data(), slots.size() * sizeof(float));
  vb_.transfer().submit(cmd_, what_.c_str());
  if (queries_) vb_.profiler()->collect(queries_, *profile_);
  if (span_) {
    const Context& ctx = vb_.context();
    uint64_t ts[2] = {0, 0};
    const VkResult r = vkGetQueryPoolResults(ctx.device(), span_, 0, 2, sizeof ts, ts, sizeof(uint64_t),
                                             VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
    device_seconds_ = r == VK_SUCCESS ? ctx.timestamp_ns(ts[0], ts[1]) * 1e-9 : -1;
  }
}

}  // namespace edgetrain::vk
