// The GPU encoders' shared helpers (gpu_encode.h).
#include "core/gpu_encode.h"

#include <cstdlib>
#include <string>

namespace edgetrain::gpu {

Force force_from_env(const char* name, bool offers_large) {
  const char* e = std::getenv(name);
  if (!e) return Force::automatic;
  const std::string v(e);
  if (v == "0") return Force::never;
  if (v == "all") return Force::all;
  return offers_large ? Force::large : Force::automatic;
}

}  // namespace edgetrain::gpu
