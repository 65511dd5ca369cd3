// linear_q4gsw with 4x4 outputs per thread (64x64 workgroup tiles); the kernel is linear_q4gsw_body.glsl.
// The tile is a compile-time constant (not a spec constant) so drivers fully unroll the register tile
// and keep it in registers.
#version 450
#extension GL_GOOGLE_include_directive : require
#define ET_TILE 4u
#include "linear_q4gsw_body.glsl"
