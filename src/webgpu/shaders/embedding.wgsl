// Index ops. OP 0 embedding: w holds rows first .. first+V-1 of a table of `count` rows; out[i, d] =
// w[idx[i] - first, d] for an index of this part, a NaN row for one outside [0, count), else unwritten; one
// thread per output element. OP 1 gather along `dim` (rank <= 4): out[o] = x[o with coord dim = index[o]],
// NaN when out of range. OP 2 embedding_backward: one thread per column d walks the indices in order and
// adds dout rows into dw[idx[i] - first, d] (indices of this part only), so repeated indices add in a fixed
// order with no atomics.
override OP: u32 = 0u;
override WG: u32 = 64u;
struct Params {
  n: u32, V: u32, D: u32, dim: u32,         // n: threads; V: rows of w (or x.shape[dim]); D: row length
  accumulate: u32, nan_bits: u32,
  count: u32,                                 // embedding: rows of the whole table; backward: indices
  first: u32,                                 // embedding (+ backward): the part's first row
  oshape: vec4<u32>,                          // gather: index/out shape (4-D, front-padded with 1)
  xstride: vec4<u32>,                         // gather: x strides (0 on padded dims)
}
@group(0) @binding(0) var<storage, read> Wx: array<f32>;       // w / x / dout
@group(0) @binding(1) var<storage, read> I: array<i32>;
@group(0) @binding(2) var<storage, read_write> O: array<f32>;  // out / dw
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let t = gid.y * nwg.x * WG + gid.x;
  if (t >= p.n) { return; }
  let nan = bitcast<f32>(p.nan_bits);
  if (OP == 0u) {
    let i = t / p.D;
    let d = t % p.D;
    let v = I[i];
    if (v < 0 || u32(v) >= p.count) {
      O[t] = nan;
    } else if (u32(v) >= p.first && u32(v) - p.first < p.V) {
      O[t] = Wx[(u32(v) - p.first) * p.D + d];
    }
  } else if (OP == 1u) {
    var idx = vec4<u32>(0u);
    var rem = t;
    idx.w = rem % p.oshape.w; rem /= p.oshape.w;
    idx.z = rem % p.oshape.z; rem /= p.oshape.z;
    idx.y = rem % p.oshape.y; rem /= p.oshape.y;
    idx.x = rem;
    let v = I[t];
    var r = nan;
    if (v >= 0 && u32(v) < p.V) {
      idx[p.dim] = u32(v);
      r = Wx[dot(idx, p.xstride)];
    }
    O[t] = r;
  } else {
    let d = t;  // column
    if (p.accumulate == 0u) {
      for (var v = 0u; v < p.V; v++) { O[v * p.D + d] = 0.0; }
    }
    for (var i = 0u; i < p.count; i++) {
      let v = I[i];
      if (v >= 0 && u32(v) >= p.first && u32(v) - p.first < p.V) { O[(u32(v) - p.first) * p.D + d] += Wx[i * p.D + d]; }
    }
  }
}
