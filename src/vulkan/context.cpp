// Vulkan instance/device setup: layer and extension checks, the device's choice (by devices.h's ranking),
// its extensions and features, validation message capture (every warning or error becomes an Error at the
// next sync point).
#include "vulkan/context.h"
#include "vulkan/coop_matrix2.h"
#include "vulkan/devices.h"

#include <algorithm>
#include <limits>
#include <cctype>
#include <cstdlib>
#include <cstring>

namespace edgetrain::vk {

const char* result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER (no Vulkan driver/ICD found)";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default: return "VkResult error";
  }
}

void check(VkResult r, const char* what) {
  if (r == VK_SUCCESS) return;
  // Any failed Vulkan call is the driver's or the device's (no driver, lost device, out of memory).
  fail_kind(ErrorKind::device, "vulkan: ", what, " failed: ", result_name(r), " (", static_cast<int>(r), ")");
}

namespace {

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                          VkDebugUtilsMessageTypeFlagsEXT, const VkDebugUtilsMessengerCallbackDataEXT* data,
                                          void* user) {
  if (severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT && user && data && data->pMessage) {
    const char* sev = severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "error" : "warning";
    static_cast<Context*>(user)->add_message(cat("[", sev, "] ", data->pMessage));
  }
  return VK_FALSE;
}

// The Vulkan version a layer was written against (its specVersion); 0 where it is not installed.
uint32_t layer_version(const char* name) {
  uint32_t n = 0;
  vkEnumerateInstanceLayerProperties(&n, nullptr);
  std::vector<VkLayerProperties> ls(n);
  vkEnumerateInstanceLayerProperties(&n, ls.data());
  for (auto& l : ls)
    if (std::strcmp(l.layerName, name) == 0) return std::max<uint32_t>(l.specVersion, 1);
  return 0;
}

bool has_instance_ext(const char* layer, const char* name) {
  uint32_t n = 0;
  if (vkEnumerateInstanceExtensionProperties(layer, &n, nullptr) != VK_SUCCESS) return false;
  std::vector<VkExtensionProperties> es(n);
  vkEnumerateInstanceExtensionProperties(layer, &n, es.data());
  for (auto& e : es)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

}  // namespace

Tuning Tuning::from_env() {
  Tuning t;
  t.gemm_big = gpu::force_from_env("EDGETRAIN_VK_GEMM_BIG", true);
  t.split_k = gpu::force_from_env("EDGETRAIN_VK_GEMM_SPLITK", false);
  t.coopmat = gpu::force_from_env("EDGETRAIN_VK_COOPMAT", false);
  t.cm2 = gpu::force_from_env("EDGETRAIN_VK_CM2", false);
  t.coop_khr = gpu::force_from_env("EDGETRAIN_VK_COOP_KHR", false);
  return t;
}

void Context::add_message(std::string m) {
  std::lock_guard<std::mutex> lock(msg_mu_);
  if (messages_.size() < 64) messages_.push_back(std::move(m));
}

PFN_vkVoidFunction Context::device_proc(const char* name) const { return vkGetDeviceProcAddr(device_, name); }

VkQueryPool Context::make_timestamp_pool(uint32_t queries) const {
  VkQueryPoolCreateInfo ci{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  ci.queryType = VK_QUERY_TYPE_TIMESTAMP;
  ci.queryCount = queries;
  VkQueryPool pool = VK_NULL_HANDLE;
  check(vkCreateQueryPool(device_, &ci, nullptr, &pool), "vkCreateQueryPool");
  return pool;
}

std::vector<std::string> Context::take_messages() {
  std::lock_guard<std::mutex> lock(msg_mu_);
  std::vector<std::string> m;
  m.swap(messages_);
  return m;
}

void Context::throw_if_messages(const char* where) {
  auto msgs = take_messages();
  if (msgs.empty()) return;
  std::string all = cat("vulkan: ", msgs.size(), " validation message(s) at ", where, ":");
  for (auto& m : msgs) all += "\n  " + m;
  // The Vulkan stack objecting to how this backend drives the device: a defect of the backend or driver
  // on this device, never of the input, so a --backend list may go on to the next backend.
  throw Error(all, ErrorKind::device);
}

Context::Context(const BackendOptions& opts) {
  uint32_t iv = instance_version();
  ET_CHECK_KIND(ErrorKind::unsupported, iv >= VK_API_VERSION_1_2, "vulkan: the Vulkan loader supports only ",
                version_str(iv), "; edgetrain needs Vulkan 1.2");
  validation_ = opts.validation || opts.sync_validation || env_flag("EDGETRAIN_VULKAN_VALIDATION") ||
                env_flag("EDGETRAIN_VULKAN_SYNC_VALIDATION");
  bool sync = opts.sync_validation || env_flag("EDGETRAIN_VULKAN_SYNC_VALIDATION");

  std::vector<const char*> layers, exts;
  VkDebugUtilsMessengerCreateInfoEXT mci{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  mci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  mci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                    VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  mci.pfnUserCallback = on_message;
  mci.pUserData = this;
  VkValidationFeatureEnableEXT sync_feature = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
  VkValidationFeaturesEXT vf{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  vf.enabledValidationFeatureCount = 1;
  vf.pEnabledValidationFeatures = &sync_feature;
  const void* chain = nullptr;
  if (validation_) {
    validation_layer_version_ = layer_version(kValidationLayer);
    ET_CHECK_KIND(ErrorKind::unsupported, validation_layer_version_ != 0,
                  "vulkan: validation was requested but the layer ", kValidationLayer,
                  " is not installed (Debian: apt install vulkan-validationlayers)");
    layers.push_back(kValidationLayer);
    ET_CHECK_KIND(ErrorKind::unsupported,
                  has_instance_ext(nullptr, VK_EXT_DEBUG_UTILS_EXTENSION_NAME) ||
                      has_instance_ext(kValidationLayer, VK_EXT_DEBUG_UTILS_EXTENSION_NAME),
                  "vulkan: validation was requested but ", VK_EXT_DEBUG_UTILS_EXTENSION_NAME, " is not available");
    exts.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    chain = &mci;
    if (sync) {
      ET_CHECK_KIND(ErrorKind::unsupported,
                    has_instance_ext(kValidationLayer, VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME),
                    "vulkan: synchronization validation needs ", VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME,
                    " from the validation layer");
      exts.push_back(VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
      vf.pNext = &mci;
      chain = &vf;
    }
  }
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "edgetrain";
  app.pEngineName = "edgetrain";
  // Vulkan 1.3 only where the cooperative-matrix-2 kernels may run (their SPIR-V 1.6 needs it); elsewhere
  // the 1.2 the rest of the backend is written and validated against.
  const bool want_cm2 = cm2_built() && tuning_.cm2 != gpu::Force::never &&
                        (!validation_ || tuning_.cm2 == gpu::Force::all) && iv >= VK_API_VERSION_1_3;
  app.apiVersion = want_cm2 ? VK_API_VERSION_1_3 : VK_API_VERSION_1_2;
  VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, chain};
  ici.pApplicationInfo = &app;
  ici.enabledLayerCount = static_cast<uint32_t>(layers.size());
  ici.ppEnabledLayerNames = layers.data();
  ici.enabledExtensionCount = static_cast<uint32_t>(exts.size());
  ici.ppEnabledExtensionNames = exts.data();
  check(vkCreateInstance(&ici, nullptr, &instance_), "vkCreateInstance");
  try {
    if (validation_) {
      auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
          vkGetInstanceProcAddr(instance_, "vkCreateDebugUtilsMessengerEXT"));
      ET_CHECK_KIND(ErrorKind::device, create, "vulkan: vkCreateDebugUtilsMessengerEXT is missing although ",
                    VK_EXT_DEBUG_UTILS_EXTENSION_NAME, " was enabled");
      check(create(instance_, &mci, nullptr, &messenger_), "vkCreateDebugUtilsMessengerEXT");
    }
    auto devs = physical_devices(instance_);
    ET_CHECK_KIND(ErrorKind::device, !devs.empty(),
                  "vulkan: no Vulkan device found (no driver/ICD reports a physical device)");
    std::string want = opts.device;
    if (want.empty())
      if (const char* e = std::getenv("EDGETRAIN_VULKAN_DEVICE")) want = e;
    std::vector<std::string> names;
    int chosen = -1;
    if (!want.empty() && std::all_of(want.begin(), want.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
      // Like a name no device has, an index past the list is a device error (a list may fall back); a huge
      // one must not overflow std::stoul.
      const size_t idx = want.size() > 9 ? std::numeric_limits<size_t>::max() : std::stoul(want);
      ET_CHECK_KIND(ErrorKind::device, idx < devs.size(), "vulkan: device index ", want, " out of range (",
                    devs.size(), " device(s))");
      chosen = static_cast<int>(idx);
    } else {
      int best_rank = 1 << 30;
      for (size_t i = 0; i < devs.size(); ++i) {
        VkPhysicalDeviceProperties p;
        vkGetPhysicalDeviceProperties(devs[i], &p);
        names.push_back(p.deviceName);
        if (p.apiVersion < VK_API_VERSION_1_2 || compute_family(devs[i]) < 0) continue;
        if (!want.empty() && lower(p.deviceName).find(lower(want)) == std::string::npos) continue;
        int r = rank_of(p.deviceType);
        if (r < best_rank) best_rank = r, chosen = static_cast<int>(i);
      }
    }
    if (chosen < 0) {
      std::string list;
      for (auto& n : names) list += (list.empty() ? "" : ", ") + n;
      fail_kind(ErrorKind::device, "vulkan: no usable device",
                want.empty() ? std::string() : " matching '" + want + "'", " among [", list,
                "] (needs Vulkan 1.2 and a compute queue)");
    }
    phys_ = devs[chosen];
    vkGetPhysicalDeviceProperties(phys_, &props_);
    vkGetPhysicalDeviceMemoryProperties(phys_, &mem_props_);
    ET_CHECK_KIND(ErrorKind::unsupported, props_.apiVersion >= VK_API_VERSION_1_2, "vulkan: device ", props_.deviceName,
                  " supports only Vulkan ", version_str(props_.apiVersion), "; edgetrain needs 1.2");
    int fam = compute_family(phys_);
    ET_CHECK_KIND(ErrorKind::unsupported, fam >= 0, "vulkan: device ", props_.deviceName, " has no compute queue");
    queue_family_ = static_cast<uint32_t>(fam);
    timestamp_bits_ = queue_families(phys_).at(queue_family_).timestampValidBits;
    limits_ = read_limits(phys_);

    // Portability drivers (MoltenVK) require their subset extension to be enabled when present.
    std::vector<const char*> dexts;
    auto offered = [&](const char* name) { return device_offers(phys_, name); };
    if (offered("VK_KHR_portability_subset")) dexts.push_back("VK_KHR_portability_subset");
    if (offered(VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME)) {
      VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
      VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &sm};
      vkGetPhysicalDeviceProperties2(phys_, &p2);
      limits_.multiprocessors = sm.shaderSMCount;
    }
    // A measuring aid (docs/PERFORMANCE.md, environment switches): the driver's statistics per pipeline.
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR pe_on{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
    const char* stats_file = std::getenv("EDGETRAIN_VK_PIPELINE_STATS");
    if (stats_file && *stats_file && offered(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME)) {
      limits_.pipeline_stats = stats_file;
      dexts.push_back(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
      pe_on.pipelineExecutableInfo = VK_TRUE;
    }

    // Tensor cores through VK_NV_cooperative_matrix when present (H100/H200 class NVIDIA GPUs).
    VkPhysicalDeviceCooperativeMatrixFeaturesNV cm_on{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
    VkPhysicalDeviceVulkan12Features v12_on{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, &cm_on};
    limits_.coopmat = tuning_.coopmat != gpu::Force::never && tuning_.coop_khr != gpu::Force::all &&
                      coopmat_supported(instance_, phys_);
    if (limits_.coopmat) {
      dexts.push_back(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
      cm_on.cooperativeMatrix = VK_TRUE;
      v12_on.shaderFloat16 = VK_TRUE;
      v12_on.vulkanMemoryModel = VK_TRUE;
    }
    // Otherwise VK_KHR_cooperative_matrix where it lists a shape the kernel can tile (coop_khr.h).
    KhrCoopMatrixFeatures khr_on;
    // Not under a validation layer older than the extension (Vulkan 1.3.255; Debian 12's is 1.3.239): it
    // would report the extension's structures as errors.
    const bool layer_knows_khr = !validation_ || validation_layer_version_ >= VK_MAKE_API_VERSION(0, 1, 3, 255);
    if (cm2_built() && !limits_.coopmat && tuning_.coopmat != gpu::Force::never && layer_knows_khr &&
        (props_.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU || tuning_.coopmat == gpu::Force::all))
      limits_.coop_khr = khr_coop_shape(instance_, phys_);
    if (limits_.coop_khr) {
      dexts.push_back(kKhrCoopExtension);
      khr_on.cooperative_matrix = VK_TRUE;
      v12_on.pNext = &khr_on;  // instead of NVIDIA's features
      v12_on.shaderFloat16 = VK_TRUE;
      v12_on.vulkanMemoryModel = VK_TRUE;
    }
    Cm2Enable cm2_on;
    limits_.cm2 = limits_.coopmat && want_cm2 && cm2_supported(instance_, phys_);
    if (limits_.cm2) {
      v12_on.bufferDeviceAddress = VK_TRUE;  // memory.cpp: their buffers need device addresses
      dexts.insert(dexts.end(), std::begin(kCm2Extensions), std::end(kCm2Extensions));
      cm_on.pNext = cm2_on.chain(nullptr);
      // Cooperative matrices 2 turn VK_KHR_cooperative_matrix on as well: the products cm2 does not take
      // (the fp32 parts', the rest) then run khr/gemm_coop_khr.comp, gemm_coop.comp's kernel through KHR's
      // types, which NVIDIA's driver runs faster (H200: fp32 products 20-27% faster; H100: the fp32 base
      // step 47.0K -> 51.6K tokens/s; docs/PERFORMANCE.md, twenty-fifth session). EDGETRAIN_VK_COOP_KHR=0:
      // gemm_coop.comp.
      if (layer_knows_khr && tuning_.coop_khr != gpu::Force::never) limits_.coop_khr = khr_coop_shape(instance_, phys_);
    }

    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    qci.queueFamilyIndex = queue_family_;
    qci.queueCount = 1;
    qci.pQueuePriorities = &prio;
    VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
    dci.enabledExtensionCount = static_cast<uint32_t>(dexts.size());
    dci.ppEnabledExtensionNames = dexts.data();
    void* chain_on = nullptr;
    if (limits_.coopmat || limits_.coop_khr) chain_on = &v12_on;
    if (!limits_.pipeline_stats.empty()) {
      pe_on.pNext = chain_on;
      chain_on = &pe_on;
    }
    dci.pNext = chain_on;
    check(vkCreateDevice(phys_, &dci, nullptr, &device_), "vkCreateDevice");
    vkGetDeviceQueue(device_, queue_family_, 0, &queue_);
    throw_if_messages("device creation");
  } catch (...) {
    destroy();
    throw;
  }
}

Context::~Context() { destroy(); }

void Context::destroy() {
  if (device_) vkDestroyDevice(device_, nullptr);
  device_ = VK_NULL_HANDLE;
  if (messenger_) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy) destroy(instance_, messenger_, nullptr);
    messenger_ = VK_NULL_HANDLE;
  }
  if (instance_) vkDestroyInstance(instance_, nullptr);
  instance_ = VK_NULL_HANDLE;
}


}  // namespace edgetrain::vk
