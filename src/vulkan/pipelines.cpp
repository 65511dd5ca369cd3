// Shader modules, layouts and compute pipelines, created on first use and cached for the backend's life.
#include "vulkan/pipelines.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace edgetrain::vk {

Pipelines::Pipelines(Context& ctx) : ctx_(ctx) {
  // TEST-ONLY fault injection: EDGETRAIN_VK_FAULT=pipeline (read once per backend, here) makes every
  // compute-pipeline creation of this backend fail the way a driver that cannot compile a shader does: an
  // error VkResult and no pipeline. Nothing invalid reaches the driver (the validation layer, on in tests,
  // would report that first); the error path of get() runs exactly as for a real failure. Used by
  // tests/test_reliability_devices.cpp and tests/cli_smoke.sh; never set it otherwise.
  const char* fault = std::getenv("EDGETRAIN_VK_FAULT");
  fail_pipelines_ = fault != nullptr && std::strcmp(fault, "pipeline") == 0;
  VkPipelineCacheCreateInfo ci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  check(vkCreatePipelineCache(ctx.device(), &ci, nullptr, &cache_), "vkCreatePipelineCache");
}

Pipelines::~Pipelines() {
  VkDevice d = ctx_.device();
  for (auto& [k, p] : pipelines_) vkDestroyPipeline(d, p, nullptr);
  for (auto& [k, m] : modules_) vkDestroyShaderModule(d, m, nullptr);
  for (auto& [k, l] : layouts_) {
    vkDestroyPipelineLayout(d, l.pipeline, nullptr);
    vkDestroyDescriptorSetLayout(d, l.set, nullptr);
  }
  if (cache_) vkDestroyPipelineCache(d, cache_, nullptr);
}

Pipelines::Layout& Pipelines::layout_for(uint32_t n) {
  Layout& l = layouts_[n];
  if (l.set) return l;
  std::vector<VkDescriptorSetLayoutBinding> bs(n);
  for (uint32_t i = 0; i < n; ++i) bs[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  VkDescriptorSetLayoutCreateInfo si{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  si.bindingCount = n;
  si.pBindings = bs.data();
  check(vkCreateDescriptorSetLayout(ctx_.device(), &si, nullptr, &l.set), "vkCreateDescriptorSetLayout");
  VkPushConstantRange pr{VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushBytes};
  VkPipelineLayoutCreateInfo pi{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pi.setLayoutCount = 1;
  pi.pSetLayouts = &l.set;
  pi.pushConstantRangeCount = 1;
  pi.pPushConstantRanges = &pr;
  check(vkCreatePipelineLayout(ctx_.device(), &pi, nullptr, &l.pipeline), "vkCreatePipelineLayout");
  return l;
}

VkDescriptorSetLayout Pipelines::set_layout(uint32_t bindings) { return layout_for(bindings).set; }
VkPipelineLayout Pipelines::layout(uint32_t bindings) { return layout_for(bindings).pipeline; }

VkShaderModule Pipelines::module(const Kernel& k) {
  VkShaderModule& m = modules_[k.spirv];
  if (m) return m;
  VkShaderModuleCreateInfo ci{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  ci.codeSize = k.words * sizeof(uint32_t);
  ci.pCode = k.spirv;
  VkResult r = vkCreateShaderModule(ctx_.device(), &ci, nullptr, &m);
  if (r != VK_SUCCESS) {
    modules_.erase(k.spirv);
    fail_kind(ErrorKind::device, "vulkan: vkCreateShaderModule failed for kernel ", k.name, ": ", result_name(r));
  }
  return m;
}

// SPIR-V: the (set 0) Binding of each variable, its pointee type, and NonWritable on variables or on every
// member of their block types. Declarations of one binding under several names (a float and a vec4 view)
// are all looked at: the binding is writable when any of them is.
const std::vector<bool>& Pipelines::writable_bindings(const Kernel& k) {
  auto it = writable_.find(k.spirv);
  if (it != writable_.end()) return it->second;
  constexpr uint32_t kDecorate = 71, kMemberDecorate = 72, kVariable = 59, kTypePointer = 32, kTypeStruct = 30;
  constexpr uint32_t kNonWritable = 24, kBinding = 33;
  std::map<uint32_t, uint32_t> binding, pointee, members, var_type;
  std::map<uint32_t, uint32_t> readonly_members;  // struct -> members decorated NonWritable
  std::map<uint32_t, bool> readonly_var;
  for (size_t i = 5; i < k.words;) {
    const uint32_t n = k.spirv[i] >> 16, op = k.spirv[i] & 0xffff;
    ET_CHECK(n > 0 && i + n <= k.words, "vulkan: kernel ", k.name, ": malformed SPIR-V at word ", i);
    const uint32_t* w = k.spirv + i;
    if (op == kDecorate && n >= 4 && w[2] == kBinding) binding[w[1]] = w[3];
    if (op == kDecorate && n >= 3 && w[2] == kNonWritable) readonly_var[w[1]] = true;
    if (op == kMemberDecorate && n >= 4 && w[3] == kNonWritable) ++readonly_members[w[1]];
    if (op == kTypePointer && n >= 4) pointee[w[1]] = w[3];
    if (op == kTypeStruct) members[w[1]] = n - 2;
    if (op == kVariable && n >= 4) var_type[w[2]] = w[1];
    i += n;
  }
  std::vector<bool> out;
  for (const auto& [var, b] : binding) {
    const uint32_t st = var_type.count(var) && pointee.count(var_type[var]) ? pointee[var_type[var]] : 0;
    const bool ro = readonly_var[var] || (members.count(st) && readonly_members[st] == members[st]);
    if (out.size() <= b) out.resize(b + 1, false);
    if (!ro) out[b] = true;
  }
  return writable_[k.spirv] = out;
}

VkPipeline Pipelines::get(const Kernel& k, const std::vector<uint32_t>& spec, uint32_t bindings) {
  auto key = std::make_tuple(k.spirv, spec, bindings);
  auto it = pipelines_.find(key);
  if (it != pipelines_.end()) return it->second;
  std::vector<VkSpecializationMapEntry> entries(spec.size());
  for (uint32_t i = 0; i < spec.size(); ++i) entries[i] = {i, i * 4u, 4};
  VkSpecializationInfo si{static_cast<uint32_t>(entries.size()), entries.data(), spec.size() * 4, spec.data()};
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module(k);
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = spec.empty() ? nullptr : &si;
  ci.layout = layout(bindings);
  const bool stats = !ctx_.limits().pipeline_stats.empty();
  if (stats) ci.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
  VkPipeline p = VK_NULL_HANDLE;
  VkResult r =
      fail_pipelines_ ? VK_ERROR_UNKNOWN : vkCreateComputePipelines(ctx_.device(), cache_, 1, &ci, nullptr, &p);
  if (r != VK_SUCCESS) {
    const bool memory = r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY;
    fail_kind(ErrorKind::device, "vulkan: creating the compute pipeline of kernel '", k.name, "' failed: ",
              r == VK_ERROR_UNKNOWN ? "VK_ERROR_UNKNOWN" : result_name(r), " (", static_cast<int>(r), ")",
              fail_pipelines_ ? " [injected by EDGETRAIN_VK_FAULT=pipeline]" : "",
              memory ? "; the device ran out of memory compiling it"
                     : "; the driver could not compile this shader for this device (update the driver, or use "
                       "another backend)");
  }
  pipelines_[key] = p;
  if (stats) write_stats(k, spec, p);
  ctx_.throw_if_messages(k.name);
  return p;
}

// One line per executable of pipeline p: "kernel spec=[...] executable: name=value ...".
void Pipelines::write_stats(const Kernel& k, const std::vector<uint32_t>& spec, VkPipeline p) {
  auto props_fn = reinterpret_cast<PFN_vkGetPipelineExecutablePropertiesKHR>(
      ctx_.device_proc("vkGetPipelineExecutablePropertiesKHR"));
  auto stats_fn = reinterpret_cast<PFN_vkGetPipelineExecutableStatisticsKHR>(
      ctx_.device_proc("vkGetPipelineExecutableStatisticsKHR"));
  FILE* f = std::fopen(ctx_.limits().pipeline_stats.c_str(), "a");
  if (!props_fn || !stats_fn || !f) {
    if (f) std::fclose(f);
    return;
  }
  VkPipelineInfoKHR pi{VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR};
  pi.pipeline = p;
  uint32_t n = 0;
  props_fn(ctx_.device(), &pi, &n, nullptr);
  std::vector<VkPipelineExecutablePropertiesKHR> execs(n, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR});
  props_fn(ctx_.device(), &pi, &n, execs.data());
  for (uint32_t e = 0; e < n; ++e) {
    std::fprintf(f, "%s spec=[", k.name);
    for (size_t i = 0; i < spec.size(); ++i) std::fprintf(f, "%s%u", i ? "," : "", spec[i]);
    std::fprintf(f, "] %s:", execs[e].name);
    VkPipelineExecutableInfoKHR ei{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR};
    ei.pipeline = p;
    ei.executableIndex = e;
    uint32_t m = 0;
    stats_fn(ctx_.device(), &ei, &m, nullptr);
    std::vector<VkPipelineExecutableStatisticKHR> st(m, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR});
    stats_fn(ctx_.device(), &ei, &m, st.data());
    for (const auto& s : st) {
      std::fprintf(f, " %s=", s.name);
      switch (s.format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: std::fprintf(f, "%u", s.value.b32); break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
          std::fprintf(f, "%lld", static_cast<long long>(s.value.i64));
          break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
          std::fprintf(f, "%llu", static_cast<unsigned long long>(s.value.u64));
          break;
        default: std::fprintf(f, "%g", s.value.f64); break;
      }
    }
    std::fprintf(f, "\n");
  }
  std::fclose(f);
}

}  // namespace edgetrain::vk
