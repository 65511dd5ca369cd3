// GGUF tensor types: their names, their sizes, their decoding to f32 (F32, F16, Q4_0, Q8_0), llama.cpp's
// Q4_0 quantizer, and the exact Q4_0 <-> q4gsw (group 32) conversion. fp16 goes through core/half.
#include <cmath>
#include <cstring>

#include "edgetrain/error.h"
#include "edgetrain/half.h"
#include "io/gguf.h"

namespace edgetrain::gguf {

const char* type_name(uint32_t t) {
  switch (t) {
    case F32: return "F32";
    case F16: return "F16";
    case Q4_0: return "Q4_0";
    case Q8_0: return "Q8_0";
  }
  return "unsupported";
}

uint64_t tensor_bytes(uint32_t type, uint64_t numel, const std::string& what) {
  switch (type) {
    case F32: return numel * 4;
    case F16: return numel * 2;
    case Q4_0:
    case Q8_0:
      ET_CHECK(numel % 32 == 0, what, ": ", type_name(type), " needs a multiple of 32 elements, got ", numel);
      return numel / 32 * (type == Q4_0 ? 18 : 34);
  }
  fail(what, ": unsupported tensor type ", type, " (supported: F32, F16, Q4_0, Q8_0)");
}

static float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

void decode_to_f32(uint32_t type, const uint8_t* src, uint64_t numel, float* dst) {
  switch (type) {
    case F32:
      if (numel) std::memcpy(dst, src, numel * 4);
      return;
    case F16:
      for (uint64_t i = 0; i < numel; ++i) dst[i] = half(src + 2 * i);
      return;
    case Q4_0: return decode_q4_0(src, numel, dst);
    case Q8_0: return decode_q8_0(src, numel, dst);
  }
  fail("gguf: cannot decode tensor type ", type, " (supported: F32, F16, Q4_0, Q8_0)");
}

void decode_q4_0(const uint8_t* src, uint64_t numel, float* dst) {
  for (uint64_t b = 0; b < numel / 32; ++b) {
    const uint8_t* blk = src + b * 18;
    float d = half(blk);
    for (int j = 0; j < 16; ++j) {
      dst[b * 32 + j] = static_cast<float>((blk[2 + j] & 0xf) - 8) * d;
      dst[b * 32 + j + 16] = static_cast<float>((blk[2 + j] >> 4) - 8) * d;
    }
  }
}

void decode_q8_0(const uint8_t* src, uint64_t numel, float* dst) {
  for (uint64_t b = 0; b < numel / 32; ++b) {
    const uint8_t* blk = src + b * 34;
    float d = half(blk);
    for (int j = 0; j < 32; ++j) dst[b * 32 + j] = static_cast<float>(static_cast<int8_t>(blk[2 + j])) * d;
  }
}

void q4_0_to_q4gsw(const uint8_t* src, int64_t N, int64_t K, uint8_t* codes, float* scales) {
  ET_CHECK(K % 32 == 0, "Q4_0: K = ", K, " is not a multiple of 32");
  const int64_t G = K / 32;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      const uint8_t* blk = src + (n * G + g) * 18;
      scales[g * N + n] = half(blk);
      for (int j = 0; j < 16; ++j) {
        codes[n * K + g * 32 + j] = blk[2 + j] & 0xf;
        codes[n * K + g * 32 + j + 16] = blk[2 + j] >> 4;
      }
    }
}

std::vector<uint8_t> q4gsw_to_q4_0(int64_t N, int64_t K, const uint8_t* codes, const float* scales) {
  ET_CHECK(K % 32 == 0, "Q4_0: K = ", K, " is not a multiple of 32");
  const int64_t G = K / 32;
  std::vector<uint8_t> out(static_cast<size_t>(N * G * 18));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      uint8_t* blk = out.data() + (n * G + g) * 18;
      float s = scales[g * N + n];
      uint16_t h = f32_to_f16(s);
      ET_CHECK(f16_to_f32(h) == s, "Q4_0: scale ", s, " (row ", n, ", group ", g,
               ") is not representable in fp16");
      std::memcpy(blk, &h, 2);
      for (int j = 0; j < 16; ++j)
        blk[2 + j] = static_cast<uint8_t>((codes[n * K + g * 32 + j] & 0xf) | (codes[n * K + g * 32 + j + 16] << 4));
    }
  return out;
}

std::vector<uint8_t> quantize_q4_0(const float* w, uint64_t numel) {
  std::vector<uint8_t> out(static_cast<size_t>(numel / 32 * 18));
  for (uint64_t b = 0; b < numel / 32; ++b) {
    const float* x = w + b * 32;
    float amax = 0, mx = 0;
    for (int j = 0; j < 32; ++j)
      if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), mx = x[j];
    uint16_t h = f32_to_f16(mx / -8.0f);
    float d = f16_to_f32(h);  // quantize with the stored (rounded) scale
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t* blk = out.data() + b * 18;
    std::memcpy(blk, &h, 2);
    auto code = [&](float v) {
      int c = static_cast<int>(std::nearbyint(v * id)) + 8;
      return static_cast<uint8_t>(c < 0 ? 0 : c > 15 ? 15 : c);
    };
    for (int j = 0; j < 16; ++j) blk[2 + j] = static_cast<uint8_t>(code(x[j]) | (code(x[j + 16]) << 4));
  }
  return out;
}
}  // namespace edgetrain::gguf
