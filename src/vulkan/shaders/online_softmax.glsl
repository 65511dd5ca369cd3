// The online softmax of a row (running max m and sum l of exp(x - m)) and its workgroup merge, shared by
// fused_ce.comp and logsumexp_rows.comp. The kernel declares the specialization constant WG (its 1-D
// workgroup size, a power of two) before including this file.
shared float os_m[WG];
shared float os_l[WG];

// Adds x to the pair (m, l), rescaling the sum when x is the new maximum.
void online_add(inout float m, inout float l, float x) {
  if (x > m) {
    l = l * exp(m - x) + 1.0;
    m = x;
  } else {
    l += exp(x - m);
  }
}

// Every lane's pair merged in a fixed tree order, returned to all as (max, sum). Contains barriers: call it
// from uniform control flow.
vec2 wg_online_merge(float m, float l, uint lane) {
  os_m[lane] = m;
  os_l[lane] = l;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (lane < s) {
      float ma = os_m[lane], mb = os_m[lane + s], mm = max(ma, mb);
      os_l[lane] = os_l[lane] * exp(ma - mm) + os_l[lane + s] * exp(mb - mm);
      os_m[lane] = mm;
    }
    barrier();
  }
  const vec2 r = vec2(os_m[0], os_l[0]);
  barrier();  // every lane has read r before a later call overwrites the arrays
  return r;
}
