// Creating backends: by name, or the best one present ("auto"), and listing what is present.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "edgetrain/backend.h"

namespace edgetrain {

struct BackendOptions {
  int threads = 0;              // CPU: worker threads (0 = all cores)
  std::string device;           // Vulkan/WebGPU: device index or a substring of its name ("" = best)
  bool validation = false;      // Vulkan: enable the Khronos validation layer; messages become errors
  bool sync_validation = false; // Vulkan: also enable synchronization validation
};

// One device a backend can run on, for `edgetrain info` and auto selection.
struct DeviceInfo {
  std::string backend;    // "cpu", "vulkan", "webgpu"
  std::string name;       // device name
  std::string kind;       // "cpu", "discrete", "integrated", "software", "other"
  std::string details;    // driver, limits...
  bool usable = true;     // false with a reason in details when it cannot be used
};

// Every device of every compiled-in backend (never throws: failures become usable=false entries).
std::vector<DeviceInfo> list_devices();

// name: "cpu", "vulkan", "webgpu" or "auto" (a real GPU via Vulkan, then WebGPU, else the CPU; software
// rasterizers such as lavapipe or SwiftShader are never chosen by auto). Throws Error when unavailable.
std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& opts = {});
// Why auto picked what it picked (one line), after make_backend("auto").
std::string auto_choice_reason();

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& opts = {});

}  // namespace edgetrain
