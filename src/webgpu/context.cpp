// WebGPU context: instance, adapter choice, device and error plumbing (see context.h).
//
// Adapter choice: EDGETRAIN_WEBGPU_BACKEND = vulkan | gles | null (null is a test hook that must be refused);
// default tries Vulkan, then OpenGLES with featureLevel Compatibility. Dawn's Null adapter is always
// refused: it accepts every call and reads back garbage. When Dawn finds no Vulkan adapter (no GPU, or only
// lavapipe, which Dawn rejects), discovery is retried with VK_ICD_FILENAMES pointing at Chromium's
// SwiftShader ICD, but only when neither VK_ICD_FILENAMES nor VK_DRIVER_FILES is set by the user; the
// variable is removed again right after Dawn enumerated its adapters, so a Vulkan backend initialized later
// in the same process sees the environment it started with.
#include "webgpu/context.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

namespace edgetrain::wgpu {
namespace {

constexpr const char* kSwiftShaderIcd = "/usr/lib/chromium/vk_swiftshader_icd.json";

std::string str(StringView v) {
  if (!v.data) return {};
  return v.length == kStrlen ? std::string(v.data) : std::string(v.data, v.length);
}

const char* backend_type_name(uint32_t t) {
  switch (t) {
    case kBackendNull: return "null";
    case kBackendVulkan: return "vulkan";
    case kBackendOpenGL: return "opengl";
    case kBackendOpenGLES: return "gles";
    default: return "other";
  }
}

void wait_future(const Dawn& d, Instance inst, Future f, const char* what) {
  ET_CHECK_KIND(ErrorKind::device, f.id != 0, "webgpu: ", what, ": Dawn rejected the request (null future)");
  FutureWaitInfo w{f, 0};
  uint32_t s = d.InstanceWaitAny(inst, 1, &w, UINT64_MAX);
  ET_CHECK_KIND(ErrorKind::device, s == kWaitSuccess && w.completed, "webgpu: waiting for ", what,
                " failed (status ", s, ")");
}

// Dawn lists its experimental subgroup matrices only where the instance, the adapter request and the
// device all carry these toggles (the second is an adapter toggle: Vulkan's memory model, which Dawn's
// SPIR-V for subgroup matrices needs; Dawn uses it only where the driver has it).
const char* const kToggles[] = {"allow_unsafe_apis", "use_vulkan_memory_model"};
const DawnTogglesDescriptor* toggles() {
  static const DawnTogglesDescriptor t = [] {
    DawnTogglesDescriptor d{};
    d.chain.sType = kSTypeDawnTogglesDescriptor;
    d.enabledToggleCount = 2;
    d.enabledToggles = kToggles;
    return d;
  }();
  return &t;
}

Instance new_instance(const Dawn& d) {
  InstanceDescriptor desc{};
  desc.nextInChain = &toggles()->chain;
  desc.capabilities.timedWaitAnyEnable = 1;
  return d.CreateInstance(&desc);
}

struct AdapterResult {
  uint32_t status = 0;
  Adapter adapter = nullptr;
  std::string message;
};

// Dawn prints its reasons for rejecting a driver (e.g. lavapipe's missing dynamic indexing) straight to
// stderr while it enumerates adapters, and the ABI has no logging hook at that stage. The outcome is
// reported through the request's status and `edgetrain info`, so stderr is muted for the duration of
// the request unless EDGETRAIN_WEBGPU_VERBOSE=1.
class MuteStderr {
 public:
  MuteStderr() {
    const char* v = std::getenv("EDGETRAIN_WEBGPU_VERBOSE");
    if (v && std::string(v) == "1") return;
    std::fflush(stderr);
    saved_ = ::dup(STDERR_FILENO);
    int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (saved_ < 0 || null < 0 || ::dup2(null, STDERR_FILENO) < 0) restore();
    if (null >= 0) ::close(null);
  }
  ~MuteStderr() { restore(); }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    saved_ = -1;
  }
  int saved_ = -1;
};

AdapterResult request_adapter(const Dawn& d, Instance inst, uint32_t backend, uint32_t level) {
  MuteStderr mute;
  AdapterResult r;
  RequestAdapterOptions o{};
  o.nextInChain = &toggles()->chain;
  o.featureLevel = level;
  o.backendType = backend;
  RequestAdapterCallbackInfo cb{};
  cb.mode = kCallbackModeWaitAnyOnly;
  cb.callback = [](uint32_t status, Adapter a, StringView msg, void* u1, void*) {
    auto* res = static_cast<AdapterResult*>(u1);
    res->status = status;
    res->adapter = a;
    res->message = str(msg);
  };
  cb.userdata1 = &r;
  wait_future(d, inst, d.InstanceRequestAdapter(inst, &o, cb), "the adapter request");
  return r;
}

// The outcome of discovery: an instance and an adapter (kept for the process), or an error.
struct Found {
  Instance instance = nullptr;
  Adapter adapter = nullptr;
  uint32_t level = kFeatureLevelCore;
  AdapterSummary summary;
};

// The f16 x f16 -> f32 subgroup-matrix shape gemm_coop.wgsl tiles (square, 8 or 16; the largest), on an
// adapter whose subgroup size is fixed (the kernel counts subgroups per workgroup); none otherwise.
void pick_subgroup_matrix(const Dawn& d, Adapter a, AdapterSummary& s) {
  AdapterPropertiesSubgroupMatrixConfigs configs{};
  configs.chain.sType = kSTypeAdapterPropertiesSubgroupMatrixConfigs;
  AdapterInfo info{};
  info.nextInChain = &configs.chain;
  if (d.AdapterGetInfo(a, &info) != kStatusSuccess) return;
  const uint32_t sg = info.subgroupMaxSize;
  if (info.subgroupMinSize == sg && sg >= 4 && sg <= 64)
    for (size_t i = 0; i < configs.configCount; ++i) {
      const SubgroupMatrixConfig& c = configs.configs[i];
      if (c.componentType == kMatrixComponentF16 && c.resultComponentType == kMatrixComponentF32 && c.M == c.N &&
          c.N == c.K && (c.M == 8 || c.M == 16) && c.M > s.matrix.M)
        s.matrix = {c.M, c.N, c.K, sg};
    }
  d.AdapterInfoFreeMembers(info);
  d.AdapterPropertiesSubgroupMatrixConfigsFreeMembers(configs);
}

void describe(const Dawn& d, Adapter a, AdapterSummary& s) {
  AdapterInfo info{};
  d.AdapterGetInfo(a, &info);
  s.name = str(info.device);
  s.vendor = str(info.vendor);
  s.architecture = str(info.architecture);
  s.description = str(info.description);
  s.backend_type = info.backendType;
  s.adapter_type = info.adapterType;
  s.backend_name = backend_type_name(info.backendType);
  d.AdapterInfoFreeMembers(info);
  Limits l{};
  if (d.AdapterGetLimits(a, &l) == kStatusSuccess)
    s.limits = cat("max workgroup ", l.maxComputeInvocationsPerWorkgroup, " invocations, workgroup storage ",
                   l.maxComputeWorkgroupStorageSize, " B, storage binding ", l.maxStorageBufferBindingSize,
                   " B, buffer ", l.maxBufferSize, " B, ", l.maxComputeWorkgroupsPerDimension, " workgroups per dimension");
  s.shader_f16 = d.AdapterHasFeature(a, kFeatureShaderF16) != 0;
  s.limits += s.shader_f16 ? "; shader-f16" : "; no shader-f16";
  if (s.shader_f16 && d.AdapterHasFeature(a, kFeatureSubgroupMatrix)) pick_subgroup_matrix(d, a, s);
  s.limits += s.matrix.M ? cat("; subgroup matrices f16 x f16 -> f32 ", s.matrix.M, "x", s.matrix.N, "x", s.matrix.K,
                               " in subgroups of ", s.matrix.subgroup)
                         : std::string("; no f16 subgroup matrices");
}

// One attempt on one backend type. Returns true with f filled, or false with a reason appended to why.
bool try_backend(const Dawn& d, const std::string& which, Found& f, std::string& why) {
  uint32_t backend = which == "vulkan" ? kBackendVulkan : which == "gles" ? kBackendOpenGLES : kBackendNull;
  uint32_t level = which == "gles" ? kFeatureLevelCompatibility : kFeatureLevelCore;
  if (which == "gles") setenv("EGL_PLATFORM", "surfaceless", 0);  // Mesa needs it without a display
  auto attempt = [&](const char* how) {
    Instance inst = new_instance(d);
    if (!inst) {
      why += "; " + which + ": wgpuCreateInstance failed";
      return false;
    }
    AdapterResult r = request_adapter(d, inst, backend, level);
    if (r.status != kStatusSuccess || !r.adapter) {
      why += "; " + which + (how[0] ? std::string(" (") + how + ")" : "") + ": no adapter (" +
             (r.message.empty() ? "status " + std::to_string(r.status) : r.message) + ")";
      d.InstanceRelease(inst);
      return false;
    }
    f.instance = inst;
    f.adapter = r.adapter;
    f.level = level;
    f.summary.how = how;
    return true;
  };
  bool ok = attempt("");
  if (!ok && which == "vulkan" && !std::getenv("VK_ICD_FILENAMES") && !std::getenv("VK_DRIVER_FILES") &&
      access(kSwiftShaderIcd, R_OK) == 0) {
    setenv("VK_ICD_FILENAMES", kSwiftShaderIcd, 1);
    ok = attempt("VK_ICD_FILENAMES set to Chromium's SwiftShader ICD during discovery");
    unsetenv("VK_ICD_FILENAMES");
  }
  if (!ok) return false;
  describe(d, f.adapter, f.summary);
  if (f.summary.backend_type == kBackendNull) {
    why += "; refusing Dawn's Null backend adapter '" + f.summary.name +
           "' (backendType 1): it accepts every command and computes nothing, so results would be garbage";
    d.AdapterRelease(f.adapter);
    d.InstanceRelease(f.instance);
    f = Found{};
    return false;
  }
  f.summary.ok = true;
  return true;
}

std::string preference() {
  const char* e = std::getenv("EDGETRAIN_WEBGPU_BACKEND");
  return e ? std::string(e) : std::string();
}

// Discovery is slow (it initializes drivers), so it runs once per preference value and is kept.
Found& discover(const std::string& pref) {
  static std::mutex mu;
  static auto* cache = new std::vector<std::pair<std::string, Found>>();  // leaked: lives until exit
  std::lock_guard<std::mutex> lock(mu);
  for (auto& [k, f] : *cache)
    if (k == pref) return f;
  Found f;
  const Dawn* d = dawn();
  if (!d) {
    f.summary.error = dawn_load_error();
  } else {
    std::vector<std::string> order;
    if (pref.empty()) order = {"vulkan", "gles"};
    else if (pref == "vulkan" || pref == "gles" || pref == "null") order = {pref};
    else {
      f.summary.error = "EDGETRAIN_WEBGPU_BACKEND='" + pref + "' is not one of vulkan, gles, null";
      f.summary.error_kind = ErrorKind::misuse;
    }
    std::string why;
    bool ok = false;
    for (const std::string& w : order)
      if ((ok = try_backend(*d, w, f, why))) break;
    if (!ok && f.summary.error.empty())
      f.summary.error = "no usable WebGPU adapter" + why;
  }
  cache->emplace_back(pref, f);
  return cache->back().second;
}

// Live contexts, for the exit teardown. Leaked: used from atexit handlers, after other statics may be gone.
std::mutex& live_mutex() {
  static auto* m = new std::mutex();
  return *m;
}
std::vector<Context*>& live_contexts() {
  static auto* v = new std::vector<Context*>();
  return *v;
}

void exit_teardown() {
  std::lock_guard<std::mutex> lock(live_mutex());
  if (dawn_exiting()) return;  // an earlier-run registration already did it
  set_dawn_exiting();
  for (Context* c : live_contexts()) c->destroy_device_at_exit();
}

}  // namespace

void arm_exit_teardown() { std::atexit(exit_teardown); }

bool AdapterSummary::software() const {
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  return adapter_type == kAdapterCPU || has("SwiftShader") || has("llvmpipe") || has("lavapipe") ||
         has("softpipe");
}

AdapterSummary probe_adapter() { return discover(preference()).summary; }

Context::Context(const BackendOptions& opts) : d(*[] {
  const Dawn* p = dawn();
  // No Dawn library (or one without the functions we need) is this backend's missing driver.
  if (!p) fail_kind(ErrorKind::device, "webgpu: ", dawn_load_error());
  return p;
}()), sink_(new ErrorSink) {
  Found& f = discover(preference());
  if (!f.summary.ok) fail_kind(f.summary.error_kind, "webgpu: ", f.summary.error);
  info = f.summary;
  if (!opts.device.empty() && opts.device != "0" && info.name.find(opts.device) == std::string::npos)
    fail_kind(ErrorKind::device, "webgpu: no adapter matches device '", opts.device, "' (the adapter is '", info.name,
              "')");
  instance = f.instance;
  adapter = f.adapter;

  // Ask for everything the adapter offers: Dawn's defaults are far lower (compat mode: 128 invocations).
  Limits want{};
  ET_CHECK_KIND(ErrorKind::device, d.AdapterGetLimits(adapter, &want) == kStatusSuccess,
                "webgpu: could not read the adapter limits");
  want.nextInChain = nullptr;
  DeviceDescriptor dd{};
  dd.label = sv("edgetrain");
  dd.requiredLimits = &want;
  dd.nextInChain = &toggles()->chain;
  // shader-f16: --precision fp16 runs only where the device has it; subgroup matrices: its tensor-core GEMMs.
  const uint32_t features[] = {kFeatureShaderF16, kFeatureSubgroupMatrix};
  if (info.shader_f16) {
    dd.requiredFeatureCount = info.matrix.M ? 2 : 1;
    dd.requiredFeatures = features;
  }
  dd.defaultQueue.label = sv_absent();
  dd.deviceLostCallbackInfo.mode = kCallbackModeAllowSpontaneous;
  dd.deviceLostCallbackInfo.callback = [](const Device*, uint32_t reason, StringView msg, void* u1, void*) {
    auto* s = static_cast<ErrorSink*>(u1);
    if (s->dead || reason == kLostDestroyed || reason == kLostCallbackCancelled) return;
    if (s->lost.empty()) s->lost = "device lost (reason " + std::to_string(reason) + "): " + str(msg);
  };
  dd.deviceLostCallbackInfo.userdata1 = sink_;
  dd.uncapturedErrorCallbackInfo.callback = [](const Device*, uint32_t type, StringView msg, void* u1, void*) {
    auto* s = static_cast<ErrorSink*>(u1);
    if (!s->dead && s->uncaptured.empty()) s->uncaptured = "error type " + std::to_string(type) + ": " + str(msg);
  };
  dd.uncapturedErrorCallbackInfo.userdata1 = sink_;

  struct DeviceResult {
    uint32_t status = 0;
    Device device = nullptr;
    std::string message;
  } r;
  RequestDeviceCallbackInfo cb{};
  cb.mode = kCallbackModeWaitAnyOnly;
  cb.callback = [](uint32_t status, Device dev, StringView msg, void* u1, void*) {
    auto* res = static_cast<DeviceResult*>(u1);
    res->status = status;
    res->device = dev;
    res->message = str(msg);
  };
  cb.userdata1 = &r;
  wait(d.AdapterRequestDevice(adapter, &dd, cb), "the device request");
  if (r.status != kStatusSuccess || !r.device)
    fail_kind(ErrorKind::device, "webgpu: requesting a device on '", info.name, "' failed: ", r.message);
  device = r.device;
  queue = d.DeviceGetQueue(device);
  limits = Limits{};
  ET_CHECK_KIND(ErrorKind::device, d.DeviceGetLimits(device, &limits) == kStatusSuccess,
                "webgpu: could not read the device limits");
  std::lock_guard<std::mutex> lock(live_mutex());
  live_contexts().push_back(this);
  arm_exit_teardown();  // after the drivers were loaded and the device created: runs before their teardown
}

void Context::destroy_device_at_exit() {
  if (!device || sink_->dead) return;
  sink_->dead = true;  // lost/uncaptured callbacks from here on just return
  d.DeviceDestroy(device);
  d.InstanceProcessEvents(instance);
}

Context::~Context() {
  {
    std::lock_guard<std::mutex> lock(live_mutex());
    auto& v = live_contexts();
    v.erase(std::remove(v.begin(), v.end(), this), v.end());
  }
  if (dawn_exiting()) return;  // the exit teardown destroyed the device; the handles are leaked
  if (queue) d.QueueRelease(queue);
  if (device) {
    d.DeviceDestroy(device);
    d.DeviceRelease(device);
  }
  d.InstanceProcessEvents(instance);
  // The lost callback may still fire after this (AllowSpontaneous); it finds dead = true. The few bytes of
  // the sink are left allocated on purpose so that a late callback never touches freed memory.
  sink_->dead = true;
}

void Context::wait(Future f, const char* what) { wait_future(d, instance, f, what); }

void Context::check(const char* during) {
  if (!sink_->lost.empty()) fail_kind(ErrorKind::device, "webgpu: ", sink_->lost, " (noticed ", during, ")");
  if (!sink_->uncaptured.empty()) {
    std::string m = sink_->uncaptured;
    sink_->uncaptured.clear();
    // Like a Vulkan validation message: Dawn objecting to how this backend drives the device.
    fail_kind(ErrorKind::device, "webgpu: ", m, " (during ", during, ")");
  }
}

void Context::push_scopes() {
  d.DevicePushErrorScope(device, kFilterValidation);
  d.DevicePushErrorScope(device, kFilterInternal);
  d.DevicePushErrorScope(device, kFilterOutOfMemory);
}

void Context::pop_scopes(const std::string& what) {
  std::string msg;
  for (int i = 0; i < 3; ++i) {
    struct Popped {
      uint32_t status = 0, type = 0;
      std::string message;
    } p;
    PopErrorScopeCallbackInfo cb{};
    cb.mode = kCallbackModeWaitAnyOnly;
    cb.callback = [](uint32_t status, uint32_t type, StringView m, void* u1, void*) {
      auto* r = static_cast<Popped*>(u1);
      r->status = status;
      r->type = type;
      r->message = str(m);
    };
    cb.userdata1 = &p;
    wait(d.DevicePopErrorScope(device, cb), "an error scope");
    if (p.status == kStatusSuccess && p.type != kErrorNoError && msg.empty()) msg = p.message;
  }
  // Validation, internal and out-of-memory errors of object creation (buffers, shaders, pipelines).
  if (!msg.empty()) fail_kind(ErrorKind::device, "webgpu: ", what, " failed: ", msg);
}

ShaderModule Context::compile(const std::string& name, const std::string& wgsl) {
  ShaderSourceWGSL src{};
  src.chain.sType = kSTypeShaderSourceWGSL;
  src.code = {wgsl.data(), wgsl.size()};
  LabelDescriptor desc{};
  desc.nextInChain = &src.chain;
  desc.label = {name.data(), name.size()};
  push_scopes();
  ShaderModule m = d.DeviceCreateShaderModule(device, &desc);
  try {
    pop_scopes("shader '" + name + "' (" + name + ".wgsl)");
  } catch (...) {
    if (m) d.ShaderModuleRelease(m);
    throw;
  }
  return m;
}

}  // namespace edgetrain::wgpu
