// How an op becomes WebGPU work: an encoder turns one validated OpCall into one or more Dispatches of
// embedded WGSL kernels (the same shape as src/vulkan/kernel.h). The runtime (context.cpp, program.cpp)
// owns the device, buffers, pipelines and bind groups, and checks every dispatch's grid against the device
// limit; encoders (ops_<family>.cpp) only choose kernels, override constants, parameters and grid sizes.
//
// Bindings: unlike Vulkan, a WebGPU dispatch may not bind one buffer twice when either binding is
// writable, so each Dispatch lists its bindings explicitly, in @binding order (0, 1, 2, ...), all in
// @group(0). An in-place op binds the shared buffer once, read_write, and its kernel reads and writes it
// there (a variant chosen with an override constant; the unused binding gets a 16-byte dummy).
// Scalars: float arguments reach kernels as indices into the program's scalar block (a read-only storage
// array<f32>: slots first, then the call constants) so a new learning rate is a queue write before the
// replay, never a re-record. Static per-dispatch parameters (sizes, strides, those indices) go into a
// uniform block written once at finalize (WebGPU has no push constants).
// Consecutive dispatches in one compute pass see each other's writes (WebGPU orders them).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/gpu_encode.h"
#include "edgetrain/backend.h"

namespace edgetrain::wg {

struct Kernel {
  const char* name;  // shader file stem, e.g. "gemm"
  const char* wgsl;  // embedded source (kWgsl_<name> from <name>.wgsl.h)
  // Compiled behind the subgroup-matrix first line (program.cpp): the extensions and the adapter's shape.
  bool subgroup_matrix = false;
};
#define ET_WG_KERNEL(stem) (::edgetrain::wg::Kernel{#stem, kWgsl_##stem})

enum class Src : uint8_t { input, output, scratch, pooled, scalars, params, dummy };
enum class Access : uint8_t { read, read_write, uniform };

struct Bind {
  Src src;
  int index;  // input/output/scratch number; unused otherwise
  Access access;
};

struct Dispatch {
  Kernel kernel;
  std::vector<std::pair<std::string, double>> consts;  // WGSL override constants
  std::vector<Bind> binds;                             // @binding(i) = binds[i]
  std::vector<uint8_t> params;                         // uniform bytes (4-byte fields)
  uint32_t groups[3] = {1, 1, 1};

  explicit Dispatch(Kernel k) : kernel(k) {}
  Dispatch& in(int i) { return bind({Src::input, i, Access::read}); }
  Dispatch& out(int i) { return bind({Src::output, i, Access::read_write}); }
  Dispatch& scratch(int i, Access a = Access::read_write) { return bind({Src::scratch, i, a}); }
  Dispatch& pooled(Access a = Access::read_write) { return bind({Src::pooled, 0, a}); }
  Dispatch& scalars() { return bind({Src::scalars, 0, Access::read}); }
  Dispatch& dummy() { return bind({Src::dummy, 0, Access::read}); }
  // Binds the uniform parameter block (fill it with arg()).
  Dispatch& uniform() { return bind({Src::params, 0, Access::uniform}); }
  Dispatch& bind(Bind b) {
    binds.push_back(b);
    return *this;
  }
  Dispatch& constant(const std::string& name, double v) {
    consts.emplace_back(name, v);
    return *this;
  }
  template <typename T>
  Dispatch& arg(const T& v) {
    static_assert(sizeof(T) == 4, "uniform fields are u32, i32 or f32");
    size_t o = params.size();
    params.resize(o + 4);
    std::memcpy(params.data() + o, &v, 4);
    return *this;
  }
  Dispatch& arg(const gpu::Dims4& v) {  // a vec4<u32>
    for (uint32_t x : v.d) arg(x);
    return *this;
  }
};

// The kernel-path switches, read from the environment once when the backend starts.
struct Tuning {
  // EDGETRAIN_WG_GEMM_BIG: gemm_big.wgsl (128x128 tiles) "0" never, "all" for every product (to test tile
  // edges on small shapes); otherwise for products of at least 128 x 128 x 64. The large 4-bit GEMMs follow.
  gpu::Force gemm_big = gpu::Force::automatic;
  // EDGETRAIN_WG_GEMM_SPLITK: split-K of gemm_big.wgsl "0" never, "all" up to 4 slices wherever allowed (to
  // test the edges); otherwise deep products with few output tiles (see ops_gemm.cpp).
  gpu::Force split_k = gpu::Force::automatic;
  // EDGETRAIN_WG_COOPMAT: gemm_coop.wgsl (subgroup matrices) for products with the f16 flag "0" never, "all"
  // for every one (tests; software adapters too); otherwise those of at least 64 x 64 x 64 on a hardware adapter.
  gpu::Force coopmat = gpu::Force::automatic;
  static Tuning from_env();
};

// What an encoder sees besides the call: float_index, the grid and workgroup limits (gpu::EncodeLimits;
// WebGPU has one per-dimension grid limit), and the rest of the device's limits and switches.
struct EncodeContext : gpu::EncodeLimits {
  uint32_t max_size_x = 256;           // maxComputeWorkgroupSizeX
  uint64_t max_binding_bytes = 1u << 27;  // maxStorageBufferBindingSize
  uint32_t matrix = 0;            // the subgroup-matrix shape (TM = TN = TK) for gemm_coop.wgsl; 0: none
  bool software = false;          // a CPU adapter (lavapipe, SwiftShader): its matrix units are emulated
  Tuning tuning;
  // Largest power of two <= want that the device allows as a 1-D workgroup size.
  uint32_t wg_size(uint32_t want) const { return gpu::pow2_at_most(want, std::min(max_invocations, max_size_x)); }
};

struct Encoded {
  std::vector<Dispatch> dispatches;
  std::vector<size_t> scratch_bytes;  // per-call scratch buffers, zero-filled once at finalize
  // Bytes of the program's pooled scratch this call needs (0: none). One buffer, as large as the largest
  // request, serves every call: calls run one after another, so its contents are only valid within the
  // call that writes them (split-K's partial sums).
  size_t pooled_scratch_bytes = 0;
};

using Encoder = void (*)(const OpCall& call, const EncodeContext& ctx, Encoded& out);
#include "core/gpu_encoders.inc"  // encode_<op> of every op, encoder_for(op), the shared helpers
constexpr uint32_t kNanBits = 0x7fc00000u;  // a quiet NaN, passed in uniforms (WGSL has no NaN literal)

// The elementwise.wgsl dispatch of an op (ops_elementwise.cpp); kind is the kernel's OP code (also used by
// silu_mul and its backward, of the llama family).
void elementwise_map(const OpCall& c, const EncodeContext& ctx, Encoded& out, uint32_t kind);

// A strided dense GEMM dispatch of gemm.wgsl (ops_gemm.cpp): C[b,i,j] = alpha * sum_c A(i,c) B(c,j)
// (+ bias[j]) (+ C). Bindings: A, B, bias (or dummy), C, scalars, params.
struct GemmShape {
  uint32_t M, N, K, batch = 1;
  uint32_t a_si, a_sc, b_sc, b_sj;
  uint32_t a_batch = 0, b_batch = 0, c_batch = 0;
  bool bias = false, accumulate = false;
  bool f16 = false;      // operands rounded to fp16 (the f16 flag of ops.inc)
  int alpha_index = -1;  // scalar-block index of alpha; -1 means alpha = 1
  uint32_t kslice = 0;   // split-K (gemm_big.wgsl): contraction per z slice; 0: not split
};
// Appends the product g: one GEMM dispatch, or (split-K, gemm_big.wgsl) the sliced product into the pooled
// scratch and gemm_splitk_reduce.wgsl.
void append_gemm(const GemmShape& g, Bind a, Bind b, Bind bias, Bind c, const EncodeContext& ctx, Encoded& out);
// Whether append_gemm runs the large-tile kernel (gemm_big.wgsl) for g (Tuning::gemm_big).
bool big_gemm(const GemmShape& g, const EncodeContext& ctx);
// Whether append_gemm runs g on subgroup matrices (gemm_coop.wgsl; Tuning::coopmat).
bool coop_gemm(const GemmShape& g, const EncodeContext& ctx);

}  // namespace edgetrain::wg

