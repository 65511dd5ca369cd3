// linear_q4gsw_backward with 64x64 workgroup tiles, 4x4 outputs per thread.
// The kernel is linear_q4gsw_backward_body.glsl on the main loop of gemm_core.glsl.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#define ET_TILE 4
#include "linear_q4gsw_backward_body.glsl"
