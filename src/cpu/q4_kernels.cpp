// Fast CPU q4gsw kernels: the 4-bit linear forward and input gradient, and the threaded requantization into
// W_4X8, bit-identical to the reference. With AVX-512, W is decoded once per call into the packed operand of
// avx512_gemm.cpp's kernel (a block of columns at a time), shared by every tile; elsewhere per tile into a
// small per-thread fp32 buffer, then a single-threaded sgemm on the tile. M == 1 decodes on the fly.
// With the f16 flag the decoded weights and the activations are rounded to fp16 (the GEMV's per-group
// factoring of the scale cannot be, so M == 1 takes the tiled path then).
#include <algorithm>
#include <vector>

#include "cpu/avx512.h"
#include "cpu/isa.h"
#include "cpu/kernels.h"
#include "cpu/threads.h"
#include "edgetrain/q4gsw.h"

namespace edgetrain::cpu::fast {
namespace {

// Tile sizes: output columns per forward task, input-gradient columns per backward task, and the longest
// run of the contraction decoded at once (bounds the buffer: 64 x 1024 floats = 256 KiB per thread).
constexpr int64_t kRowsPerTile = 64;
constexpr int64_t kColsPerTile = 64;
constexpr int64_t kMaxRun = 1024;

struct Q4 {
  const uint32_t* w;
  const float* s;  // [G, N]
  int64_t N, K, N8, gs;
  bool f16 = false;  // operands rounded to fp16
};

std::vector<float>& thread_buffer(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf;
}

// dst[i * kr + j] = W[n0 + i, k0 + j] for i < nr, j < kr, with n0 % 8 == 0 and k0 % 4 == 0. Rows n and n^1
// share a word (low/high nibble); a 4-k word never straddles groups (gs % 4 == 0).
void decode_tile(const Q4& q, int64_t n0, int64_t nr, int64_t k0, int64_t kr, float* dst) {
  const int64_t k4a = k0 / 4, k4b = (k0 + kr + 3) / 4;
  for (int64_t i = 0; i < nr; ++i) {
    const int64_t n = n0 + i;
    const uint32_t* wp = q.w + 4 * (n / 8) + (n % 8) / 2;
    const int sh = 4 * static_cast<int>(n % 2);
    float* d = dst + i * kr;
    for (int64_t k4 = k4a; k4 < k4b; ++k4) {
      const int64_t k = 4 * k4;
      const uint32_t word = wp[4 * k4 * q.N8] >> sh;
      const float sc = q.s[(k / q.gs) * q.N + n];
      if (k + 4 <= k0 + kr) {
        float* o = d + (k - k0);
        o[0] = static_cast<float>(static_cast<int>(word & 0xF) - 8) * sc;
        o[1] = static_cast<float>(static_cast<int>((word >> 8) & 0xF) - 8) * sc;
        o[2] = static_cast<float>(static_cast<int>((word >> 16) & 0xF) - 8) * sc;
        o[3] = static_cast<float>(static_cast<int>((word >> 24) & 0xF) - 8) * sc;
      } else {
        for (int b = 0; k + b < k0 + kr; ++b)
          d[k - k0 + b] = static_cast<float>(static_cast<int>((word >> (8 * b)) & 0xF) - 8) * sc;
      }
    }
    if (q.f16)
      for (int64_t j = 0; j < kr; ++j) d[j] = ref::gemm_operand(d[j], true);
  }
}

// y[n] = sum_k x[k] W[n,k] (+ bias) for one row x, n in [8*a8, 8*b8): per group, sum the codes times x,
// then scale. x4 is x zero-padded to a multiple of 4, so padding nibbles multiply zeros.
void gemv_rows(const Q4& q, const float* x4, const float* bias, int64_t a8, int64_t b8, float* y) {
  constexpr int64_t kBlocks = 8;  // n8 blocks per pass: 64 outputs
  const int64_t K4 = (q.K + 3) / 4, G = (q.K + q.gs - 1) / q.gs, g4 = q.gs / 4;
  for (int64_t c8 = a8; c8 < b8; c8 += kBlocks) {
    const int64_t nb = std::min(kBlocks, b8 - c8);
    float total[kBlocks * 8] = {}, part[kBlocks * 8];
    for (int64_t g = 0; g < G; ++g) {
      std::fill(part, part + nb * 8, 0.0f);
      const int64_t k4e = std::min(K4, (g + 1) * g4);
      for (int64_t k4 = g * g4; k4 < k4e; ++k4) {
        const float x0 = x4[4 * k4], x1 = x4[4 * k4 + 1], x2 = x4[4 * k4 + 2], x3 = x4[4 * k4 + 3];
        const uint32_t* wp = q.w + 4 * (k4 * q.N8 + c8);
        for (int64_t j = 0; j < nb * 4; ++j) {
          const uint32_t w = wp[j];
          auto v = [w](int sh) { return static_cast<float>(static_cast<int>((w >> sh) & 0xF) - 8); };
          part[2 * j] += x0 * v(0) + x1 * v(8) + x2 * v(16) + x3 * v(24);
          part[2 * j + 1] += x0 * v(4) + x1 * v(12) + x2 * v(20) + x3 * v(28);
        }
      }
      const float* sg = q.s + g * q.N + 8 * c8;
      const int64_t nn = std::min(nb * 8, q.N - 8 * c8);
      for (int64_t i = 0; i < nn; ++i) total[i] += sg[i] * part[i];
    }
    const int64_t nn = std::min(nb * 8, q.N - 8 * c8);
    for (int64_t i = 0; i < nn; ++i) y[8 * c8 + i] = total[i] + (bias ? bias[8 * c8 + i] : 0.0f);
  }
}

// dx[k] = sum_n dy[n] W[n,k] for k in [4*a4, 4*b4) of one row; dx4 has room for a multiple of 4.
void gemv_cols(const Q4& q, const float* dy, int64_t a4, int64_t b4, float* dx4) {
  for (int64_t k4 = a4; k4 < b4; ++k4) {
    const float* sg = q.s + (4 * k4 / q.gs) * q.N;
    const uint32_t* wp = q.w + 4 * k4 * q.N8;
    float acc[4] = {0, 0, 0, 0};
    for (int64_t n = 0; n < q.N; ++n) {
      const uint32_t w = wp[4 * (n / 8) + (n % 8) / 2] >> (4 * (n % 2));
      const float d = dy[n] * sg[n];
      for (int b = 0; b < 4; ++b) acc[b] += d * static_cast<float>(static_cast<int>((w >> (8 * b)) & 0xF) - 8);
    }
    for (int b = 0; b < 4; ++b) dx4[4 * k4 + b] = acc[b];
  }
}

#ifdef EDGETRAIN_AVX512_KERNELS
// Packed columns per decode: ~1 MiB of panels (at least one panel), so the operand stays in L2 while
// every row tile uses it.
int64_t panels_per_block(int64_t rows) {
  return std::max<int64_t>(1, (int64_t{1} << 18) / (std::max<int64_t>(rows, 1) * avx512::kPanel));
}

// y = x @ W^T (+ bias), M > 1.
void forward_avx512(const Q4& q, const float* x, const float* bias, int64_t M, float* y) {
  thread_local std::vector<float> panels;
  const int64_t np = (q.N + avx512::kPanel - 1) / avx512::kPanel, per = panels_per_block(q.K);
  panels.resize(static_cast<size_t>(std::min(np, per) * q.K * avx512::kPanel));
  for (int64_t p0 = 0; p0 < np; p0 += per) {
    const int64_t p1 = std::min(np, p0 + per), n0 = p0 * avx512::kPanel;
    avx512::pack_q4_transposed(q.w, q.s, q.N, q.K, q.gs, p0, p1, panels.data());
    avx512::Gemm g{M, std::min(q.N - n0, (p1 - p0) * avx512::kPanel), q.K, x, q.K, false, panels.data(),
                   avx512::kPanel, true, y + n0, q.N, false};
    g.bias = bias ? bias + n0 : nullptr;
    run_gemm_tiles(g);
  }
}

// dx = dy @ W, M > 1.
void backward_avx512(const Q4& q, const float* dy, int64_t M, float* dx) {
  thread_local std::vector<float> panels;
  const int64_t np = (q.K + avx512::kPanel - 1) / avx512::kPanel, per = panels_per_block(q.N);
  panels.resize(static_cast<size_t>(std::min(np, per) * q.N * avx512::kPanel));
  for (int64_t p0 = 0; p0 < np; p0 += per) {
    const int64_t p1 = std::min(np, p0 + per), k0 = p0 * avx512::kPanel;
    avx512::pack_q4(q.w, q.s, q.N, q.K, q.gs, p0, p1, panels.data());
    const avx512::Gemm g{M, std::min(q.K - k0, (p1 - p0) * avx512::kPanel), q.N, dy, q.N, false, panels.data(),
                         avx512::kPanel, true, dx + k0, q.K, false};
    run_gemm_tiles(g);
  }
}
#endif

}  // namespace

// x [..., K] (M rows), w W_4X8, scales [G, N], bias [N] optional, ints {group_size, f16?};
// y [..., N] = x @ W^T + bias.
void linear_q4gsw(const ref::Call& c) {
  const ref::View& x = c.in[0];
  const int64_t K = x.shape.last(), N = c.in[2].shape[1], M = x.shape.rows();
  const Q4 q{c.in[1].as<uint32_t>(), c.in[2].as<float>(), N, K, (N + 7) / 8, c.ints[0], ref::f16_flag(c, 1)};
  const float* bias = c.has_in(3) ? c.in[3].as<float>() : nullptr;
  std::vector<float> rx;
  const float* xp = gemm_operand(x.as<float>(), x.numel(), q.f16, rx);
  float* y = c.out[0].as<float>();
  if (M == 0) return;
  if (M == 1 && !q.f16) {
    std::vector<float> x4(static_cast<size_t>((K + 3) / 4 * 4), 0.0f);
    std::copy(xp, xp + K, x4.begin());
    parallel_for(q.N8, 8, [&](int64_t a8, int64_t b8) { gemv_rows(q, x4.data(), bias, a8, b8, y); });
    return;
  }
#ifdef EDGETRAIN_AVX512_KERNELS
  if (use_avx512() && !q.f16) return forward_avx512(q, xp, bias, M, y);  // fp16: rounded tiles below
#endif
  const int64_t tiles = (N + kRowsPerTile - 1) / kRowsPerTile;
  parallel_for(tiles, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n0 = t * kRowsPerTile, nr = std::min(kRowsPerTile, N - n0);
      float* buf = thread_buffer(static_cast<size_t>(nr * std::min(K, kMaxRun))).data();
      if (bias)
        for (int64_t m = 0; m < M; ++m) std::copy(bias + n0, bias + n0 + nr, y + m * N + n0);
      for (int64_t k0 = 0; k0 < K; k0 += kMaxRun) {
        const int64_t kr = std::min(kMaxRun, K - k0);
        decode_tile(q, n0, nr, k0, kr, buf);
        sgemm1(false, true, M, nr, kr, 1.0f, xp + k0, K, buf, kr, (k0 > 0 || bias) ? 1.0f : 0.0f, y + n0, N);
      }
    }
  });
}

// dy [..., N], w W_4X8, scales [G, N], ints {group_size, K, f16?}; dx [..., K] = dy @ W.
void linear_q4gsw_backward(const ref::Call& c) {
  const ref::View& dy = c.in[0];
  const int64_t K = c.ints[1], N = c.in[2].shape[1], M = dy.shape.rows();
  const Q4 q{c.in[1].as<uint32_t>(), c.in[2].as<float>(), N, K, (N + 7) / 8, c.ints[0], ref::f16_flag(c, 2)};
  std::vector<float> rdy;
  const float* dyp = gemm_operand(dy.as<float>(), dy.numel(), q.f16, rdy);
  float* dx = c.out[0].as<float>();
  if (M == 0) return;
  if (M == 1 && !q.f16) {
    const int64_t K4 = (K + 3) / 4;
    std::vector<float> dx4(static_cast<size_t>(K4 * 4));
    parallel_for(K4, 8, [&](int64_t a4, int64_t b4) { gemv_cols(q, dyp, a4, b4, dx4.data()); });
    std::copy(dx4.begin(), dx4.begin() + K, dx);
    return;
  }
#ifdef EDGETRAIN_AVX512_KERNELS
  if (use_avx512() && !q.f16) return backward_avx512(q, dyp, M, dx);
#endif
  const int64_t tiles = (K + kColsPerTile - 1) / kColsPerTile;
  parallel_for(tiles, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t k0 = t * kColsPerTile, kr = std::min(kColsPerTile, K - k0);
      float* buf = thread_buffer(static_cast<size_t>(kr * std::min(N, kMaxRun))).data();
      for (int64_t n0 = 0; n0 < N; n0 += kMaxRun) {
        const int64_t nr = std::min(kMaxRun, N - n0);
        decode_tile(q, n0, nr, k0, kr, buf);
        sgemm1(false, false, M, kr, nr, 1.0f, dyp + n0, N, buf, kr, n0 > 0 ? 1.0f : 0.0f, dx + k0, K);
      }
    }
  });
}

namespace {

// q4gsw_requant of the 8-row blocks [a8, b8): latent [N, K] clamped in place, every W_4X8 word of those
// blocks written (codes by q4::requant_code of the clamped latent, padding 8).
void requant_row_blocks(float* lp, const float* s, uint32_t* w, int64_t N, int64_t K, int64_t gs, int64_t a8,
                        int64_t b8) {
#ifdef EDGETRAIN_AVX512_KERNELS
  if (use_avx512()) return avx512::requant_blocks(lp, s, w, N, K, gs, a8, b8);
#endif
  const int64_t N8 = (N + 7) / 8, K4 = (K + 3) / 4;
  for (int64_t n8 = a8; n8 < b8; ++n8)
    for (int64_t k4 = 0; k4 < K4; ++k4)
      for (int j = 0; j < 4; ++j) {
        uint32_t word = 0x88888888u;
        for (int p = 0; p < 2; ++p) {
          const int64_t n = 8 * n8 + 2 * j + p;
          if (n >= N) continue;
          for (int b = 0; b < 4; ++b) {
            const int64_t k = 4 * k4 + b;
            if (k >= K) break;
            const float sc = s[(k / gs) * N + n];
            float& x = lp[n * K + k];
            const uint32_t code = q4::requant_code(x, sc);
            x = q4::clamp_to_range(x, sc);
            const int sh = 8 * b + 4 * p;
            word = (word & ~(0xFu << sh)) | (code << sh);
          }
        }
        w[4 * (k4 * N8 + n8) + j] = word;
      }
}

}  // namespace

// latent [N, K] (clamped in place, output 1), scales [G, N], ints {group_size}. Each task owns whole 8-row
// blocks, so it writes whole words (and their latents) and no two tasks touch the same word.
void q4gsw_requant(const ref::Call& c) {
  const ref::View& lat = c.in[0];
  const int64_t N = lat.shape[0], K = lat.shape[1], gs = c.ints[0];
  const float* s = c.in[1].as<float>();
  float* lp = c.out[1].as<float>();
  uint32_t* w = c.out[0].as<uint32_t>();
  parallel_for((N + 7) / 8, 1, [&](int64_t a8, int64_t b8) { requant_row_blocks(lp, s, w, N, K, gs, a8, b8); });
}

// AdamW then requantization, 8 rows at a time: a block's latents are still in cache when they are requantized.
void adamw_q4gsw_step(const ref::Call& c) {
  const ref::View& lat = c.in[0];
  const int64_t N = lat.shape[0], K = lat.shape[1], gs = c.ints[0];
  const AdamwArgs a = AdamwArgs::of(c, 5);
  const float* s = c.in[4].as<float>();
  uint32_t* w = c.out[4].as<uint32_t>();
  parallel_for((N + 7) / 8, 1, [&](int64_t a8, int64_t b8) {
    a.run(8 * a8 * K, std::min(N, 8 * b8) * K);
    requant_row_blocks(a.p, s, w, N, K, gs, a8, b8);
  });
}

}  // namespace edgetrain::cpu::fast
