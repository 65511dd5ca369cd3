// What the tensor-core attention kernels (attention_coop.comp, attention_coop_backward.comp) share: their
// tile geometry, workgroup memory, the loads that round fp32 rows to fp16, and the element layout of the
// accumulators. They run attention calls with the f16 flag (ops.inc) on devices with NV cooperative
// matrices (16x16x16 fp16 products, fp32 accumulation) whose accumulator layout the backend has probed
// (coop_layout.h); ops_llama.cpp chooses them and src/core/attention_tiles.h sizes them.
//
// A workgroup is 4 subgroups of 32. Each subgroup owns 16 rows of the workgroup's 64-row "A" tile (queries
// in the forward and dq, keys in dk/dv) and walks "B" tiles of BR rows (keys, or queries) staged as fp16 in
// workgroup memory. A 16 x BR score tile of a subgroup is a row of BR/16 accumulators. The row-wise work
// (mask, softmax, dS) is done on the accumulators' elements in registers: element i of lane l sits at row
// (l >> 2) + 8 * bit i of ACC_ROWS_HIGH and column 2 (l & 3) + nibble i of ACC_COLUMNS, so the 4 lanes of a
// quad share two rows and a row's max or sum is two shuffles away. The probabilities (or dS) become the A
// operand of the next product by an fp16 conversion of the accumulator, without workgroup memory. Measured
// on an H200 against the previous kernels, which moved every score tile, probability tile and P V product
// through workgroup memory: docs/PERFORMANCE.md.
#extension GL_EXT_control_flow_attributes : require
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require

#include "attention_pos.glsl"

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint HC = 64;  // head-dim capacity: 16, 32, 48, 64 or 128 (a multiple of CW)
layout(constant_id = 1) const uint BR = 64;  // rows of a B tile (64, or 32 for HC 128: workgroup memory)
// constant_id 2 is the kernels' HAS_POS. The accumulator layout (coop_layout.h; the defaults are what an
// H200 reports): bit i set = element i in the quad's second row; nibble i = element i's column offset.
layout(constant_id = 3) const uint ACC_ROWS_HIGH = 0xF0u;
layout(constant_id = 4) const uint ACC_COLUMNS = 0x98109810u;

const uint AR = 64u;             // rows of the A tile: 16 per subgroup
const uint NH = HC / 16u;        // 16-wide fragments across the head dim
const uint NB = BR / 16u;        // 16-wide fragments across a B tile
const uint KP8 = (HC + 8u) / 8u;  // pitch of a head-dim row in uvec4s of 8 halves (HC + 8 halves: 16-byte
                                  // aligned, spreads banks); the unit of the cooperative loads' offsets
const uint CW = HC < 64u ? HC : 64u;  // output columns per pass through the stage
const uint SP4 = CW / 4u + 1u;  // pitch of a stage row, in uvec4s of 4 floats
const uint NH_MAX = 8u, NB_MAX = 4u;  // register arrays' sizes for the largest tiles

#define ACC fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
#define HALF fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>

// fp16 tiles are uvec4 arrays (8 halves each), the element type the cooperative loads take.
// Two B tiles (K and V, or Q and dout), or at the start the A tiles of 64 rows: the backward's two where
// BR = 64, one where BR = 32 (2 * BR >= 64).
shared uvec4 Ts[2u * BR * KP8];
// A 16-row fp32 stage per subgroup for output rows (float bits); the backward's dq also passes D's
// partial sums through it before its first tile.
shared uvec4 stage[4u * 16u * SP4];

// Element i of this lane's accumulators: which of the quad's two rows (0: lane >> 2, 1: 8 + lane >> 2),
// and its column within the 16 (2 (lane & 3) + acc_col(i)).
uint acc_row_half(uint i) { return (ACC_ROWS_HIGH >> i) & 1u; }
uint acc_col(uint i) { return (ACC_COLUMNS >> (4u * i)) & 15u; }
// The maximum and the sum over a row's quad of lanes.
float quad_max(float x) {
  x = max(x, subgroupShuffleXor(x, 1u));
  return max(x, subgroupShuffleXor(x, 2u));
}
float quad_sum(float x) {
  x += subgroupShuffleXor(x, 1u);
  return x + subgroupShuffleXor(x, 2u);
}

// Tiles are loaded in slots of 4 head-dim columns: the HC/4 slots of a row go to consecutive invocations,
// so a subgroup's vec4 loads cover whole rows (two 256-byte rows per instruction at head dim 64). Measured
// on an H200: slots of 8 columns (two 16-byte loads 32 bytes apart per invocation, half of every 128-byte
// line per instruction) made the tile loads over half of the forward's time.
const uint SL = HC / 4u;  // slots per row

// x = the fp32 values of head-dim columns 4s..4s+3 of row r of a buffer (F: float[], F4: its vec4 view),
// rows at base + r * stride floats: zeros past the head dim hd and for rows r >= nvalid. Read as one vec4
// when hd % 4 == 0 (then every row starts on a vec4).
#define ET_FETCH_SLOT(x, r, s, F, F4, base, stride, nvalid, hd)                                \
  x = vec4(0.0);                                                                              \
  if ((r) < (nvalid) && 4u * (s) < (hd)) {                                                    \
    const uint o_ = (base) + (r) * (stride) + 4u * (s);                                       \
    if ((hd) % 4u == 0u) {                                                                    \
      x = F4[o_ >> 2];                                                                        \
    } else {                                                                                  \
      [[unroll]] for (uint c_ = 0u; c_ < 4u; ++c_)                                            \
        if (4u * (s) + c_ < (hd)) x[c_] = F[o_ + c_];                                         \
    }                                                                                         \
  }

// Ts at `at`, row r, columns 4s..4s+3 = fp16 of x: half of the uvec4 of columns 8(s/2)..8(s/2)+7.
#define ET_PUT_SLOT(at, r, s, x)                                                              \
  {                                                                                           \
    const uint i_ = (at) + (r) * KP8 + ((s) >> 1u), c_ = ((s) & 1u) * 2u;                     \
    Ts[i_][c_] = packFloat2x16(f16vec2((x).xy));                                              \
    Ts[i_][c_ + 1u] = packFloat2x16(f16vec2((x).zw));                                         \
  }

// The fp32 slots of ROWS rows of a buffer in flight: an invocation fetches its slots (slot e of the tile,
// e = invocation + 128 k) into registers x[], and later puts them into Ts as fp16. Every fetch is issued
// before the first put (measured on an H200: waiting for each read in turn, or for each tile's reads
// before the products of the previous one, took over half the forward's time).
#define ET_FETCH_ROWS(x, ROWS, F, F4, base, stride, nvalid, hd)                               \
  [[unroll]] for (uint k_ = 0u; k_ < ((ROWS) * SL + 127u) / 128u; ++k_) {                    \
    const uint e_ = gl_LocalInvocationIndex + 128u * k_, r_ = e_ / SL, s_ = e_ - r_ * SL;     \
    ET_FETCH_SLOT(x[k_], r_, s_, F, F4, base, stride, min(nvalid, ROWS), hd)                  \
  }
#define ET_PUT_ROWS(x, ROWS, at)                                                              \
  [[unroll]] for (uint k_ = 0u; k_ < ((ROWS) * SL + 127u) / 128u; ++k_) {                    \
    const uint e_ = gl_LocalInvocationIndex + 128u * k_, r_ = e_ / SL, s_ = e_ - r_ * SL;     \
    if (r_ < (ROWS)) ET_PUT_SLOT(at, r_, s_, x[k_])                                           \
  }

// The ROWS rows of an A tile as fp16, into Ts at `at`: loaded once.
const uint NA_MAX = 16u;  // slots per invocation of a 64-row tile at head dim 128
#define ET_LOAD_F16(at, ROWS, F, F4, base, stride, nvalid, hd)                                 \
  {                                                                                           \
    vec4 x_[NA_MAX];                                                                          \
    ET_FETCH_ROWS(x_, ROWS, F, F4, base, stride, nvalid, hd)                                  \
    ET_PUT_ROWS(x_, ROWS, at)                                                                 \
  }

// A B tile in flight: its NS slots per invocation are fetched before the products of the current tile
// and put into Ts after the barrier that ends them.
const uint NS = (BR * SL + 127u) / 128u, NS_MAX = 8u;
#define ET_FETCH_TILE(x, F, F4, base, stride, nvalid, hd) ET_FETCH_ROWS(x, BR, F, F4, base, stride, nvalid, hd)
#define ET_PUT_TILE(x, at) ET_PUT_ROWS(x, BR, at)

// The stage of subgroup sg, and one column of a row of it.
uint stage_at(uint sg) { return sg * 16u * SP4; }
float stage1(uint sg, uint r, uint col) { return uintBitsToFloat(stage[stage_at(sg) + r * SP4 + col / 4u][col % 4u]); }

// s = A (16 x HC, the fragments a[]) times the transpose of rows j*16..j*16+15 of the B tile at `at`
// (head-dim rows of Ts): a 16 x 16 tile of dot products.
#define ET_SCORES(s, a, at, j)                                                                \
  s = ACC(0.0);                                                                               \
  [[unroll]] for (uint kk_ = 0u; kk_ < NH; ++kk_) {                                           \
    HALF b_;                                                                                  \
    coopMatLoadNV(b_, Ts, (at) + (j) * 16u * KP8 + kk_ * 2u, KP8, true);                      \
    s = coopMatMulAddNV(a[kk_], b_, s);                                                       \
  }

// acc[n] += P (16 x BR: the fp16 fragments p[]) times the B tile at `at` (BR x HC), n < NH.
#define ET_TIMES_TILE(acc, p, at)                                                             \
  [[unroll]] for (uint n_ = 0u; n_ < NH; ++n_)                                                \
    [[unroll]] for (uint k_ = 0u; k_ < NB; ++k_) {                                            \
      HALF b_;                                                                                \
      coopMatLoadNV(b_, Ts, (at) + k_ * 16u * KP8 + n_ * 2u, KP8, false);                     \
      acc[n_] = coopMatMulAddNV(p[k_], b_, acc[n_]);                                          \
    }

// Stores the fragments acc[] (16 x HC fp32, times `mul`) of the subgroup's 16 rows to a buffer through the
// stage, CW columns at a time: row r goes to F at base + r * stride if r < nvalid, the first hd columns.
#define ET_STORE_ROWS(acc, mul, sg, lane, F, base, stride, nvalid, hd)                    \
  [[unroll]] for (uint c0_ = 0u; c0_ < HC; c0_ += CW) {                                       \
    [[unroll]] for (uint n_ = 0u; n_ < CW / 16u; ++n_)                                        \
      coopMatStoreNV(acc[c0_ / 16u + n_], stage, stage_at(sg) + n_ * 4u, SP4, false);         \
    subgroupMemoryBarrierShared();                                                            \
    subgroupBarrier();                                                                        \
    for (uint e_ = (lane); e_ < 16u * CW; e_ += 32u) {                                        \
      const uint r_ = e_ / CW, c_ = c0_ + e_ - r_ * CW;                                       \
      if (r_ < (nvalid) && c_ < (hd)) F[(base) + r_ * (stride) + c_] = (mul) * stage1(sg, r_, c_ - c0_); \
    }                                                                                         \
    subgroupBarrier();                                                                        \
  }
