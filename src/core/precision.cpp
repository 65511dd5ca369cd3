// --precision: names, validation and auto's choice from what the backend says about its fp16 GEMMs.
#include "edgetrain/precision.h"

#include "edgetrain/backend.h"

namespace edgetrain {

const char* precision_name(Precision p) { return p == Precision::fp16 ? "fp16" : "fp32"; }

void check_precision_flag(const std::string& flag) {
  ET_CHECK(flag == "fp32" || flag == "fp16" || flag == "auto", "--precision: unknown value '", flag,
           "' (choose fp32, fp16 or auto)");
}

PrecisionChoice choose_precision(const std::string& flag, const Backend& b) {
  check_precision_flag(flag);
  const Backend::Fp16Speed s = b.fp16_speed();
  if (flag == "fp32") return {Precision::fp32, "precision fp32 (--precision fp32)"};
  if (flag == "fp16" && !s.offered) return {Precision::fp32, "precision fp32 (--precision fp16 asked): " + s.why};
  if (flag == "fp16")
    return {Precision::fp16, s.fast ? "precision fp16 (--precision fp16): " + s.why
                                    : "precision fp16 (--precision fp16), not faster than fp32 on " + b.name() +
                                          ": " + s.why};
  if (s.fast) return {Precision::fp16, "precision fp16 (auto): " + s.why};
  return {Precision::fp32, "precision fp32 (auto): " + s.why};
}

}  // namespace edgetrain
