// linear_q4gsw_backward with 128x128 workgroup tiles, 8x8 outputs per thread (large products on GPUs).
// The kernel is linear_q4gsw_backward_body.glsl on the main loop of gemm_core.glsl.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#define ET_TILE 8
#include "linear_q4gsw_backward_body.glsl"
