// Backend registry: creation by name, device listing, ordered fallback lists ("vulkan,cpu") and the "auto"
// list (the real GPUs, then the CPU; software rasterizers are for tests, so auto uses the native CPU backend
// instead of them).
#include "edgetrain/backends.h"

#include <cstdio>
#include <cstdlib>
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
}  // namespace

bool is_real_gpu(const DeviceInfo& d) { return d.usable && (d.kind == "discrete" || d.kind == "integrated"); }

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

namespace {

std::unique_ptr<Backend> make_device(const std::string& name, const BackendOptions& opts) {
  if (name == "cpu") return make_cpu_backend(opts);
  if (name == "vulkan") {
#ifdef EDGETRAIN_HAS_VULKAN
    return make_vulkan_backend(opts);
#else
    fail_kind(ErrorKind::unsupported,
              "backend 'vulkan' is not compiled into this build (Vulkan headers or glslc were missing)");
#endif
  }
  if (name == "webgpu") {
#ifdef EDGETRAIN_HAS_WEBGPU
    return make_webgpu_backend(opts);
#else
    fail_kind(ErrorKind::unsupported, "backend 'webgpu' is not compiled into this build");
#endif
  }
  fail("unknown backend '", name, "' (choose auto, cpu, vulkan or webgpu)");
}

std::unique_ptr<Backend> make_one(const std::string& name, const BackendOptions& opts) {
  std::unique_ptr<Backend> b = make_device(name, opts);
  uint64_t cap = opts.max_binding_bytes;
  if (const char* env = std::getenv("EDGETRAIN_MAX_BINDING_BYTES"); env && cap == 0) {  // for measuring
    char* end = nullptr;
    cap = std::strtoull(env, &end, 10);
    ET_CHECK(end && *end == '\0' && cap > 0, "EDGETRAIN_MAX_BINDING_BYTES: expected a positive byte count, got '", env, "'");
  }
  b->cap_binding_bytes(cap);
  return b;
}

}  // namespace

std::vector<std::string> parse_backend_spec(const std::string& spec) {
  std::vector<std::string> names;
  size_t begin = 0;
  while (true) {
    const size_t comma = spec.find(',', begin);
    const std::string name = spec.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    ET_CHECK(name == "auto" || name == "cpu" || name == "vulkan" || name == "webgpu", "--backend: unknown backend '",
             name, "'", name == spec ? "" : " in '" + spec + "'",
             " (choose auto, cpu, vulkan or webgpu, or an ordered list to fall back through, e.g. vulkan,cpu)");
    for (const std::string& n : names)
      ET_CHECK(n != name, "--backend: '", name, "' is listed twice in '", spec, "'");
    names.push_back(name);
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  if (names.size() > 1)
    for (const std::string& n : names)
      ET_CHECK(n != "auto", "--backend: 'auto' cannot be part of a list ('", spec,
               "'); auto already falls back from the hardware GPUs to the CPU");
  return names;
}

std::vector<BackendCandidate> backend_plan(const std::string& spec, const BackendOptions& opts) {
  const std::vector<std::string> names = parse_backend_spec(spec);
  std::vector<BackendCandidate> plan;
  if (names[0] != "auto") {
    for (const std::string& n : names) plan.push_back({n, opts, ""});
    return plan;
  }
  for (const DeviceInfo& d : list_devices()) {
    if (d.backend == "cpu" || !is_real_gpu(d)) continue;
    BackendOptions o = opts;
    if (o.device.empty()) o.device = d.name;
    plan.push_back({d.backend, o, "auto: " + d.backend + " on " + d.name + " (" + d.kind + " GPU)"});
  }
  plan.push_back({"cpu", opts,
                  plan.empty() ? "auto: cpu (no hardware GPU found through Vulkan or WebGPU; software rasterizers "
                                 "are not used)"
                               : "auto: cpu (no hardware GPU started)"});
  return plan;
}

// The one fallback rule. A list moves on only when the backend itself could not run the job: its device or
// driver failed (device: no driver, no device, lost device, out of device memory, a pipeline the driver
// cannot create) or this build or device lacks what the job needs (unsupported: a backend not compiled in,
// an op without a kernel, a size beyond a device limit). Bad input, file-system failures and NaNs would fail
// the same way on the next backend, so they are the error. Decided by the kind each throw site gives, never
// by the message.
bool backend_list_falls_back(const Error& e) {
  return e.kind() == ErrorKind::device || e.kind() == ErrorKind::unsupported;
}

size_t first_that_starts(const std::vector<BackendCandidate>& plan,
                         const std::function<void(const BackendCandidate&)>& attempt, const char* when,
                         std::string* notes) {
  for (size_t i = 0;; ++i) {
    const BackendCandidate& c = plan.at(i);
    try {
      attempt(c);
      return i;
    } catch (const Error& e) {
      if (i + 1 == plan.size() || !backend_list_falls_back(e)) throw;
      const std::string note = cat("backend ", c.backend, " failed", when, " (", e.what(), "); falling back to ",
                                   plan[i + 1].backend);
      std::fprintf(stderr, "edgetrain: %s\n", note.c_str());
      std::fflush(stderr);
      if (notes) *notes += (notes->empty() ? "" : "; ") + note;
    }
  }
}

std::unique_ptr<Backend> make_backend(const std::string& spec, const BackendOptions& opts) {
  const std::vector<BackendCandidate> plan = backend_plan(spec, opts);
  std::unique_ptr<Backend> b;
  std::string fallbacks;
  const BackendCandidate& c =
      plan[first_that_starts(plan, [&](const BackendCandidate& k) { b = make_one(k.backend, k.options); }, "",
                             &fallbacks)];
  set_reason(c.why.empty() ? (fallbacks.empty() ? c.backend : fallbacks + "; using " + c.backend)
                           : (fallbacks.empty() ? c.why : fallbacks + "; " + c.why));
  return b;
}

std::string auto_choice_reason() {
  std::lock_guard<std::mutex> lock(g_reason_mu);
  return g_reason;
}

}  // namespace edgetrain
