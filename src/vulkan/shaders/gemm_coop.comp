// The tensor-core GEMM (see gemm_coop_body.glsl), staging shared memory as float16_t.
#version 450
#extension GL_GOOGLE_include_directive : require
#define ET_VEC_SHARED 0
#include "gemm_coop_body.glsl"
