// llama.cpp's own C functions as the reference for GGUF blocks: the ggml and llama shared libraries of the
// pinned node-llama-cpp install (the prebuilt CPU build under .deps/llamacpp that llama_ref.mjs runs), opened
// with dlopen. libggml-base exports ggml's reference codecs (dequantize_row_q4_K, quantize_row_q4_K_ref, the
// fp16 conversions, the type table); libllama exports llama_model_quantize, llama.cpp's `llama-quantize`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace edgetrain::test {

struct GgmlRef {
  using RowToFloat = void (*)(const void* blocks, float* y, int64_t k);
  using RowFromFloat = void (*)(const float* x, void* blocks, int64_t k);
  // ggml's type table.
  int64_t (*blck_size)(int type) = nullptr;
  size_t (*type_size)(int type) = nullptr;
  const char* (*type_name)(int type) = nullptr;
  uint16_t (*fp32_to_fp16)(float) = nullptr;
  float (*fp16_to_fp32)(uint16_t) = nullptr;
  void (*bf16_to_fp32_row)(const uint16_t* x, float* y, int64_t n) = nullptr;
  // dequantize_row_<type> and quantize_row_<type>_ref by ggml type number; null for a type without one.
  RowToFloat dequantize(uint32_t type) const;
  RowFromFloat quantize_ref(uint32_t type) const;
  // llama_model_quantize(in, out, ftype) with llama.cpp's default parameters (no importance matrix):
  // returns 0 on success. ftype is a llama_ftype (15 = Q4_K_M).
  uint32_t quantize_model(const std::string& in, const std::string& out, int ftype) const;

  void* base = nullptr;   // libggml-base
  void* llama = nullptr;  // libllama
  std::string dir;        // the folder holding them
};

// The libraries, opened once. Throws std::runtime_error when llama.cpp is installed (llamacpp_missing_reason()
// is "") but they cannot be found or lack a symbol; callers skip on llamacpp_missing_reason() first.
const GgmlRef& ggml_ref();

}  // namespace edgetrain::test
