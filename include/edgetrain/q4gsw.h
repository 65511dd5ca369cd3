// The q4gsw weight format: 4-bit group-symmetric codes, value W[n,k] = (c[n,k] - 8) * scales[k/gs, n].
//
// Two byte layouts hold the same codes:
//  * interchange (ExecuTorch export): u8 [N, ceil(K/2)], byte (n, j) = c[n,2j] | c[n,2j+1] << 4.
//  * W_4X8 (what every edgetrain backend computes on): u32 words, 4*K4*N8 of them with K4 = ceil(K/4),
//    N8 = ceil(N/8). Code c[n,k] sits in word 4*(floor(k/4)*N8 + floor(n/8)) + floor((n%8)/2) at bit
//    8*(k%4) + 4*(n%2). One 16-byte block covers 4 consecutive k by 8 consecutive n, so a GPU thread reads
//    a 4x8 tile of codes with one 128-bit load.
// Sound choices where ExecuTorch is inconsistent (OPS.md section 9): any N >= 1 and K >= 1 are accepted;
// every padding nibble (k >= K or n >= N, in both layouts) holds code 8, i.e. value 0, so padding never
// changes a product; a partial last group is allowed (G = ceil(K/gs)); group_size must be a positive
// multiple of 4 (so a 4-k word never straddles two groups).
#pragma once

#include <cstdint>
#include <vector>

namespace edgetrain::q4 {

struct Geometry {
  int64_t N = 0, K = 0, group_size = 0;
  Geometry(int64_t n, int64_t k, int64_t gs);  // validates; throws Error
  int64_t K4() const { return (K + 3) / 4; }
  int64_t N8() const { return (N + 7) / 8; }
  int64_t groups() const { return (K + group_size - 1) / group_size; }
  int64_t words() const { return 4 * K4() * N8(); }            // W_4X8 u32 count
  int64_t interchange_row_bytes() const { return (K + 1) / 2; }  // ceil(K/2)
};

inline int64_t w4x8_word(int64_t n, int64_t k, int64_t N8) { return 4 * ((k / 4) * N8 + n / 8) + (n % 8) / 2; }
inline int w4x8_shift(int64_t n, int64_t k) { return static_cast<int>(8 * (k % 4) + 4 * (n % 2)); }

// codes: N*K values in 0..15, row-major [N, K].
std::vector<uint32_t> pack_w4x8(const Geometry& g, const uint8_t* codes);
std::vector<uint8_t> unpack_w4x8(const Geometry& g, const uint32_t* words);
std::vector<uint8_t> codes_to_interchange(const Geometry& g, const uint8_t* codes);
std::vector<uint8_t> interchange_to_codes(const Geometry& g, const uint8_t* bytes);

// Quantizes fp32 weights [N, K]: scale of a group = max|w| / 7 rounded to fp16 (the largest weight maps to
// +-7, code 0 stays free as headroom for QAT; every scale is exactly representable as a GGUF Q4_0 block
// scale), codes by round-half-even. An all-zero group gets scale 0 (codes 8). A group whose values already
// are (c - 8) * s for an fp16 s keeps exactly those values (quantize(dequantize(c, s)) == (c, s) up to the
// choice among equivalent grids), so dequantized exports read back as the same model.
struct Quantized {
  std::vector<float> scales;   // [G, N]
  std::vector<uint8_t> codes;  // [N, K]
};
Quantized quantize(const Geometry& g, const float* w);
// The requant rule of OPS.md section 6 for one value.
uint8_t requant_code(float latent, float scale);
// Whether the quantizer follows a latent value: -8.5*s <= latent <= 7.5*s, the interval that rounds into
// codes -8..7 (7.5*s itself rounds to 8 and clamps to 7). Training keeps every latent in it (q4gsw_requant
// clamps them), so a master is always within half a step s/2 of the weight it stands for; an older
// checkpoint's masters may lie outside. False for NaN; for s == 0 only a zero latent is in range.
inline bool in_range(float latent, float scale) { return latent >= -8.5f * scale && latent <= 7.5f * scale; }
// latent clamped into that interval (NaN stays NaN): what q4gsw_requant writes back.
inline float clamp_to_range(float latent, float scale) {
  return latent != latent ? latent : latent < -8.5f * scale ? -8.5f * scale : latent > 7.5f * scale ? 7.5f * scale : latent;
}
// How many latents of [N, K] lie outside their group's range (see in_range), and the largest |latent / s|.
struct RangeStats {
  int64_t outside = 0, total = 0;
  double max_ratio = 0;
};
RangeStats range_stats(const Geometry& g, const float* latent, const float* scales);
// W[n,k] as fp32 [N, K].
std::vector<float> dequantize(const Geometry& g, const uint8_t* codes, const float* scales);

}  // namespace edgetrain::q4
