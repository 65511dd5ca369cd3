// The tensor-core GEMM through VK_NV_cooperative_matrix (NVIDIA; Debian 12's glslc compiles it): the kernel
// is gemm_coop_body.glsl, which explains it; khr/gemm_coop_khr.comp is the same kernel through
// VK_KHR_cooperative_matrix.
#version 450
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require

#include "gemm_coop_body.glsl"
