// Backend registry: creation by name, device listing, and the "auto" choice (a real GPU first; software
// rasterizers are for tests, so auto uses the native CPU backend instead of them).
#include "edgetrain/backends.h"

#include <mutex>

namespace edgetrain {

#ifdef EDGETRAIN_HAS_VULKAN
std::vector<DeviceInfo> vulkan_devices();
std::unique_ptr<Backend> make_vulkan_backend(const BackendOptions& opts);
#endif
#ifdef EDGETRAIN_HAS_WEBGPU
std::vector<DeviceInfo> webgpu_devices();
std::unique_ptr<Backend> make_webgpu_backend(const BackendOptions& opts);
#endif

namespace {
std::mutex g_reason_mu;
std::string g_reason;
void set_reason(std::string r) {
  std::lock_guard<std::mutex> lock(g_reason_mu);
  g_reason = std::move(r);
}
bool is_real_gpu(const DeviceInfo& d) { return d.usable && (d.kind == "discrete" || d.kind == "integrated"); }
}  // namespace

std::vector<DeviceInfo> list_devices() {
  std::vector<DeviceInfo> all;
  {
    auto cpu = make_cpu_backend();
    all.push_back({"cpu", cpu->device_name(), "cpu", "threads + OpenBLAS; reference for everything else", true});
  }
#ifdef EDGETRAIN_HAS_VULKAN
  for (auto& d : vulkan_devices()) all.push_back(d);
#else
  all.push_back({"vulkan", "-", "other", "not compiled in (Vulkan headers or glslc missing at build time)", false});
#endif
#ifdef EDGETRAIN_HAS_WEBGPU
  for (auto& d : webgpu_devices()) all.push_back(d);
#else
  all.push_back({"webgpu", "-", "other", "not compiled in", false});
#endif
  return all;
}

std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& opts) {
  if (name == "cpu") return make_cpu_backend(opts);
  if (name == "vulkan") {
#ifdef EDGETRAIN_HAS_VULKAN
    return make_vulkan_backend(opts);
#else
    fail("backend 'vulkan' is not compiled into this build (Vulkan headers or glslc were missing)");
#endif
  }
  if (name == "webgpu") {
#ifdef EDGETRAIN_HAS_WEBGPU
    return make_webgpu_backend(opts);
#else
    fail("backend 'webgpu' is not compiled into this build");
#endif
  }
  if (name == "auto") {
    for (const DeviceInfo& d : list_devices()) {
      if (d.backend == "cpu" || !is_real_gpu(d)) continue;
      try {
        BackendOptions o = opts;
        if (o.device.empty()) o.device = d.name;
        auto b = make_backend(d.backend, o);
        set_reason("auto: " + d.backend + " on " + d.name + " (" + d.kind + " GPU)");
        return b;
      } catch (const Error& e) {
        set_reason(std::string("auto: ") + d.backend + " failed (" + e.what() + "), trying the next");
      }
    }
    set_reason("auto: cpu (no hardware GPU found through Vulkan or WebGPU; software rasterizers are not used)");
    return make_cpu_backend(opts);
  }
  fail("unknown backend '", name, "' (choose auto, cpu, vulkan or webgpu)");
}

std::string auto_choice_reason() {
  std::lock_guard<std::mutex> lock(g_reason_mu);
  return g_reason;
}

}  // namespace edgetrain
