// WebGPU encoders of the elementwise ops (none yet).
#include "webgpu/kernel.h"

namespace edgetrain::wg {

Encoder elementwise_encoder(Op) { return nullptr; }

}  // namespace edgetrain::wg
