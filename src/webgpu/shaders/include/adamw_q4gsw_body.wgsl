// The body of adamw_q4gsw_step.wgsl and adamw_q4gsw_step_vec4.wgsl, which differ only in how a thread reads
// and writes its four latents, moments and gradients of one row (load_row / store_row, bindings 0..3: four
// scalar accesses, or one vec4 where K % 4 == 0). One thread per W_4X8 word: rows 2r and 2r + 1 at
// k = 4k4 .. 4k4 + 3, threads running along k so that neighbours read neighbouring latents. Per element:
// adamw_update (adamw.wgsl), then the new latent clamped into [-8.5s, 7.5s] and its code
// (clamp_to_code_range, code_of: q4gsw_code.wgsl); rows past N and k past K are code 8. Eight storage buffers: WebGPU's
// guaranteed limit per stage.
struct Params {
  N: u32, K: u32, gs: u32, N8: u32, K4: u32, threads: u32,  // threads = 4 N8 row pairs x K4
  lr: u32, b1: u32, b2: u32, eps: u32, wd: u32, bc1: u32, bc2: u32,  // scalar-block indices
  scaled: u32, pad0: u32, pad1: u32,
}
// One row's four elements at k = 4k4 ..: latent, m, v, gradient (lanes past `valid` are unused).
struct Row { l: vec4<f32>, m: vec4<f32>, v: vec4<f32>, g: vec4<f32> }
@group(0) @binding(4) var<storage, read> S: array<f32>;
@group(0) @binding(5) var<storage, read> GS: array<f32>;  // grad_scale (a dummy when absent)
@group(0) @binding(6) var<storage, read_write> Wout: array<u32>;
@group(0) @binding(7) var<storage, read> scalars: array<f32>;
@group(0) @binding(8) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let t = gid.y * nwg.x * 64u + gid.x;
  if (t >= p.threads) { return; }
  let k4 = t % p.K4;
  let r = t / p.K4;
  let hp = adamw_hyper();
  let valid = min(p.K - 4u * k4, 4u);
  var word = 0x88888888u;
  for (var h = 0u; h < 2u; h++) {
    let n = 2u * r + h;
    if (n >= p.N) { break; }
    let s = S[(4u * k4 / p.gs) * p.N + n];  // group_size is a multiple of 4: one group per word
    let i0 = n * p.K + 4u * k4;
    var row = load_row(i0, valid);
    if (p.scaled != 0u) { row.g = row.g * GS[0]; }
    for (var b = 0u; b < valid; b++) {
      let u = adamw_update(hp, row.l[b], row.m[b], row.v[b], row.g[b]);
      let x = u.x;
      row.l[b] = clamp_to_code_range(x, s);
      row.m[b] = u.y;
      row.v[b] = u.z;
      let sh = 8u * b + 4u * h;
      word = (word & ~(0xFu << sh)) | (code_of(x, s) << sh);  // the clamped latent's code too
    }
    store_row(i0, valid, row);
  }
  Wout[4u * (k4 * p.N8 + r / 4u) + r % 4u] = word;
}
