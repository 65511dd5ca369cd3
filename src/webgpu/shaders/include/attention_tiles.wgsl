// The tiles of the attention kernels (attention.wgsl, attention_backward.wgsl), the twin of
// src/vulkan/shaders/attention_tiles.glsl: the same override constants, workgroup-memory layout and
// products (tile geometry and its choice: src/core/attention_tiles.h). A workgroup is TY rows of TX = 16
// invocations; invocation (ty, tx) owns rows ty + TY*i (i < RI) of the "A" tile and rows tx + TX*j
// (j < KJ) of the "B" tile of a score tile, and rows ty + TY*i by head-dim vec4 slots tx + TX*q (q < DQ)
// of an output tile. Head-dim tiles (Q, K, V, dout) live in As (A_TILES of them) and Bs (B_TILES), one
// row of HC4 swizzled vec4 slots per query or key (hd_at): HC (16, 32, 64 or 128) values, the head dim's
// and zeros after them, so one pipeline serves every head dim of a capacity; the score tile Xs has a row of
// BR4 swizzled slots per A row (p_at) and also carries the row reductions. The including kernel defines
// fn src(which: u32, i: u32) -> f32, element i of its input buffer number `which`, for load_tile. Loops over
// the register tiles run to the largest tile (RI_MAX, ...) with a test inside: SwiftShader runs them
// faster that way than with an override as the bound.
override WG: u32 = 128u;  // 16 * TY invocations
override RI: u32 = 8u;    // A rows per invocation (A tile: TY * RI rows)
override KJ: u32 = 2u;    // B rows per invocation (B tile: 16 * KJ rows)
override HC: u32 = 64u;   // head-dim capacity of a tile row (>= the head dim)
override SWZ: u32 = 7u;   // swizzle mask of head-dim tile rows (attention_swizzle)
override PSW: u32 = 7u;   // swizzle mask of score tile rows
override A_TILES: u32 = 1u;
override B_TILES: u32 = 1u;
const TX = 16u;
// Register arrays are sized for the largest tiles (attention_tiles.cpp: RI <= 8, KJ <= 4, HC <= 128).
const RI_MAX = 8u;
const KJ_MAX = 4u;
const DQ_MAX = 2u;
override TY: u32 = WG / TX;
override AR: u32 = TY * RI;
override BR: u32 = TX * KJ;
override BR4: u32 = BR / 4u;
override HC4: u32 = HC / 4u;
override DQ: u32 = (HC4 + TX - 1u) / TX;

var<workgroup> As: array<vec4<f32>, A_TILES * AR * HC4>;
var<workgroup> Bs: array<vec4<f32>, B_TILES * BR * HC4>;
var<workgroup> Xs: array<vec4<f32>, AR * BR4>;

fn hd_at(row: u32, slot: u32) -> u32 { return row * HC4 + (slot ^ (row & SWZ)); }
fn p_at(row: u32, slot: u32) -> u32 { return row * BR4 + (slot ^ (row & PSW)); }

// Tile `dst` (0: As, 1: Bs) at offset `at` = the head-dim rows of input buffer `which`, row r at
// base + r * stride floats, for r < nvalid; zeros past the head dim hd and for rows r >= nvalid.
fn load_tile(dst: u32, at: u32, rows: u32, which: u32, base: u32, stride: u32, nvalid: u32, hd: u32, li: u32) {
  for (var e = li; e < rows * HC4; e += WG) {
    let r = e / HC4;
    let s = e - r * HC4;
    var v = vec4<f32>(0.0);
    if (r < nvalid && 4u * s < hd) {
      let o = base + r * stride + 4u * s;
      for (var c = 0u; c < 4u; c++) {
        if (4u * s + c < hd) { v[c] = src(which, o + c); }
      }
    }
    if (dst == 0u) { As[at + hd_at(r, s)] = v; } else { Bs[at + hd_at(r, s)] = v; }
  }
}

// acc[i * KJ_MAX + j] = A[row ty + TY*i] . B[row tx + TX*j] over the head dim (As at aat, Bs at bat).
fn dot_tiles(aat: u32, bat: u32, tx: u32, ty: u32) -> array<f32, 32> {
  var acc: array<f32, 32>;
  for (var s = 0u; s < HC4; s++) {
    var b: array<vec4<f32>, 4>;
    for (var j = 0u; j < KJ_MAX; j++) {
      if (j < KJ) { b[j] = Bs[bat + hd_at(tx + TX * j, s)]; }
    }
    for (var i = 0u; i < RI_MAX; i++) {
      if (i < RI) {
        let a = As[aat + hd_at(ty + TY * i, s)];
        for (var j = 0u; j < KJ_MAX; j++) {
          if (j < KJ) { acc[i * KJ_MAX + j] += dot(a, b[j]); }
        }
      }
    }
  }
  return acc;
}

// acc[i * DQ_MAX + q] += sum_c Xs[row ty + TY*i][c] * Bs[mat + row c][slot tx + TX*q] over the BR columns
// of the score tile. Invocations whose slot lies past the tile row compute on a clamped slot.
fn pv_tiles(acc: ptr<function, array<vec4<f32>, 16>>, mat: u32, tx: u32, ty: u32) {
  for (var c4 = 0u; c4 < BR4; c4++) {
    var m: array<vec4<f32>, 8>;
    for (var k = 0u; k < 4u; k++) {
      for (var q = 0u; q < DQ_MAX; q++) {
        if (q < DQ) { m[k * DQ_MAX + q] = Bs[mat + hd_at(4u * c4 + k, min(tx + TX * q, HC4 - 1u))]; }
      }
    }
    for (var i = 0u; i < RI_MAX; i++) {
      if (i < RI) {
        let pv = Xs[p_at(ty + TY * i, c4)];
        for (var q = 0u; q < DQ_MAX; q++) {
          if (q < DQ) {
            (*acc)[i * DQ_MAX + q] += pv.x * m[q] + pv.y * m[DQ_MAX + q] + pv.z * m[2u * DQ_MAX + q] + pv.w * m[3u * DQ_MAX + q];
          }
        }
      }
    }
  }
}

// Writes value v of score column c (0 .. BR-1) of A row r into Xs.
fn put_score(r: u32, c: u32, v: f32) { Xs[p_at(r, c >> 2u)][c & 3u] = v; }

// Row reductions over the 16 invocations of a workgroup row, through Xs: row_share writes this
// invocation's partial of each owned row, then (after a barrier) row_max / row_sum read the 16 of row r.
fn row_share(v: array<f32, 8>, tx: u32, ty: u32) {
  for (var i = 0u; i < RI_MAX; i++) {
    if (i < RI) { put_score(ty + TY * i, tx, v[i]); }
  }
}
fn row_max(r: u32) -> f32 {
  let m = max(max(Xs[p_at(r, 0u)], Xs[p_at(r, 1u)]), max(Xs[p_at(r, 2u)], Xs[p_at(r, 3u)]));
  return max(max(m.x, m.y), max(m.z, m.w));
}
fn row_sum(r: u32) -> f32 {
  let s = (Xs[p_at(r, 0u)] + Xs[p_at(r, 1u)]) + (Xs[p_at(r, 2u)] + Xs[p_at(r, 3u)]);
  return (s.x + s.y) + (s.z + s.w);
}

// Sample packing (HAS_POS): the smallest first key of the n queries from t0, where a block's key loop
// starts. The including kernel defines fn first_key(b: u32, t: u32) -> u32, the first key query t of
// sequence b sees; every invocation reads the same words, so the result is uniform.
fn first_of_block(b: u32, t0: u32, n: u32) -> u32 {
  var f = t0;
  for (var r = 0u; r < n; r++) { f = min(f, first_key(b, t0 + r)); }
  return f;
}
