// Where a 16 x 16 fp32 cooperative matrix keeps its elements (VK_NV_cooperative_matrix leaves the mapping
// to the implementation): one subgroup loads the matrix whose element (r, c) is r * 16 + c and writes, for
// every lane, each of its elements' values, which are their positions. coop_layout.cpp reads them.
// out[0] = elements per lane; out[1 + lane * 8 + i] = position of element i of lane (i < 8).
#version 450
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
layout(local_size_x = 32) in;
layout(set = 0, binding = 0) buffer Out { float o[]; };

shared float positions[256];

void main() {
  const uint lane = gl_SubgroupInvocationID;
  for (uint e = lane; e < 256u; e += 32u) positions[e] = float(e);
  barrier();
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> m;
  coopMatLoadNV(m, positions, 0, 16, false);
  if (lane == 0u) o[0] = float(m.length());
  for (uint i = 0u; i < m.length() && i < 8u; ++i) o[1u + lane * 8u + i] = m[i];
}
