// Helpers shared by the Vulkan compute kernels: folded 2-D grid ids, NaN, W_4X8 nibble access.
#ifndef EDGETRAIN_COMMON_GLSL
#define EDGETRAIN_COMMON_GLSL

// Linear workgroup id of a grid folded by grid_1d (kernel.h): y * nx + x.
uint linear_group_id() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }

float nan_f32() { return uintBitsToFloat(0x7fc00000u); }

// Code of row n (parity odd_n) at k offset byte_k (0..3) of one W_4X8 word.
uint q4_nibble(uint word, uint byte_k, uint odd_n) { return (word >> (8u * byte_k + 4u * odd_n)) & 0xFu; }
float q4_value(uint code) { return float(int(code) - 8); }

#endif
