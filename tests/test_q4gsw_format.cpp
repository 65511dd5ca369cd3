// The q4gsw weight format helpers (q4gsw.h): W_4X8 addressing against OPS.md's worked examples, pack/unpack
// and interchange round trips on odd shapes, padding codes, the requant rounding rule and quantize().
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "edgetrain/error.h"
#include "edgetrain/half.h"
#include "edgetrain/q4gsw.h"

namespace edgetrain::test {
namespace {

std::vector<uint8_t> random_codes(std::mt19937& gen, int64_t n) {
  std::uniform_int_distribution<int> d(0, 15);
  std::vector<uint8_t> c(static_cast<size_t>(n));
  for (auto& v : c) v = static_cast<uint8_t>(d(gen));
  return c;
}

// OPS.md 1.5, N = K = 8: int j of block k4 holds rows 2j (low nibble) and 2j+1 (high nibble), byte b = k.
TEST(Q4Format, WorkedExampleN8K8) {
  q4::Geometry g(8, 8, 32);
  EXPECT_EQ(g.K4(), 2);
  EXPECT_EQ(g.N8(), 1);
  EXPECT_EQ(g.words(), 8);
  // w[5][6]: block k4 = 1, int 2 (rows 4, 5) -> word 6; byte 2 (k % 4), high nibble (n odd) -> shift 20.
  EXPECT_EQ(q4::w4x8_word(5, 6, g.N8()), 6);
  EXPECT_EQ(q4::w4x8_shift(5, 6), 20);
  EXPECT_EQ(q4::w4x8_word(0, 0, 1), 0);
  EXPECT_EQ(q4::w4x8_shift(0, 0), 0);
  EXPECT_EQ(q4::w4x8_word(7, 7, 1), 7);
  EXPECT_EQ(q4::w4x8_shift(7, 7), 28);
  EXPECT_EQ(q4::w4x8_word(2, 1, 1), 1);
  EXPECT_EQ(q4::w4x8_shift(2, 1), 8);
  // The whole table: code c[n,k] = (n*8 + k) % 16 must appear exactly at the table's nibble.
  std::vector<uint8_t> codes(64);
  for (int n = 0; n < 8; ++n)
    for (int k = 0; k < 8; ++k) codes[n * 8 + k] = static_cast<uint8_t>((n * 8 + k) % 16);
  auto words = q4::pack_w4x8(g, codes.data());
  for (int word = 0; word < 8; ++word)
    for (int nib = 0; nib < 8; ++nib) {
      int k = 4 * (word / 4) + nib / 2, n = 2 * (word % 4) + nib % 2;
      EXPECT_EQ((words[word] >> (4 * nib)) & 0xFu, codes[n * 8 + k]) << "int " << word << " nibble " << nib;
    }
}

// OPS.md 1.5 padding example, N = 12, K = 8: N8 = 2, blocks (k4, n8) = (0,0), (0,1), (1,0), (1,1); ints 6, 7,
// 14, 15 (rows 12..15 of the second column of blocks) are all padding.
TEST(Q4Format, PaddingExampleN12K8) {
  q4::Geometry g(12, 8, 8);
  EXPECT_EQ(g.N8(), 2);
  EXPECT_EQ(g.words(), 16);
  std::mt19937 gen(1);
  auto codes = random_codes(gen, 12 * 8);
  auto words = q4::pack_w4x8(g, codes.data());
  for (int i : {6, 7, 14, 15}) EXPECT_EQ(words[i], 0x88888888u) << "int " << i;
  // Rows 8..11 live in ints 4-5 (k 0..3) and 12-13 (k 4..7).
  EXPECT_EQ(q4::w4x8_word(8, 0, 2), 4);
  EXPECT_EQ(q4::w4x8_word(11, 3, 2), 5);
  EXPECT_EQ(q4::w4x8_word(10, 4, 2), 13);
  EXPECT_EQ(q4::w4x8_word(9, 7, 2), 12);
  EXPECT_EQ(q4::unpack_w4x8(g, words.data()), codes);
}

TEST(Q4Format, PackUnpackRoundTripAndPadding) {
  std::mt19937 gen(2);
  for (int64_t N : {1, 3, 7, 8, 9, 12, 13, 16, 17, 33})
    for (int64_t K : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 33, 64, 67}) {
      SCOPED_TRACE("N=" + std::to_string(N) + " K=" + std::to_string(K));
      q4::Geometry g(N, K, 4);
      auto codes = random_codes(gen, N * K);
      auto words = q4::pack_w4x8(g, codes.data());
      ASSERT_EQ(static_cast<int64_t>(words.size()), 4 * ((K + 3) / 4) * ((N + 7) / 8));
      EXPECT_EQ(q4::unpack_w4x8(g, words.data()), codes);
      // Every nibble outside [N, K] holds code 8; count them to be sure none is missed or overwritten.
      int64_t pad = 0;
      for (int64_t n = 0; n < 8 * g.N8(); ++n)
        for (int64_t k = 0; k < 4 * g.K4(); ++k) {
          uint32_t c = (words[q4::w4x8_word(n, k, g.N8())] >> q4::w4x8_shift(n, k)) & 0xFu;
          if (n >= N || k >= K) {
            EXPECT_EQ(c, 8u) << "padding nibble n=" << n << " k=" << k;
            ++pad;
          } else {
            EXPECT_EQ(c, codes[n * K + k]);
          }
        }
      EXPECT_EQ(pad, 32 * g.N8() * g.K4() - N * K);
    }
}

TEST(Q4Format, InterchangeRoundTripOddK) {
  std::mt19937 gen(3);
  for (int64_t N : {1, 4, 5})
    for (int64_t K : {1, 2, 7, 8, 33}) {
      SCOPED_TRACE("N=" + std::to_string(N) + " K=" + std::to_string(K));
      q4::Geometry g(N, K, 32);
      auto codes = random_codes(gen, N * K);
      auto bytes = q4::codes_to_interchange(g, codes.data());
      ASSERT_EQ(static_cast<int64_t>(bytes.size()), N * ((K + 1) / 2));
      EXPECT_EQ(q4::interchange_to_codes(g, bytes.data()), codes);
      for (int64_t n = 0; n < N; ++n) {
        // Even k in the low nibble, odd k in the high one.
        EXPECT_EQ(bytes[n * g.interchange_row_bytes()] & 0xF, codes[n * K]);
        if (K % 2) EXPECT_EQ(bytes[n * g.interchange_row_bytes() + K / 2] >> 4, 8) << "odd-K pad nibble, row " << n;
        else EXPECT_EQ(bytes[n * g.interchange_row_bytes() + K / 2 - 1] >> 4, codes[n * K + K - 1]);
      }
    }
}

TEST(Q4Format, RequantCodeRounding) {
  // Ties to even: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> -0 (code 8), -1.5 -> -2, -2.5 -> -2.
  EXPECT_EQ(q4::requant_code(0.5f, 1.0f), 8);
  EXPECT_EQ(q4::requant_code(1.5f, 1.0f), 10);
  EXPECT_EQ(q4::requant_code(2.5f, 1.0f), 10);
  EXPECT_EQ(q4::requant_code(-0.5f, 1.0f), 8);
  EXPECT_EQ(q4::requant_code(-1.5f, 1.0f), 6);
  EXPECT_EQ(q4::requant_code(-2.5f, 1.0f), 6);
  EXPECT_EQ(q4::requant_code(0.49f, 1.0f), 8);
  EXPECT_EQ(q4::requant_code(0.51f, 1.0f), 9);
  // The scale divides: 0.75 / 0.5 = 1.5 -> 2; 3 / 0.25 = 12 -> clamp 7.
  EXPECT_EQ(q4::requant_code(0.75f, 0.5f), 10);
  EXPECT_EQ(q4::requant_code(3.0f, 0.25f), 15);
  EXPECT_EQ(q4::requant_code(-7.5f, 1.0f), 0);  // -8 is in range
  // Clamp to [-8, 7].
  EXPECT_EQ(q4::requant_code(100.0f, 1.0f), 15);
  EXPECT_EQ(q4::requant_code(-100.0f, 1.0f), 0);
  EXPECT_EQ(q4::requant_code(std::numeric_limits<float>::infinity(), 1.0f), 15);
  EXPECT_EQ(q4::requant_code(-std::numeric_limits<float>::infinity(), 1.0f), 0);
  // Zero scale and NaN give value 0.
  EXPECT_EQ(q4::requant_code(3.0f, 0.0f), 8);
  EXPECT_EQ(q4::requant_code(std::numeric_limits<float>::quiet_NaN(), 1.0f), 8);
  EXPECT_EQ(q4::requant_code(0.0f, 0.0f), 8);
}

TEST(Q4Format, QuantizeHandMadeGroup) {
  // N = 2, K = 6, gs = 4: groups k 0..3 and a partial group k 4..5. Row 0 uses scales that are powers of
  // two, so w / s is exact and ties are real ties.
  q4::Geometry g(2, 6, 4);
  std::vector<float> w = {
      7.0f, -2.5f, 1.5f, 0.5f,   // amax 7 -> s 1: q 7, -2 (tie), 2 (tie), 0 (tie)
      3.5f, -1.25f,              // amax 3.5 -> s 0.5: q 7, -2.5 -> -2 (tie)
      0.7f, -0.35f, 0.1f, 0.0f,  // amax 0.7 -> s 0.1: q 7, about -3.5, 1, 0
      0.0f, 0.0f,                // all zero -> s 0, codes 8
  };
  auto q = q4::quantize(g, w.data());
  ASSERT_EQ(q.scales.size(), 4u);  // [G = 2, N = 2]
  EXPECT_EQ(q.scales[0], 1.0f);
  EXPECT_EQ(q.scales[1], round_to_f16(0.7f / 7.0f));  // every scale is an fp16 value
  EXPECT_EQ(q.scales[2], 0.5f);
  EXPECT_EQ(q.scales[3], 0.0f);
  std::vector<int> row0 = {7, -2, 2, 0, 7, -2};
  for (int k = 0; k < 6; ++k) EXPECT_EQ(q.codes[k], row0[k] + 8) << "row 0, k " << k;
  EXPECT_EQ(q.codes[6 + 0], 7 + 8);
  // -0.35 / fp16(0.1) lands near the tie -3.5: either neighbour is right.
  EXPECT_TRUE(q.codes[6 + 1] == 8 - 3 || q.codes[6 + 1] == 8 - 4) << int(q.codes[7]);
  EXPECT_EQ(q.codes[6 + 2], 1 + 8);
  EXPECT_EQ(q.codes[6 + 3], 8);
  EXPECT_EQ(q.codes[6 + 4], 8);
  EXPECT_EQ(q.codes[6 + 5], 8);
  // Dequantizing maps the largest weight of each group back to itself, up to the fp16 rounding of its
  // scale (relative 2^-11).
  auto d = q4::dequantize(g, q.codes.data(), q.scales.data());
  EXPECT_EQ(d[0], 7.0f);
  EXPECT_EQ(d[4], 3.5f);
  EXPECT_NEAR(d[6], 0.7f, 0.7f * 0x1p-11f);
  EXPECT_EQ(d[10], 0.0f);
}

TEST(Q4Format, GeometryRejectsBadArguments) {
  EXPECT_THROW(q4::Geometry(0, 8, 32), Error);
  EXPECT_THROW(q4::Geometry(8, 0, 32), Error);
  EXPECT_THROW(q4::Geometry(8, 8, 6), Error);
  EXPECT_THROW(q4::Geometry(8, 8, 0), Error);
  q4::Geometry g(5, 70, 32);
  EXPECT_EQ(g.groups(), 3);  // partial last group
  std::vector<uint8_t> bad(5 * 70, 16);
  EXPECT_THROW(q4::pack_w4x8(g, bad.data()), Error);
}

}  // namespace
}  // namespace edgetrain::test
