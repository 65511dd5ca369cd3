// The tiles of the attention kernels (attention.comp, attention_backward.comp): their specialization
// constants, workgroup-memory addressing, tile loads, and the two register-tiled products every kernel is
// made of. Tile geometry and its choice: src/core/attention_tiles.h. A workgroup is TY rows of TX = 16
// invocations; invocation (ty, tx) owns rows ty + TY*i (i < RI) of the "A" tile and rows tx + TX*j
// (j < KJ) of the "B" tile of a score tile, and rows ty + TY*i by head-dim vec4 slots tx + TX*q (q < DQ)
// of an output tile. Sums run over the head dim, or over B rows, in increasing order.
//
// Head-dim tiles (Q, K, V, dout) are vec4[rows * HC4], one row per query or key, slots swizzled by hd_at();
// a row holds HC (the capacity: 16, 32, 64 or 128) values, the head dim's and zeros after them, so every
// loop has a constant trip count and one pipeline serves every head dim of a capacity (the head dim itself
// is a kernel parameter, used only where rows are loaded and stored). Score tiles (P, dS) are
// vec4[A rows * BR4], a row per A row holding the B rows' values, swizzled by p_at(); a score tile also
// carries the row reductions (16 partials per A row, in slots 0..3).
//
// fp16: a half-precision variant would keep these tiles and the fp32 softmax state, and change only the
// tile loads (f16 buffers) and the two products (f16 vec4 or cooperative-matrix FMAs): DT-typed views of
// the bindings that ET_LOAD_TILE reads, and ET_DOT_TILES / ET_PV_TILES on f16vec4 tiles.
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;  // 16 * TY invocations
layout(constant_id = 1) const uint RI = 8;    // A rows per invocation (A tile: TY * RI rows)
layout(constant_id = 2) const uint KJ = 2;    // B rows per invocation (B tile: 16 * KJ rows)
layout(constant_id = 3) const uint HC = 64;   // head-dim capacity of a tile row (>= the head dim)
layout(constant_id = 4) const uint SWZ = 7;   // swizzle mask of head-dim tile rows (attention_swizzle)
layout(constant_id = 5) const uint PSW = 7;   // swizzle mask of score tile rows

const uint TX = 16u;
const uint TY = WG / TX;
const uint AR = TY * RI;           // A tile rows
const uint BR = TX * KJ;           // B tile rows
const uint BR4 = BR / 4u;          // vec4 slots of a score tile row
const uint HC4 = HC / 4u;          // vec4 slots of a head-dim tile row
const uint DQ = (HC4 + TX - 1u) / TX;
// Register arrays are sized for the largest tiles (attention_tiles.cpp: RI <= 8, KJ <= 4, HC <= 128).
const uint RI_MAX = 8u, KJ_MAX = 4u, DQ_MAX = 2u;

uint hd_at(uint row, uint slot) { return row * HC4 + (slot ^ (row & SWZ)); }
uint p_at(uint row, uint slot) { return row * BR4 + (slot ^ (row & PSW)); }

// dst[at + hd_at(r, s)] = the head-dim row r of a buffer (F: float[], F4: vec4[] view of it), rows at
// base + r * stride floats, for r < nvalid; zeros past the head dim hd and for rows r >= nvalid. `at`
// places the tile in a shared array that holds two. Rows are read as vec4s when hd % 4 == 0 (then every
// row starts on a vec4).
#define ET_LOAD_TILE(dst, at, ROWS, F, F4, base, stride, nvalid, hd)                          \
  for (uint e_ = gl_LocalInvocationIndex; e_ < (ROWS) * HC4; e_ += WG) {                     \
    const uint r_ = e_ / HC4, s_ = e_ - r_ * HC4;                                            \
    vec4 v_ = vec4(0.0);                                                                     \
    if (r_ < (nvalid) && 4u * s_ < (hd)) {                                                   \
      const uint o_ = (base) + r_ * (stride) + 4u * s_;                                      \
      if ((hd) % 4u == 0u) {                                                                 \
        v_ = F4[o_ >> 2];                                                                    \
      } else {                                                                               \
        [[unroll]] for (uint c_ = 0u; c_ < 4u; ++c_) if (4u * s_ + c_ < (hd)) v_[c_] = F[o_ + c_]; \
      }                                                                                      \
    }                                                                                        \
    dst[(at) + hd_at(r_, s_)] = v_;                                                          \
  }

// acc[i * KJ_MAX + j] += A[row ty + TY*i] . B[row tx + TX*j] over the head dim (A, B head-dim tiles at
// offsets aat, bat of their arrays).
#define ET_DOT_TILES(acc, A, aat, B, bat)                                                     \
  for (uint s_ = 0u; s_ < HC4; ++s_) {                                                       \
    vec4 b_[KJ_MAX];                                                                         \
    [[unroll]] for (uint j_ = 0u; j_ < KJ; ++j_) b_[j_] = B[(bat) + hd_at(tx + TX * j_, s_)]; \
    [[unroll]] for (uint i_ = 0u; i_ < RI; ++i_) {                                           \
      const vec4 a_ = A[(aat) + hd_at(ty + TY * i_, s_)];                                    \
      [[unroll]] for (uint j_ = 0u; j_ < KJ; ++j_) acc[i_ * KJ_MAX + j_] += dot(a_, b_[j_]);  \
    }                                                                                        \
  }

// acc[i * DQ_MAX + q] += sum_c P[row ty + TY*i][c] * M[row c][slot tx + TX*q] over the BR columns c of
// the score tile P, M a head-dim tile of BR rows at offset mat. Invocations whose slot lies past the tile
// row compute on a clamped slot and store nothing.
#define ET_PV_TILES(acc, P, M, mat)                                                           \
  for (uint c4_ = 0u; c4_ < BR4; ++c4_) {                                                    \
    vec4 m_[4u * DQ_MAX];                                                                    \
    [[unroll]] for (uint k_ = 0u; k_ < 4u; ++k_)                                              \
      [[unroll]] for (uint q_ = 0u; q_ < DQ; ++q_)                                            \
        m_[k_ * DQ_MAX + q_] = M[(mat) + hd_at(4u * c4_ + k_, min(tx + TX * q_, HC4 - 1u))];  \
    [[unroll]] for (uint i_ = 0u; i_ < RI; ++i_) {                                           \
      const vec4 p_ = P[p_at(ty + TY * i_, c4_)];                                            \
      [[unroll]] for (uint q_ = 0u; q_ < DQ; ++q_)                                            \
        acc[i_ * DQ_MAX + q_] += p_.x * m_[q_] + p_.y * m_[DQ_MAX + q_] + p_.z * m_[2u * DQ_MAX + q_] + \
                                 p_.w * m_[3u * DQ_MAX + q_];                                 \
    }                                                                                        \
  }

// Row reductions over the 16 invocations of a row of the workgroup, through a score tile X: each writes
// its partials v[i] (one per owned A row), a barrier, then every invocation reads the 16 partials of its
// rows. The caller puts a barrier before the next write to X.
#define ET_ROW_SHARE(X, v)                                                                    \
  [[unroll]] for (uint i_ = 0u; i_ < RI; ++i_) X[p_at(ty + TY * i_, tx >> 2)][tx & 3u] = v[i_];
float et_row_max(vec4 a, vec4 b, vec4 c, vec4 d) {
  vec4 m = max(max(a, b), max(c, d));
  return max(max(m.x, m.y), max(m.z, m.w));
}
float et_row_sum(vec4 a, vec4 b, vec4 c, vec4 d) {
  vec4 s = (a + b) + (c + d);
  return (s.x + s.y) + (s.z + s.w);
}
#define ET_ROW_MAX(X, r) et_row_max(X[p_at(r, 0u)], X[p_at(r, 1u)], X[p_at(r, 2u)], X[p_at(r, 3u)])
#define ET_ROW_SUM(X, r) et_row_sum(X[p_at(r, 0u)], X[p_at(r, 1u)], X[p_at(r, 2u)], X[p_at(r, 3u)])

// Writes one head-dim slot (4 values, fewer at the end of a head dim hd that is not a multiple of 4) of a
// row at float offset o.
#define ET_STORE_SLOT(F, F4, o, slot, val, hd)                                                \
  if ((hd) % 4u == 0u) {                                                                     \
    F4[(o) >> 2] = (val);                                                                    \
  } else {                                                                                   \
    [[unroll]] for (uint c_ = 0u; c_ < 4u; ++c_) if (4u * (slot) + c_ < (hd)) F[(o) + c_] = (val)[c_]; \
  }

#include "attention_pos.glsl"
