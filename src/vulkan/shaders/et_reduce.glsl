// Workgroup tree reductions over shared memory: a fixed pairing order, so results are deterministic
// (same bits every run) on a given device. Needs: local_size_x = WG (a power of two, spec constant 0)
// declared before inclusion as `layout(local_size_x_id = 0) in;` with `const uint WG` bound to it.

shared float et_red[WG];
shared float et_red2[WG];

float et_wg_sum(float v) {
  uint l = gl_LocalInvocationID.x;
  et_red[l] = v;
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1) {
    if (l < s) et_red[l] += et_red[l + s];
    barrier();
  }
  float r = et_red[0];
  barrier();
  return r;
}

// Online-softmax state (running max m, running sum l of exp(x - m)), merged pairwise.
void et_merge(inout float m, inout float l, float m2, float l2) {
  if (l2 == 0.0 && !et_isnan(l2)) return;  // the other side saw no element
  if (l == 0.0 && !et_isnan(l)) {
    m = m2;
    l = l2;
    return;
  }
  float mx = max(m, m2);
  l = l * exp(m - mx) + l2 * exp(m2 - mx);
  m = mx;
}

void et_wg_softmax_state(inout float m, inout float l) {
  uint lid = gl_LocalInvocationID.x;
  et_red[lid] = m;
  et_red2[lid] = l;
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1) {
    if (lid < s) {
      float ma = et_red[lid], la = et_red2[lid];
      et_merge(ma, la, et_red[lid + s], et_red2[lid + s]);
      et_red[lid] = ma;
      et_red2[lid] = la;
    }
    barrier();
  }
  m = et_red[0];
  l = et_red2[0];
  barrier();
}
