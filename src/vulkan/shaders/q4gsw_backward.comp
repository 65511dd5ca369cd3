// q4gsw_backward with 64x64 workgroup tiles, 4x4 outputs per thread. The kernel is q4gsw_backward_body.glsl.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#define ET_TILE 4
#include "q4gsw_backward_body.glsl"
