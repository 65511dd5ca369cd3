// dlopen + dlsym of Dawn's C entry points (see dawn_loader.h for the search order).
#include "webgpu/dawn_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "edgetrain/paths.h"

namespace edgetrain::wgpu {
namespace {

constexpr const char* kLibName = "libwebgpu_wrapper.so";

std::string executable_dir() {
  std::vector<char> buf(4096);
  ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return {};
  std::string p(buf.data(), static_cast<size_t>(n));
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? std::string() : p.substr(0, slash);
}

std::vector<std::string> candidates() {
  std::vector<std::string> c;
  if (const char* e = std::getenv("EDGETRAIN_DAWN"); e && *e) c.push_back(e);
  for (std::string& p : deps_candidates(std::string("dawn/") + kLibName)) c.push_back(std::move(p));
  std::string dir = executable_dir();
  if (!dir.empty()) c.push_back(dir + "/" + kLibName);
  return c;
}

struct Loaded {
  Dawn dawn;
  bool ok = false;
  std::string error;
};

Loaded load() {
  Loaded l;
  std::string tried;
  void* handle = nullptr;
  for (const std::string& p : candidates()) {
    if (access(p.c_str(), R_OK) != 0) {
      tried += "\n  " + p + ": not found";
      continue;
    }
    handle = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle) {
      l.dawn.path = p;
      break;
    }
    const char* why = dlerror();
    tried += "\n  " + p + ": " + (why ? why : "dlopen failed");
  }
  if (!handle) {
    l.error = "Dawn (" + std::string(kLibName) + ") not found; set EDGETRAIN_DAWN or run scripts/setup.sh. Tried:" +
              tried;
    return l;
  }
#define ET_DAWN_RESOLVE(name, ret, params)                                              \
  l.dawn.name = reinterpret_cast<ret(*) params>(dlsym(handle, "wgpu" #name));          \
  if (!l.dawn.name) {                                                                    \
    l.error = "Dawn at " + l.dawn.path + " lacks the function wgpu" #name;              \
    return l;                                                                            \
  }
  ET_DAWN_FUNCTIONS(ET_DAWN_RESOLVE)
#undef ET_DAWN_RESOLVE
  l.ok = true;
  return l;
}

std::atomic<bool> g_exiting{false};

Loaded& loaded() {
  static Loaded* l = [] {
    auto* r = new Loaded(load());  // leaked on purpose: Dawn stays loaded until exit
    // Registered after dlopen ran Dawn's static constructors, so this runs before Dawn's static
    // destructors; objects destroyed later (a static backend cache made before Dawn was loaded) then
    // skip their Dawn calls instead of calling into a torn-down library.
    if (r->ok) std::atexit([] { g_exiting = true; });
    return r;
  }();
  return *l;
}

}  // namespace

const Dawn* dawn() {
  Loaded& l = loaded();
  return l.ok ? &l.dawn : nullptr;
}

const std::string& dawn_load_error() { return loaded().error; }

bool dawn_exiting() { return g_exiting; }

void set_dawn_exiting() { g_exiting = true; }

}  // namespace edgetrain::wgpu
