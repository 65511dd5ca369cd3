// What the fp16 tensor-core GEMM (src/vulkan/shaders/gemm_coop.comp) could reach on this device and
// compiler, part by part: gemm_coop's workgroup (256 threads, 8 subgroups, each FM x FN accumulators of
// 16x16 fp32, 64-deep k slices) with the global loads taken away (MODE 1, 2) or everything but the products
// (MODE 0). vk_coop_ceiling.cpp times it; FLOPs = workgroups * iters * NSG subgroups * 4 k steps * FM * FN *
// 2 * 16^3.
//   MODE 0: products only (fragments loaded once before the loop).
//   MODE 1: fragments loaded from workgroup memory at every k step (gemm_coop's rows and pitch).
//   MODE 2: MODE 1 plus gemm_coop's per-slice structure: each invocation stores its part of the next slice
//           (from registers) into workgroup memory between two barriers.
// Built in variants (bench/CMakeLists.txt): FM x FN fragments per subgroup, NSG subgroups (8 as 4 x 2, or 4
// as 2 x 2), rows of uvec4 (gemm_coop's staging) or, with SHARED_HALF, of float16_t.
#version 450
#extension GL_EXT_control_flow_attributes : require
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require

layout(constant_id = 0) const uint MODE = 0;
#ifndef NSG
#define NSG 8
#endif
layout(local_size_x = NSG * 32) in;
layout(set = 0, binding = 0) buffer Out { float o[]; };  // 256 floats
layout(push_constant) uniform Push {
  uint iters;
  uint store;  // 0 (always, from vk_coop_ceiling.cpp): the results are computed, never written
} pc;

#ifndef FM
#define FM 2
#endif
#ifndef FN
#define FN 4
#endif
const uint BK = 64u;
const uint SG_ROWS = NSG / 2u, SG_COLS = 2u;  // subgroups of (16 FM) x (16 FN) each
const uint TILE_M = SG_ROWS * 16u * FM, TILE_N = SG_COLS * 16u * FN, THREADS = NSG * 32u;
#ifdef SHARED_HALF
const uint PITCH = BK + 8u;  // halves
shared float16_t sA[TILE_M * PITCH], sB[TILE_N * PITCH];
#define AT(row, k) ((row) * PITCH + (k))
#define STRIDE PITCH
#else
const uint PITCH = (BK + 8u) / 8u;  // uvec4s
shared uvec4 sA[TILE_M * PITCH], sB[TILE_N * PITCH];
#define AT(row, k) ((row) * PITCH + (k) / 8u)
#define STRIDE PITCH
#endif

#define ACC fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
#define HALF fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>

void store_slice(uint tid, uint salt) {
#ifdef SHARED_HALF
  for (uint i = tid; i < TILE_M * PITCH; i += THREADS) sA[i] = float16_t(float((i ^ salt) & 7u) * 0.125);
  for (uint i = tid; i < TILE_N * PITCH; i += THREADS) sB[i] = float16_t(float((i + salt) & 7u) * 0.125);
#else
  // 0x3000: 0.125 in fp16; the low bits vary so the data is not constant.
  for (uint i = tid; i < TILE_M * PITCH; i += THREADS) sA[i] = uvec4(0x30003000u | ((i ^ salt) & 0x00030003u));
  for (uint i = tid; i < TILE_N * PITCH; i += THREADS) sB[i] = uvec4(0x30003000u | ((i + salt) & 0x00030003u));
#endif
}

void main() {
  const uint tid = gl_LocalInvocationID.x, sg = gl_SubgroupID;
  const uint wm = sg / SG_COLS, wn = sg % SG_COLS;
  store_slice(tid, 0u);
  barrier();
  ACC acc[FM][FN];
  [[unroll]] for (uint i = 0; i < FM; ++i)
    [[unroll]] for (uint j = 0; j < FN; ++j) acc[i][j] = ACC(0.0);
  HALF a[FM], b[FN];
  [[unroll]] for (uint i = 0; i < FM; ++i) coopMatLoadNV(a[i], sA, AT(wm * 16u * FM + i * 16u, 0u), STRIDE, false);
  [[unroll]] for (uint j = 0; j < FN; ++j) coopMatLoadNV(b[j], sB, AT(wn * 16u * FN + j * 16u, 0u), STRIDE, true);

  for (uint it = 0; it < pc.iters; ++it) {
    if (MODE == 2u) {
      barrier();
      store_slice(tid, it);
      barrier();
    }
    [[unroll]] for (uint kk = 0; kk < BK; kk += 16u) {
      if (MODE != 0u) {
        const uint k = (kk + it * 16u) & (BK - 1u);  // depends on it: the loads cannot leave the loop
        [[unroll]] for (uint i = 0; i < FM; ++i)
          coopMatLoadNV(a[i], sA, AT(wm * 16u * FM + i * 16u, k), STRIDE, false);
        [[unroll]] for (uint j = 0; j < FN; ++j)
          coopMatLoadNV(b[j], sB, AT(wn * 16u * FN + j * 16u, k), STRIDE, true);
      }
      [[unroll]] for (uint i = 0; i < FM; ++i)
        [[unroll]] for (uint j = 0; j < FN; ++j) acc[i][j] = coopMatMulAddNV(a[i], b[j], acc[i][j]);
    }
  }
  // A condition the compiler cannot decide keeps the products alive; the buffer holds one tile.
  if (pc.store == 0u) return;
  [[unroll]] for (uint i = 0; i < FM; ++i)
    [[unroll]] for (uint j = 0; j < FN; ++j) coopMatStoreNV(acc[i][j], o, 0u, 16u, false);
}
