// gemm with 64x64 workgroup tiles, 4x4 outputs per thread.
// The kernel is gemm_body.glsl on the main loop of gemm_core.glsl.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#define ET_TILE 4
#include "gemm_body.glsl"
