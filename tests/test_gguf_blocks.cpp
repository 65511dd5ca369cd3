// GGUF block codecs (src/io/gguf_blocks.cpp, gguf_kquants.cpp) against two independent references:
//  * hand-built blocks whose values are written down from ggml's published block layouts (ggml-common.h)
//    with every expected number computed by hand (exact binary fractions), so a layout misread fails here;
//  * llama.cpp's own functions (dequantize_row_*, quantize_row_*_ref, the fp16 conversions and the type
//    table) from the pinned node-llama-cpp's prebuilt libggml-base, called on the same bytes and values:
//    decoding must be bit for bit theirs on random blocks (extreme and non-finite scales, all-zero blocks
//    included), and our quantizers must write their bytes. Those tests skip only where the llama.cpp tests
//    skip (node-llama-cpp not installed).
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <random>

#include "edgetrain/error.h"
#include "edgetrain/half.h"
#include "harness/ggml_ref.h"
#include "harness/llamacpp.h"
#include "io/gguf.h"

namespace edgetrain::test {
namespace {

void put_half(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  ASSERT_EQ(f16_to_f32(h), v) << "test value not an fp16 value";
  std::memcpy(p, &h, 2);
}

std::vector<float> decode(uint32_t type, const std::vector<uint8_t>& blocks, size_t n) {
  std::vector<float> out(n);
  gguf::decode_to_f32(type, blocks.data(), n, out.data());
  return out;
}

// The 12 scale bytes of a Q4_K/Q5_K block from eight 6-bit scales and mins, as ggml-common.h describes them:
// bytes 0-3 scale j (j < 4) in bits 0-5 and the top 2 bits of scale j+4 in bits 6-7; bytes 4-7 likewise
// for the mins; bytes 8-11 the low 4 bits of scale j+4 (bits 0-3) and of min j+4 (bits 4-7).
void pack_scales(uint8_t* s, const int sc[8], const int m[8]) {
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}

constexpr int kSc[8] = {1, 2, 3, 4, 43, 50, 63, 17};  // sub-blocks 4-7 need the top bits
constexpr int kMin[8] = {0, 5, 10, 63, 20, 33, 1, 48};

TEST(GgufBlocks, HandBuiltQ4KBlockDecodes) {
  // d = 0.5, dmin = 0.25; value i (sub-block j = i/32, l = i%32) has code (7i + 3) % 16, stored in byte
  // 32*(j/2) + l of the codes, low nibble for even j.
  std::vector<uint8_t> b(144, 0);
  put_half(&b[0], 0.5f);
  put_half(&b[2], 0.25f);
  pack_scales(&b[4], kSc, kMin);
  for (int i = 0; i < 256; ++i) {
    const int j = i / 32, l = i % 32, q = (7 * i + 3) % 16;
    b[16 + 32 * (j / 2) + l] |= static_cast<uint8_t>(j % 2 ? q << 4 : q);
  }
  const std::vector<float> y = decode(gguf::Q4_K, b, 256);
  EXPECT_EQ(y[0], 1.5f);      // 0.5*1*3 - 0.25*0
  EXPECT_EQ(y[140], 145.5f);  // sub-block 4: 0.5*43*7 - 0.25*20
  EXPECT_EQ(y[255], 90.0f);   // sub-block 7: 0.5*17*12 - 0.25*48
  for (int i = 0; i < 256; ++i) {
    const int j = i / 32, q = (7 * i + 3) % 16;
    ASSERT_EQ(y[i], 0.5f * kSc[j] * q - 0.25f * kMin[j]) << "value " << i;
  }
  uint8_t sc, m;
  for (int j = 0; j < 8; ++j) {
    gguf::k_scale_min(&b[4], j, &sc, &m);
    EXPECT_EQ(sc, kSc[j]) << j;
    EXPECT_EQ(m, kMin[j]) << j;
  }
}

TEST(GgufBlocks, HandBuiltQ5KBlockDecodes) {
  // As Q4_K, codes (11i + 5) % 32: low 4 bits as Q4_K's, the fifth in bit j of qh[l].
  std::vector<uint8_t> b(176, 0);
  put_half(&b[0], 0.5f);
  put_half(&b[2], 0.25f);
  pack_scales(&b[4], kSc, kMin);
  for (int i = 0; i < 256; ++i) {
    const int j = i / 32, l = i % 32, q = (11 * i + 5) % 32;
    b[48 + 32 * (j / 2) + l] |= static_cast<uint8_t>(j % 2 ? (q & 15) << 4 : q & 15);
    b[16 + l] |= static_cast<uint8_t>((q >> 4) << j);
  }
  const std::vector<float> y = decode(gguf::Q5_K, b, 256);
  EXPECT_EQ(y[0], 2.5f);     // 0.5*1*5
  EXPECT_EQ(y[255], 209.0f);  // 0.5*17*26 - 0.25*48
  for (int i = 0; i < 256; ++i) {
    const int j = i / 32, q = (11 * i + 5) % 32;
    ASSERT_EQ(y[i], 0.5f * kSc[j] * q - 0.25f * kMin[j]) << "value " << i;
  }
}

TEST(GgufBlocks, HandBuiltQ6KBlockDecodes) {
  // d = 1/16, int8 scales s_k = +-(8k + 1) for the sixteen sub-blocks of 16, codes (13i + 1) % 64 stored as
  // q - 32. Value i: half h = i/128, quarter t = (i%128)/32, l = i%32; low 4 bits in ql[64h + l + 32*(t%2)]
  // (low nibble for t < 2), high 2 bits in qh[32h + l] bits 2t..2t+1.
  std::vector<uint8_t> b(210, 0);
  int8_t s[16];
  for (int k = 0; k < 16; ++k) s[k] = static_cast<int8_t>((k % 2 ? -1 : 1) * (8 * k + 1));
  std::memcpy(&b[192], s, 16);
  put_half(&b[208], 0.0625f);
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, t = (i % 128) / 32, l = i % 32, q = (13 * i + 1) % 64;
    b[64 * h + l + 32 * (t % 2)] |= static_cast<uint8_t>(t < 2 ? q & 15 : (q & 15) << 4);
    b[128 + 32 * h + l] |= static_cast<uint8_t>((q >> 4) << (2 * t));
  }
  const std::vector<float> y = decode(gguf::Q6_K, b, 256);
  EXPECT_EQ(y[0], -1.9375f);   // (1/16) * 1 * (1 - 32)
  EXPECT_EQ(y[255], -151.25f);  // (1/16) * -121 * (52 - 32)
  for (int i = 0; i < 256; ++i) {
    const int q = (13 * i + 1) % 64;
    ASSERT_EQ(y[i], 0.0625f * s[i / 16] * (q - 32)) << "value " << i;
  }
}

// BF16: the top half of an f32. By hand, and every one of the 65536 values against ggml's conversion.
TEST(GgufBlocks, Bf16Decodes) {
  const std::vector<uint16_t> h = {0x3F80, 0xC040, 0x0001, 0x7F80, 0x8000};
  std::vector<uint8_t> bytes(h.size() * 2);
  std::memcpy(bytes.data(), h.data(), bytes.size());
  const std::vector<float> y = decode(gguf::BF16, bytes, h.size());
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -3.0f);
  EXPECT_EQ(y[2], std::ldexp(1.0f, -133));  // the smallest bf16 subnormal
  EXPECT_EQ(y[3], INFINITY);
  EXPECT_TRUE(y[4] == 0.0f && std::signbit(y[4]));
  if (!llamacpp_missing_reason().empty()) return;
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<uint8_t> all_bytes(all.size() * 2);
  std::memcpy(all_bytes.data(), all.data(), all_bytes.size());
  const std::vector<float> ours = decode(gguf::BF16, all_bytes, all.size());
  std::vector<float> theirs(all.size());
  ggml_ref().bf16_to_fp32_row(all.data(), theirs.data(), static_cast<int64_t>(all.size()));
  EXPECT_EQ(0, std::memcmp(ours.data(), theirs.data(), ours.size() * 4));
}

TEST(GgufBlocks, TypeTableMatchesGgml) {
  SKIP_WITHOUT_LLAMACPP();
  const GgmlRef& g = ggml_ref();
  int known = 0;
  for (uint32_t t = 0; t < 64; ++t) {
    const gguf::BlockSize ours = gguf::block_size(t);
    const bool ggml_has = t < 43 && g.blck_size(static_cast<int>(t)) > 0;
    ASSERT_EQ(ours.elems > 0, ggml_has) << "type " << t;
    if (!ggml_has) continue;
    ++known;
    EXPECT_EQ(ours.elems, static_cast<uint64_t>(g.blck_size(static_cast<int>(t)))) << gguf::type_name(t);
    EXPECT_EQ(ours.bytes, g.type_size(static_cast<int>(t))) << gguf::type_name(t);
    std::string name = g.type_name(static_cast<int>(t));
    for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_EQ(gguf::type_name(t), name);
  }
  EXPECT_EQ(known, 35);
}

// The fp16 conversions every block scale goes through: ours equal ggml's on every half and on floats around
// every rounding boundary.
TEST(GgufBlocks, HalfConversionsMatchGgml) {
  SKIP_WITHOUT_LLAMACPP();
  const GgmlRef& g = ggml_ref();
  for (uint32_t h = 0; h < 65536; ++h) {
    const float a = f16_to_f32(static_cast<uint16_t>(h)), b = g.fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(b)) {  // ggml quiets signalling NaNs (its conversion goes through float arithmetic)
      ASSERT_TRUE(std::isnan(a)) << "half 0x" << std::hex << h;
      continue;
    }
    uint32_t ab, bb;
    std::memcpy(&ab, &a, 4), std::memcpy(&bb, &b, 4);
    ASSERT_EQ(ab, bb) << "half 0x" << std::hex << h;
  }
  std::mt19937 rng(5);
  int64_t compared = 0;
  for (uint32_t h = 0; h < 0x7C00; ++h) {  // every finite half, the midpoints to its neighbour and around them
    const float v = f16_to_f32(static_cast<uint16_t>(h)), next = f16_to_f32(static_cast<uint16_t>(h + 1));
    const float mid = v + (next - v) / 2;
    for (float x : {v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f), -mid, -v}) {
      ASSERT_EQ(f32_to_f16(x), g.fp32_to_fp16(x)) << x;
      ++compared;
    }
  }
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = rng();
    float x;
    std::memcpy(&x, &bits, 4);
    if (std::isnan(x)) continue;  // NaN payloads aside, NaN maps to NaN in both (checked below)
    ASSERT_EQ(f32_to_f16(x), g.fp32_to_fp16(x)) << x;
    ++compared;
  }
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(NAN))));
  EXPECT_TRUE(std::isnan(g.fp16_to_fp32(g.fp32_to_fp16(NAN))));
  EXPECT_GT(compared, 300000);
}

// Random blocks of `type`: random bytes with the fp16 scale fields (at `scale_at`) drawn from ordinary
// values, the extremes (largest, smallest normal and subnormal, zero, both signs) and non-finite ones,
// plus an all-zero and an all-ones block.
std::vector<uint8_t> random_blocks(uint32_t type, size_t n_blocks, std::vector<size_t> scale_at, uint32_t seed) {
  const size_t bb = gguf::block_size(type).bytes;
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(n_blocks * bb);
  for (uint8_t& x : b) x = static_cast<uint8_t>(rng());
  const uint16_t extremes[] = {0x7BFF, 0xFBFF, 0x0400, 0x8400, 0x0001, 0x8001, 0x03FF, 0x0000, 0x8000, 0x3C00,
                               0x7C00, 0xFC00, 0x7E00};
  for (size_t k = 0; k < n_blocks; ++k)
    for (size_t at : scale_at) {
      uint16_t h;
      if (k % 3 == 0) {
        h = extremes[rng() % std::size(extremes)];
      } else {  // an ordinary scale: exponent 2^-10 .. 2^2, either sign
        h = static_cast<uint16_t>(((rng() % 2) << 15) | ((5 + rng() % 13) << 10) | (rng() % 1024));
      }
      std::memcpy(&b[k * bb + at], &h, 2);
    }
  std::memset(&b[0], 0, bb);            // all zero
  std::memset(&b[bb], 0xFF, bb);        // all ones (NaN scales)
  return b;
}

TEST(GgufBlocks, DecodingIsLlamaCppsBitForBit) {
  SKIP_WITHOUT_LLAMACPP();
  const GgmlRef& g = ggml_ref();
  struct Case {
    uint32_t type;
    std::vector<size_t> scale_at;
  };
  for (const Case& c : {Case{gguf::Q4_0, {0}}, Case{gguf::Q8_0, {0}}, Case{gguf::Q4_K, {0, 2}},
                        Case{gguf::Q5_K, {0, 2}}, Case{gguf::Q6_K, {208}}}) {
    SCOPED_TRACE(gguf::type_name(c.type));
    const size_t n_blocks = 3000, per = gguf::block_size(c.type).elems, n = n_blocks * per;
    const std::vector<uint8_t> b = random_blocks(c.type, n_blocks, c.scale_at, 17 + c.type);
    std::vector<float> ours(n), theirs(n);
    gguf::decode_to_f32(c.type, b.data(), n, ours.data());
    g.dequantize(c.type)(b.data(), theirs.data(), static_cast<int64_t>(n));
    int64_t nan = 0, inf = 0, zero_blocks = 0;
    for (size_t i = 0; i < n; ++i) {
      if (std::isnan(theirs[i])) {
        ASSERT_TRUE(std::isnan(ours[i])) << "value " << i << ": llama.cpp NaN, ours " << ours[i];
        ++nan;
        continue;
      }
      uint32_t a, t;
      std::memcpy(&a, &ours[i], 4), std::memcpy(&t, &theirs[i], 4);
      ASSERT_EQ(a, t) << "value " << i << " (block " << i / per << "): ours " << ours[i] << ", llama.cpp " << theirs[i];
      inf += std::isinf(theirs[i]);
    }
    for (size_t k = 0; k < n_blocks; ++k) {
      bool all_zero = true;
      for (size_t i = 0; i < per; ++i) all_zero &= theirs[k * per + i] == 0.0f;
      zero_blocks += all_zero;
    }
    EXPECT_GT(nan, 0) << "no non-finite scale exercised";
    EXPECT_GE(zero_blocks, 1);
    std::printf("[ ggml ] %s: %zu values of %zu random blocks identical to dequantize_row (%lld NaN, %lld inf)\n",
                gguf::type_name(c.type).c_str(), n, n_blocks, static_cast<long long>(nan), static_cast<long long>(inf));
  }
}

// Rows of values of the kinds a quantizer meets, `per_kind` values each (a multiple of 256).
std::vector<std::vector<float>> quantizer_inputs(size_t per_kind) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(0.0f, 1.0f);
  std::vector<std::vector<float>> kinds;
  auto add = [&](auto gen) {
    std::vector<float> v(per_kind);
    for (size_t i = 0; i < per_kind; ++i) v[i] = gen(i);
    kinds.push_back(std::move(v));
  };
  for (float sigma : {1e-7f, 1e-3f, 0.02f, 1.0f, 300.0f, 3e6f}) add([&](size_t) { return sigma * normal(rng); });
  add([&](size_t) { return uni(rng); });           // all positive: the min clamps to 0
  add([&](size_t) { return -2.0f * uni(rng); });   // all negative
  add([&](size_t) { return 0.0f; });
  add([&](size_t) { return 0.5f; });
  add([&](size_t) { return -3.0f; });
  add([&](size_t i) { return i % 97 == 5 ? 1.0f : 0.0f; });                          // lone values
  add([&](size_t i) { return normal(rng) * (i % 61 == 0 ? 100.0f : 1.0f); });        // outliers
  add([&](size_t i) { return static_cast<float>(static_cast<int>(i % 16) - 8) * 0.125f; });  // already a 4-bit grid
  add([&](size_t) { return std::ldexp(normal(rng), -140); });                        // f32 subnormals
  add([&](size_t) { return 1e30f * normal(rng); });                                  // fp16 scales overflow
  return kinds;
}

TEST(GgufBlocks, QuantizersWriteLlamaCppsBytes) {
  SKIP_WITHOUT_LLAMACPP();
  const GgmlRef& g = ggml_ref();
  const size_t n = 256 * 64;
  const auto inputs = quantizer_inputs(n);
  for (uint32_t type : {gguf::Q4_0, gguf::Q8_0, gguf::Q4_K}) {
    SCOPED_TRACE(gguf::type_name(type));
    const gguf::BlockSize bs = gguf::block_size(type);
    size_t blocks = 0;
    for (size_t k = 0; k < inputs.size(); ++k) {
      const std::vector<float>& x = inputs[k];
      const std::vector<uint8_t> ours = type == gguf::Q4_0   ? gguf::quantize_q4_0(x.data(), n)
                                        : type == gguf::Q8_0 ? gguf::quantize_q8_0(x.data(), n)
                                                             : gguf::quantize_q4_k(x.data(), n);
      std::vector<uint8_t> theirs(n / bs.elems * bs.bytes, 0xAB);
      g.quantize_ref(type)(x.data(), theirs.data(), static_cast<int64_t>(n));
      ASSERT_EQ(ours.size(), theirs.size());
      size_t differ = 0, first = 0;
      for (size_t b = 0; b < n / bs.elems; ++b)
        if (std::memcmp(&ours[b * bs.bytes], &theirs[b * bs.bytes], bs.bytes) != 0 && differ++ == 0) first = b;
      EXPECT_EQ(differ, 0u) << "input kind " << k << ": " << differ << " of " << n / bs.elems
                            << " blocks differ from quantize_row_" << gguf::type_name(type) << "_ref, first block " << first;
      blocks += n / bs.elems;
    }
    std::printf("[ ggml ] %s: %zu blocks of %zu input kinds identical to llama.cpp's reference quantizer\n",
                gguf::type_name(type).c_str(), blocks, inputs.size());
  }
}

// Q4_K of ordinary weights decodes close to them: the quantizer is not only llama.cpp's but sane.
TEST(GgufBlocks, Q4KRoundTripError) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> w(256 * 128);
  for (float& x : w) x = normal(rng);
  const std::vector<uint8_t> q = gguf::quantize_q4_k(w.data(), w.size());
  ASSERT_EQ(q.size(), w.size() / 256 * 144);
  const std::vector<float> back = decode(gguf::Q4_K, q, w.size());
  double err = 0, ref = 0;
  for (size_t i = 0; i < w.size(); ++i) err += (back[i] - w[i]) * double(back[i] - w[i]), ref += w[i] * double(w[i]);
  const double rel = std::sqrt(err / ref);
  std::printf("[ q4_k ] gaussian weights: relative RMS error %.4f\n", rel);
  EXPECT_LT(rel, 0.12);  // 16 levels over ~6 sigma per sub-block: ~0.1 expected
  EXPECT_GT(rel, 0.01);
  EXPECT_THROW(gguf::quantize_q4_k(w.data(), 255), Error);
  w[7] = NAN;
  EXPECT_THROW(gguf::quantize_q4_k(w.data(), w.size()), Error);
}

}  // namespace
}  // namespace edgetrain::test
