// Vulkan encoders of the optimizer helpers: grad_norm (any number of inputs, deterministic) and clip_coef.
// Kernels: shaders/grad_norm.comp, shaders/clip_coef.comp.
//
// grad_norm's inputs are bindings 0..n_in-1 and its output and scratch follow them, so no fixed binding
// number can name "input i" or "the output" for every call. The encoder therefore keeps copies of the
// grad_norm SPIR-V with the Binding decorations rewritten (0..7 -> a group of up to 8 inputs, 8 -> scratch,
// 9 -> output), one per (n_in, group), each with its own kernel name so pipeline caches keep them apart.
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "clip_coef.spv.h"
#include "grad_norm.spv.h"
#include "vulkan/kernel.h"

namespace edgetrain::vk {
namespace {

constexpr uint32_t kSpvOpDecorate = 71;
constexpr uint32_t kSpvDecorationBinding = 33;

// A copy of `k` whose binding b is rebound to remap[b] (b < remap.size()), named `name`. Copies live for
// the process (a handful per model shape).
Kernel rebound(const Kernel& k, const std::vector<uint32_t>& remap, const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::vector<uint32_t>> words;  // map nodes keep names and words in place
  std::lock_guard<std::mutex> lock(mu);
  auto it = words.find(name);
  if (it == words.end()) {
    std::vector<uint32_t> w(k.spirv, k.spirv + k.words);
    for (size_t i = 5; i < w.size();) {  // after the 5-word header: instructions
      uint32_t count = w[i] >> 16, opcode = w[i] & 0xffff;
      ET_CHECK(count > 0 && i + count <= w.size(), "vulkan: malformed SPIR-V in kernel ", k.name);
      if (opcode == kSpvOpDecorate && count == 4 && w[i + 2] == kSpvDecorationBinding) {
        uint32_t b = w[i + 3];
        ET_CHECK(b < remap.size(), "vulkan: kernel ", k.name, " uses unexpected binding ", b);
        w[i + 3] = remap[b];
      }
      i += count;
    }
    it = words.emplace(name, std::move(w)).first;
  }
  return Kernel{it->first.c_str(), it->second.data(), it->second.size()};
}

// Elements per workgroup of the sums of squares (each invocation sums CHUNK / WG of them first), and the
// inputs one dispatch takes (grad_norm.comp's bindings 0..7).
constexpr uint32_t kNormChunk = 4096, kNormGroup = 8;

}  // namespace

void encode_grad_norm(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  auto n_in = static_cast<uint32_t>(c.in.size());
  uint32_t out_binding = n_in, scratch_binding = n_in + 2;  // the scalar block sits at n_in + 1
  uint32_t wg = reduce_wg(ctx);
  const Kernel base = ET_VK_KERNEL(grad_norm);
  uint64_t total = 0;
  std::vector<uint32_t> group;  // the non-empty inputs of the next dispatch
  auto flush = [&] {
    if (group.empty()) return;
    std::vector<uint32_t> remap(kNormGroup + 2, group[0]);  // unused input bindings alias the first
    std::string name = "grad_norm#" + std::to_string(n_in);
    for (size_t j = 0; j < group.size(); ++j) {
      remap[j] = group[j];
      name += '_';
      name += std::to_string(group[j]);
    }
    remap[kNormGroup] = scratch_binding;
    remap[kNormGroup + 1] = out_binding;
    Dispatch d(rebound(base, remap, name), {wg, 0u, kNormChunk});
    uint32_t n[kNormGroup] = {}, first[kNormGroup] = {}, groups = 0;
    for (size_t j = 0; j < group.size(); ++j) {
      n[j] = u32(c.in[group[j]].numel(), c);
      first[j] = groups;
      groups += (n[j] + kNormChunk - 1) / kNormChunk;
    }
    d.arg(u32(total, c)).arg(static_cast<uint32_t>(group.size()));
    for (uint32_t v : n) d.arg(v);
    for (uint32_t v : first) d.arg(v);
    grid_1d(groups, ctx, d.groups);
    out.dispatches.push_back(d);
    total += groups;
    group.clear();
  };
  for (uint32_t i = 0; i < n_in; ++i) {
    if (c.in[i].numel() == 0) continue;
    group.push_back(i);
    if (group.size() == kNormGroup) flush();
  }
  flush();
  std::vector<uint32_t> remap(kNormGroup + 2, 0u);
  remap[kNormGroup] = scratch_binding;
  remap[kNormGroup + 1] = out_binding;
  Dispatch fin(rebound(base, remap, "grad_norm#" + std::to_string(n_in) + "_final"), {wg, 1u, kNormChunk});
  fin.arg(0u).arg(0u).arg(u32(total, c));
  for (uint32_t i = 1; i < 2 * kNormGroup; ++i) fin.arg(0u);
  out.dispatches.push_back(fin);
  out.scratch_bytes.push_back(std::max<size_t>(16, total * sizeof(float)));
}

void encode_clip_coef(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  (void)c;
  Dispatch d(ET_VK_KERNEL(clip_coef));
  d.arg(ctx.float_index[0]);
  out.dispatches.push_back(d);
}

}  // namespace edgetrain::vk
