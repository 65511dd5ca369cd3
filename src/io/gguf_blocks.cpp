// GGUF tensor types: ggml's type table (names and block sizes of every type, so any file parses and names
// what it holds), decoding to f32 of F32, F16, BF16, Q4_0 and Q8_0, llama.cpp's Q4_0 and Q8_0 reference
// quantizers, and the exact Q4_0 <-> q4gsw (group 32) conversion. The K-quants are in gguf_kquants.cpp.
// fp16 goes through core/half.
#include <cmath>
#include <cstring>
#include <iterator>

#include "edgetrain/error.h"
#include "edgetrain/half.h"
#include "io/gguf.h"

namespace edgetrain::gguf {

namespace {

struct TypeInfo {
  const char* name;  // nullptr: a number ggml does not define (or no longer reads)
  BlockSize block;
};
// ggml's types by number (ggml.h), with the elements and bytes of one block (ggml's type traits;
// tests/test_gguf_blocks.cpp compares the table with llama.cpp's ggml_blck_size / ggml_type_size).
const TypeInfo kTypes[] = {
    {"F32", {1, 4}},        {"F16", {1, 2}},       {"Q4_0", {32, 18}},    {"Q4_1", {32, 20}},
    {nullptr, {}},          {nullptr, {}},         {"Q5_0", {32, 22}},    {"Q5_1", {32, 24}},
    {"Q8_0", {32, 34}},     {"Q8_1", {32, 36}},    {"Q2_K", {256, 84}},   {"Q3_K", {256, 110}},
    {"Q4_K", {256, 144}},   {"Q5_K", {256, 176}},  {"Q6_K", {256, 210}},  {"Q8_K", {256, 292}},
    {"IQ2_XXS", {256, 66}}, {"IQ2_XS", {256, 74}}, {"IQ3_XXS", {256, 98}}, {"IQ1_S", {256, 50}},
    {"IQ4_NL", {32, 18}},   {"IQ3_S", {256, 110}}, {"IQ2_S", {256, 82}},  {"IQ4_XS", {256, 136}},
    {"I8", {1, 1}},         {"I16", {1, 2}},       {"I32", {1, 4}},       {"I64", {1, 8}},
    {"F64", {1, 8}},        {"IQ1_M", {256, 56}},  {"BF16", {1, 2}},      {nullptr, {}},
    {nullptr, {}},          {nullptr, {}},         {"TQ1_0", {256, 54}},  {"TQ2_0", {256, 66}},
    {nullptr, {}},          {nullptr, {}},         {nullptr, {}},         {"MXFP4", {32, 17}},
    {"NVFP4", {64, 36}},    {"Q1_0", {128, 18}},   {"Q2_0", {64, 18}},
};

const TypeInfo* info(uint32_t t) {
  return t < std::size(kTypes) && kTypes[t].name != nullptr ? &kTypes[t] : nullptr;
}

float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

}  // namespace

std::string type_name(uint32_t t) {
  const TypeInfo* i = info(t);
  return i ? i->name : "type " + std::to_string(t);
}

BlockSize block_size(uint32_t t) {
  const TypeInfo* i = info(t);
  return i ? i->block : BlockSize{};
}

bool can_decode(uint32_t t) {
  switch (t) {
    case F32: case F16: case BF16: case Q4_0: case Q8_0: case Q4_K: case Q5_K: case Q6_K: return true;
  }
  return false;
}

const char* decodable_types() { return "F32, F16, BF16, Q4_0, Q8_0, Q4_K, Q5_K, Q6_K"; }

uint64_t tensor_bytes(uint32_t type, const std::vector<uint64_t>& ne, const std::string& what) {
  const BlockSize b = block_size(type);
  ET_CHECK(b.elems > 0, what, ": unknown tensor type ", type, " (not a ggml type)");
  ET_CHECK(!ne.empty() && ne[0] % b.elems == 0, what, ": a ", type_name(type), " row holds whole blocks of ",
           b.elems, " elements, but ne[0] = ", ne.empty() ? 0 : ne[0]);
  uint64_t n = 1;
  for (uint64_t e : ne) n *= e;  // the reader bounds every product to 2^50
  return n / b.elems * b.bytes;
}

void decode_to_f32(uint32_t type, const uint8_t* src, uint64_t numel, float* dst) {
  switch (type) {
    case F32:
      if (numel) std::memcpy(dst, src, numel * 4);
      return;
    case F16:
      for (uint64_t i = 0; i < numel; ++i) dst[i] = half(src + 2 * i);
      return;
    case BF16:
      for (uint64_t i = 0; i < numel; ++i) {
        uint16_t b;
        std::memcpy(&b, src + 2 * i, 2);
        dst[i] = bf16_to_f32(b);
      }
      return;
    case Q4_0: return decode_q4_0(src, numel, dst);
    case Q8_0: return decode_q8_0(src, numel, dst);
    case Q4_K: return decode_q4_k(src, numel, dst);
    case Q5_K: return decode_q5_k(src, numel, dst);
    case Q6_K: return decode_q6_k(src, numel, dst);
  }
  fail("gguf: cannot decode tensor type ", type_name(type), " (edgetrain decodes ", decodable_types(), ")");
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

namespace {
void check_finite(const float* w, uint64_t numel, const char* type) {
  for (uint64_t i = 0; i < numel; ++i)
    ET_CHECK_KIND(ErrorKind::numeric, std::isfinite(w[i]), "quantizing to ", type, ": value ", i, " is ", w[i],
                  " (only finite values can be quantized)");
}
}  // namespace

std::vector<uint8_t> quantize_q4_0(const float* w, uint64_t numel) {
  ET_CHECK(numel % 32 == 0, "quantizing to Q4_0: ", numel, " values are not whole blocks of 32");
  check_finite(w, numel, "Q4_0");
  std::vector<uint8_t> out(static_cast<size_t>(numel / 32 * 18));
  for (uint64_t b = 0; b < numel / 32; ++b) {
    const float* x = w + b * 32;
    float amax = 0, mx = 0;  // the first value of largest magnitude, with its sign
    for (int j = 0; j < 32; ++j)
      if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), mx = x[j];
    // llama.cpp codes with the unrounded d (its reciprocal), stores d rounded to fp16, and rounds by
    // truncating value/d + 8.5 (always >= 0 here, so truncation is floor).
    const float d = mx / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t h = f32_to_f16(d);
    uint8_t* blk = out.data() + b * 18;
    std::memcpy(blk, &h, 2);
    auto code = [&](float v) {
      const int c = static_cast<int>(v * id + 8.5f);
      return static_cast<uint8_t>(c > 15 ? 15 : c);
    };
    for (int j = 0; j < 16; ++j) blk[2 + j] = static_cast<uint8_t>(code(x[j]) | (code(x[j + 16]) << 4));
  }
  return out;
}

std::vector<uint8_t> quantize_q8_0(const float* w, uint64_t numel) {
  ET_CHECK(numel % 32 == 0, "quantizing to Q8_0: ", numel, " values are not whole blocks of 32");
  check_finite(w, numel, "Q8_0");
  std::vector<uint8_t> out(static_cast<size_t>(numel / 32 * 34));
  for (uint64_t b = 0; b < numel / 32; ++b) {
    const float* x = w + b * 32;
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = amax > std::fabs(x[j]) ? amax : std::fabs(x[j]);
    // As llama.cpp: the unrounded d's reciprocal codes, rounding half away from zero (roundf).
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t h = f32_to_f16(d);
    uint8_t* blk = out.data() + b * 34;
    std::memcpy(blk, &h, 2);
    for (int j = 0; j < 32; ++j)
      blk[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(static_cast<int>(std::round(x[j] * id))));
  }
  return out;
}

}  // namespace edgetrain::gguf
