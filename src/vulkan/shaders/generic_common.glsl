// Helpers shared by the generic kernels (elementwise, copy, reduce, llama, optim): the folded 1-D grid of
// grid_1d(), bit-exact NaN/inf tests (drivers may fold isnan() away without float controls), and byte
// lanes of bool/u8 tensors stored as packed 32-bit words.

// The linear workgroup id of a grid folded into x*y by grid_1d().
uint et_group() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }
// The linear invocation id over the folded grid.
uint et_thread() { return et_group() * gl_WorkGroupSize.x + gl_LocalInvocationID.x; }

bool et_isnan(float v) { return (floatBitsToUint(v) & 0x7fffffffu) > 0x7f800000u; }
bool et_isinf(float v) { return (floatBitsToUint(v) & 0x7fffffffu) == 0x7f800000u; }
#define ET_NAN uintBitsToFloat(0x7fc00000u)
#define ET_INF uintBitsToFloat(0x7f800000u)

uint et_byte(uint word, uint lane) { return (word >> (8u * lane)) & 0xffu; }

// Merges the low `count` bytes of `fresh` with the upper bytes of `old` (the tail word of a 1-byte tensor
// whose size is not a multiple of 4: bytes past the tensor keep whatever they held).
uint et_keep_tail(uint fresh, uint old, uint count) {
  if (count >= 4u) return fresh;
  uint mask = (1u << (8u * count)) - 1u;
  return (fresh & mask) | (old & ~mask);
}

// Index of an element of a rank-4 (leading dims padded with 1) output, unravelled and dotted with the
// strides of a source (0 where the source is broadcast).
uint et_offset(uint i, uvec4 dims, uvec4 strides) {
  uint off = 0u;
  for (int d = 3; d >= 0; --d) {
    uint n = dims[d];
    uint c = i % n;
    i /= n;
    off += c * strides[d];
  }
  return off;
}
