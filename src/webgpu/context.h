// The WebGPU device context: Dawn instance, adapter choice (Vulkan, else OpenGLES in compatibility mode;
// Dawn's Null backend is refused), the device with the adapter's full limits, and the error plumbing that
// turns Dawn's asynchronous errors (error scopes, uncaptured errors, device loss) into edgetrain::Error.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "edgetrain/backends.h"
#include "webgpu/dawn_loader.h"

namespace edgetrain::wgpu {

// What adapter discovery found (or why nothing usable was found).
struct AdapterSummary {
  bool ok = false;
  std::string error;             // when !ok
  ErrorKind error_kind = ErrorKind::device;  // when !ok: misuse for a bad EDGETRAIN_WEBGPU_BACKEND
  std::string name, vendor, architecture, description;
  uint32_t backend_type = 0, adapter_type = 0;
  std::string backend_name;      // "vulkan", "gles", "null"
  std::string how;               // e.g. "VK_ICD_FILENAMES set to SwiftShader during discovery"
  std::string limits;            // the adapter's compute limits, for `edgetrain info`
  bool shader_f16 = false;       // the adapter offers WGSL's f16 type (feature shader-f16); the device asks for it
  // The subgroup-matrix shape for gemm_coop.wgsl (f16 x f16 -> f32, M = N = K) and the adapter's fixed
  // subgroup size; M = 0: none (no feature, no such shape, a varying subgroup size, or no shader-f16).
  struct Matrix {
    uint32_t M = 0, N = 0, K = 0, subgroup = 0;
  } matrix;
  bool software() const;
};

// Discovers the adapter the backend would use (cached per process; never throws).
AdapterSummary probe_adapter();

// Process exit: static destructors run in reverse order of registration, interleaved with atexit
// handlers, Dawn's own static destructors and those of the Vulkan/GL drivers Dawn loaded. So edgetrain
// tears its WebGPU state down explicitly from an atexit handler that it registers *after* Dawn and the
// drivers were initialized (again after each new pipeline, in case Dawn lazily created more static state):
// that handler, the first of them to run, marks the process as exiting and destroys every live device
// while Dawn and the drivers are still intact. Everything destroyed later (a backend cached in a static,
// buffers, programs) sees dawn_exiting() and leaks its handles instead of calling Dawn.
void arm_exit_teardown();

// Errors Dawn reports outside an error scope, recorded by callbacks (which must not throw through Dawn)
// and raised by the next Context::check(). Owned by the context; see ~Context for its lifetime.
struct ErrorSink {
  std::string uncaptured;  // first uncaptured error message
  std::string lost;        // device-lost message
  bool dead = false;       // the context is gone; callbacks just return
};

class Context {
 public:
  // Throws Error naming the reason (no Dawn, no adapter, Null adapter refused, device request failed).
  explicit Context(const BackendOptions& opts);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Dawn& d;
  Instance instance = nullptr;
  Adapter adapter = nullptr;
  Device device = nullptr;
  Queue queue = nullptr;
  Limits limits{};
  AdapterSummary info;

  // Blocks until the future completes; throws on a wait failure.
  void wait(Future f, const char* what);
  // Throws an Error if Dawn reported an uncaptured error or lost the device since the last check.
  void check(const char* during);

  // Error scopes: push one Validation+Internal+OOM scope set, run creation, pop, and throw with Dawn's
  // message when anything was reported. `what` names the object (e.g. "shader 'fused_ce'").
  void push_scopes();
  void pop_scopes(const std::string& what);

  // Compiles WGSL; throws Error("webgpu: shader '<name>' failed to compile: <Dawn's message with line>").
  ShaderModule compile(const std::string& name, const std::string& wgsl);

  // The exit teardown (see arm_exit_teardown): destroys the device once; callbacks then just return.
  void destroy_device_at_exit();

 private:
  ErrorSink* sink_;
};

}  // namespace edgetrain::wgpu
