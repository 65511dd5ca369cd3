// The precision of a model's training and evaluation steps (--precision): fp32, the reference, or fp16
// mixed precision (fp16 GEMM operands with fp32 accumulation, everything else in fp32, dynamic loss
// scaling); and what --precision auto picks on a backend, with the reason.
#pragma once

#include <string>

namespace edgetrain {

class Backend;

enum class Precision { fp32, fp16 };
const char* precision_name(Precision p);

struct PrecisionChoice {
  Precision precision = Precision::fp32;
  std::string why;  // one line for the run's log and `edgetrain info`
};
// flag: "fp32", "fp16" or "auto". auto takes fp16 where the backend's fp16 GEMMs are faster than its fp32
// ones (Backend::fp16_speed) and fp32 elsewhere. An explicit fp16 is honoured wherever the backend offers
// it (every backend computes the same fp16 arithmetic; WebGPU only on an adapter with shader-f16, as the
// issue that specified the flag asked: fp32 there otherwise); where it is not faster the reason says so.
// Throws Error (misuse) naming a bad flag.
PrecisionChoice choose_precision(const std::string& flag, const Backend& b);
// Checks a --precision value without a backend (for option validation before any device starts).
void check_precision_flag(const std::string& flag);

}  // namespace edgetrain
