// How an op becomes Vulkan work: an encoder turns one validated OpCall into one or more Dispatches of
// embedded SPIR-V kernels. The runtime (context.cpp, devices.cpp, backend.cpp, program.cpp) owns devices,
// memory, pipelines and command buffers, and checks every dispatch's grid against the device limits;
// encoders (ops_<family>.cpp) only choose kernels, constants and grid sizes.
//
// Binding convention, the same for every kernel, so shaders and encoders agree without tables:
//   set 0, binding i            = call input i (an absent optional input is bound to a 16-byte dummy),
//   binding n_in + j            = call output j,
//   binding n_in + n_out        = the program's scalar block (float[]: slots first, then constants),
//   binding n_in + n_out + 1 + s = scratch buffer s of this call (Encoded::scratch_bytes), if any,
//   then the program's pooled scratch when the call asks for it (Encoded::pooled_scratch_bytes).
// All are storage buffers. Float arguments reach shaders as indices into the scalar block (passed in push
// constants), so a new learning rate or bias correction is a write to that block, never a re-record.
// The runtime puts a full compute->compute memory barrier between the dispatches of one call, and before a
// dispatch that reads a buffer written since the last barrier or writes one read or written since
// (program.cpp): a dispatch writes its call's outputs and whatever its kernel binds where it declares a
// writable buffer, and reads the rest of what it binds.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/gpu_encode.h"
#include "edgetrain/backend.h"
#include "vulkan/coop_khr.h"

namespace edgetrain::vk {

struct Kernel {
  const char* name;       // shader file stem, e.g. "linear_dw"
  const uint32_t* spirv;  // embedded words (kSpv_<name> from <name>.spv.h)
  size_t words;
};
#define ET_VK_KERNEL(stem) (::edgetrain::vk::Kernel{#stem, kSpv_##stem, sizeof(kSpv_##stem) / sizeof(uint32_t)})

struct Dispatch {
  explicit Dispatch(Kernel k, std::vector<uint32_t> specialization = {})
      : kernel(k), spec(std::move(specialization)) {
    push.reserve(128);  // at most 128 bytes of push constants (program.cpp checks): arg() never reallocates
  }
  Kernel kernel;
  std::vector<uint32_t> spec;   // specialization constants, constant_id 0, 1, 2, ...
  std::vector<uint8_t> push;    // push-constant bytes (<= 128)
  uint32_t groups[3] = {1, 1, 1};
  // What it writes in the program's pooled scratch (program.cpp), where it says (pooled_known): bytes
  // [pooled_begin, pooled_end); a dispatch that binds the pooled scratch and does not say may write all of it.
  bool pooled_known = false;
  uint64_t pooled_begin = 0, pooled_end = 0;
  // A staging dispatch (the tensor-core GEMMs' operand conversion) says which of its call's bindings it
  // reads: what it leaves in its pooled range is a function of those, its kernel, spec and push constants
  // alone, so program.cpp skips it where the same staging left that range and nothing wrote either since.
  // Its first stage_bind_specs specialization constants are binding numbers: calls bind differently, so
  // those are compared through the ranges the bindings name rather than by number.
  std::vector<uint32_t> stage_reads;
  uint32_t stage_bind_specs = 0;
  // A dispatch of the call before, moved into this call's list by a fusion (fuse_low_rank_update,
  // ops_gemm.h): it binds that call's descriptor set, its binding numbers are that call's.
  bool binds_call_before = false;
  // Appends a POD value to the push constants (keep std430-compatible order: 4-byte fields).
  template <typename T>
  Dispatch& arg(const T& v) {
    static_assert(sizeof(T) % 4 == 0, "push constants are 4-byte fields");
    size_t o = push.size();
    push.resize(o + sizeof(T));
    std::memcpy(push.data() + o, &v, sizeof(T));
    return *this;
  }
};

// The kernel-path switches, read from the environment once when the backend starts (Context). They force
// a path to measure it or to test its edges on small shapes; docs/PERFORMANCE.md has the measurements.
struct Tuning {
  gpu::Force gemm_big = gpu::Force::automatic;  // EDGETRAIN_VK_GEMM_BIG: the 128x128-tile fp32 and 4-bit GEMMs
  gpu::Force split_k = gpu::Force::automatic;   // EDGETRAIN_VK_GEMM_SPLITK: split-K of gemm_big and gemm_coop
  gpu::Force coopmat = gpu::Force::automatic;   // EDGETRAIN_VK_COOPMAT: the tensor-core GEMMs ("0": device features off)
  gpu::Force cm2 = gpu::Force::automatic;       // EDGETRAIN_VK_CM2: cooperative matrices 2 (Limits::cm2)
  // EDGETRAIN_VK_COOP_KHR: "all" takes VK_KHR_cooperative_matrix instead of NVIDIA's extension (NVIDIA's coop
  // attention and cm2 then go too); "0" keeps gemm_coop.comp beside cooperative matrices 2 (was the default).
  gpu::Force coop_khr = gpu::Force::automatic;
  static Tuning from_env();
};

// What an encoder sees besides the call: float_index, the grid and workgroup limits (gpu::EncodeLimits),
// and the rest of the device's limits and switches that kernels depend on.
struct EncodeContext : gpu::EncodeLimits {
  uint32_t subgroup_size = 32;            // device subgroup size (e.g. 32 on NVIDIA, 4..64 on CPUs)
  bool coopmat = false;                   // fp16 cooperative matrices usable (Limits::coopmat)
  bool cm2 = false;                       // cooperative matrices 2 and their kernels (Limits::cm2)
  KhrCoopShape coop_khr;                  // VK_KHR_cooperative_matrix's shape where NVIDIA's is absent
  // Their fp32 accumulators' element layout (coop_layout.h), which the tensor-core attention kernels need.
  bool coop_acc_known = false;
  uint32_t coop_acc_rows_high = 0, coop_acc_columns = 0;
  uint32_t multiprocessors = 0;           // Limits::multiprocessors (0: unknown)
  uint64_t max_storage_range = 1u << 27;  // maxStorageBufferRange: the largest buffer a binding may cover
  Tuning tuning;
  bool low_rank_update_follows = false;   // the next call may join this one's GEMM (low_rank_update_pair)
};

struct Encoded {
  std::vector<Dispatch> dispatches;
  std::vector<size_t> scratch_bytes;  // per-call scratch buffers (bound after the scalar block)
  // Bytes of the program's pooled scratch this call needs (0: none), bound after its own scratch buffers.
  // One buffer, as large as the largest request, serves every call of the program: calls run one after
  // another, so its contents are only valid within the call that writes them.
  size_t pooled_scratch_bytes = 0;
};

using Encoder = void (*)(const OpCall& call, const EncodeContext& ctx, Encoded& out);
#include "core/gpu_encoders.inc"  // encode_<op> of every op, encoder_for(op), the shared helpers

// Enough workgroups of `wg` invocations for `threads` invocations, folded by grid_1d().
inline void threads_grid(Dispatch& d, uint64_t threads, uint32_t wg, const EncodeContext& ctx) {
  grid_1d(std::max<uint64_t>(1, ceil_div(threads, wg)), ctx, d.groups);
}

// Workgroup size of the tree-reduction kernels (spec constant 0): a power of two, at most 256, within
// the device's invocation limit and with room for two float arrays in shared memory.
inline uint32_t reduce_wg(const EncodeContext& ctx) {
  uint32_t wg = 256;
  while (wg > 1 && (wg > ctx.max_invocations || 2 * wg * 4 > ctx.max_shared_bytes)) wg /= 2;
  return wg;
}

constexpr uint32_t kWG = 128;  // local size of the one-element-per-invocation kernels

}  // namespace edgetrain::vk
