// Reference of the optimizer helpers: the global gradient norm and the clipping coefficient derived from it.
#include <cmath>
#include <limits>

#include "ref/ref.h"

namespace edgetrain::ref {

// x... : one or more f32 tensors of any shapes; norm [] = sqrt(sum over every element of every input of x^2).
// The sum is accumulated in double (the spec), so it neither overflows nor depends on the order of inputs.
void grad_norm(const Call& c) {
  double acc = 0.0;
  for (const View& t : c.in) {
    const float* p = t.as<float>();
    for (int64_t i = 0; i < t.numel(); ++i) acc += static_cast<double>(p[i]) * p[i];
  }
  *c.out[0].as<float>() = static_cast<float>(std::sqrt(acc));
}

// norm (one element), floats {max_norm}; coef [] = min(1, max_norm / (norm + 1e-6)).
// A NaN norm gives a NaN coefficient (fmin would silently return 1 and hide a diverged step).
void clip_coef(const Call& c) {
  const double norm = *c.in[0].as<float>(), max_norm = c.floats[0];
  double coef = std::isnan(norm) ? std::numeric_limits<double>::quiet_NaN() : max_norm / (norm + 1e-6);
  if (coef > 1.0) coef = 1.0;
  *c.out[0].as<float>() = static_cast<float>(coef);
}

}  // namespace edgetrain::ref
