// The tensor-core GEMM (see gemm_coop_body.glsl), staging shared memory as uvec4 (8 halves per store).
#version 450
#extension GL_GOOGLE_include_directive : require
#define ET_VEC_SHARED 1
#include "gemm_coop_body.glsl"
