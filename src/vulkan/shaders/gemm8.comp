// gemm with 8x8 outputs per thread (128x128 workgroup tiles); the kernel is gemm_body.glsl.
// The tile is a compile-time constant (not a spec constant) so drivers fully unroll the register tile
// and keep it in registers.
#version 450
#extension GL_GOOGLE_include_directive : require
#define ET_TILE 8u
#include "gemm_body.glsl"
