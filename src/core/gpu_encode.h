// What the encoders of the two GPU backends (src/vulkan, src/webgpu) share: the environment switches that
// force a kernel path, read once into each backend's tuning struct.
#pragma once

#include <cstdint>

namespace edgetrain::gpu {

// How a switch forces a kernel path. Unset (or an unknown value) leaves the choice to the encoder's
// measured default; "0" never takes the path; "all" takes it on every shape it can run (so the tests cover
// its tile edges on small shapes); "1", where a switch offers it, takes it on large shapes on any device.
enum class Force : uint8_t { automatic, never, large, all };
Force force_from_env(const char* name, bool offers_large);

}  // namespace edgetrain::gpu
