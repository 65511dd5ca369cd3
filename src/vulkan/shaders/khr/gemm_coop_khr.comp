// The tensor-core GEMM through VK_KHR_cooperative_matrix (where NVIDIA's is absent, coop_khr.h;
// glslang 15 compiles it, as it does shaders/cm2/): the kernel is gemm_coop_body.glsl with COOP_KHR, its
// fragment shape and subgroup grid specialized from what the device lists (ops_gemm_coop.cpp).
#version 450
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require

#define COOP_KHR 1
#include "gemm_coop_body.glsl"
