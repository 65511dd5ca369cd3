// write_rows: out[row_offset + r, :] = x[r, :] for the rows whose destination lies in [0, S), in place
// (other bytes of out keep their contents). row_offset is a per-replay scalar, truncated toward zero; a NaN
// offset writes nothing. One invocation per output word, so 1-byte dtypes (ES = 1) never race on a word:
// invocation j owns word (floor(off * row_bytes / 4) + j) and merges the new bytes into it.
override ES: u32 = 4u;  // element size in bytes: 4 or 1
override WG: u32 = 64u;
struct Params { R: u32, S: u32, C: u32, off_idx: u32, threads: u32, out_words: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<storage, read> X: array<u32>;
@group(0) @binding(1) var<storage, read_write> O: array<u32>;
@group(0) @binding(2) var<storage, read> scalars: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

fn x_byte(b: u32) -> u32 { return (X[b / 4u] >> (8u * (b % 4u))) & 0xFFu; }

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let j = gid.y * nwg.x * WG + gid.x;
  if (j >= p.threads) { return; }
  let raw = scalars[p.off_idx];
  if (raw != raw) { return; }
  // Clamped so the row arithmetic below stays in i32; any offset outside this range drops every row.
  let off = i32(clamp(trunc(raw), -f32(p.R) - 1.0, f32(p.S) + 1.0));
  if (ES == 4u) {
    let r = j / p.C;
    let dst = off + i32(r);
    if (dst < 0 || dst >= i32(p.S)) { return; }
    O[u32(dst) * p.C + j % p.C] = X[j];
    return;
  }
  let rb = i32(p.C);  // row bytes
  let base = off * rb;  // first destination byte (may be negative)
  let w = (base >> 2u) + i32(j);  // arithmetic shift: floor division by 4
  if (w < 0 || w >= i32(p.out_words)) { return; }
  let end = i32(p.S) * rb;
  let src_end = i32(p.R) * rb;
  var word = O[w];
  var changed = false;
  for (var b = 0; b < 4; b++) {
    let ob = w * 4 + b;
    let xb = ob - base;
    if (ob < end && xb >= 0 && xb < src_end) {
      let sh = 8u * u32(b);
      word = (word & ~(0xFFu << sh)) | (x_byte(u32(xb)) << sh);
      changed = true;
    }
  }
  if (changed) { O[w] = word; }
}
