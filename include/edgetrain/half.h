// IEEE half (fp16) and bfloat16 <-> f32: the one codec every reader, writer and quantizer uses.
#pragma once

#include <cstdint>

namespace edgetrain {

// f32 to the nearest half, ties to even; overflow gives infinity, NaN stays NaN.
uint16_t f32_to_f16(float f);
// Exact for every half: subnormals, infinities and NaN payloads.
float f16_to_f32(uint16_t h);
float bf16_to_f32(uint16_t b);
// The nearest fp16-representable value as f32 (f16_to_f32(f32_to_f16(f))).
inline float round_to_f16(float f) { return f16_to_f32(f32_to_f16(f)); }

}  // namespace edgetrain
