// Creating backends: by name, or the best one present ("auto"), and listing what is present.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "edgetrain/backend.h"
#include "edgetrain/error.h"

namespace edgetrain {

struct BackendOptions {
  int threads = 0;              // CPU: worker threads (0 = all cores)
  std::string device;           // Vulkan/WebGPU: device index or a substring of its name ("" = best)
  bool validation = false;      // Vulkan: enable the Khronos validation layer; messages become errors
  bool sync_validation = false; // Vulkan: also enable synchronization validation
  // Bind at most this many bytes to one kernel (0: the device's own limit). Below the device's limit it
  // runs the part-at-a-time paths of a smaller device (a phone's, WebGPU's default) on this one.
  uint64_t max_binding_bytes = 0;
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
// A usable hardware GPU (discrete or integrated), not the CPU or a software rasterizer.
bool is_real_gpu(const DeviceInfo& d);

// A --backend value names what to run on and whether to fall back:
//   "cpu", "vulkan", "webgpu"  that backend only; if it fails, the failure is the error (no fallback);
//   "vulkan,cpu" (any order)   an ordered list: when one fails to start, the next is tried, with a notice;
//   "auto"                     shorthand for such a list: every hardware GPU (Vulkan, then WebGPU), then the
//                              CPU (software rasterizers such as lavapipe or SwiftShader are never chosen).
// Returns the names, checked: "auto" alone, or cpu/vulkan/webgpu each at most once. Throws Error naming a
// bad entry (without touching any device).
std::vector<std::string> parse_backend_spec(const std::string& spec);

// What a --backend value tries, in order: a backend, the options to create it with (auto: the device it
// picked) and why it is in the list (auto, for the log).
struct BackendCandidate {
  std::string backend;
  BackendOptions options;
  std::string why;
};
std::vector<BackendCandidate> backend_plan(const std::string& spec, const BackendOptions& opts = {});

// Whether a --backend list moves on to its next backend after `e`: only when the backend itself could not
// run the job, i.e. e.kind() is ErrorKind::device (no driver or device, lost device, out of device memory,
// a pipeline the driver cannot create) or ErrorKind::unsupported (not compiled in, no kernel, a device
// limit). Misuse, io and numeric errors are the input's fault and the same on every backend.
bool backend_list_falls_back(const Error& e);

// Calls attempt(candidate) for each candidate of the plan in turn until one returns; returns that one's
// index. When attempt throws an Error for which backend_list_falls_back() holds and a candidate is left,
// a notice goes to stderr ("edgetrain: backend vulkan failed<when> (...); falling back to cpu"), the notice is
// appended to *notes (if given), and the next candidate is tried; any other Error, or the last candidate's,
// is rethrown. The one fallback loop behind make_backend and train()'s start-up.
size_t first_that_starts(const std::vector<BackendCandidate>& plan,
                         const std::function<void(const BackendCandidate&)>& attempt, const char* when = "",
                         std::string* notes = nullptr);

// Creates the first backend of the plan for `spec` that starts; each one that fails before it gets a
// notice on stderr ("edgetrain: backend vulkan failed (...); falling back to cpu"). Throws the last
// failure's Error when none starts. A backend that starts may still fail later (a kernel its driver
// cannot compile): `edgetrain train` falls back through the whole start-up, see train().
std::unique_ptr<Backend> make_backend(const std::string& spec, const BackendOptions& opts = {});
// Why the last make_backend chose what it chose (one line): auto's choice, or the fallbacks taken.
std::string auto_choice_reason();

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& opts = {});

}  // namespace edgetrain
