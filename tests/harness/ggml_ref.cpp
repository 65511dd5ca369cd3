// Opens the pinned node-llama-cpp's prebuilt ggml and llama libraries (see ggml_ref.h).
#include "harness/ggml_ref.h"

#include <dlfcn.h>

#include <filesystem>
#include <mutex>
#include <stdexcept>

#include "harness/llamacpp.h"

namespace fs = std::filesystem;

namespace edgetrain::test {

namespace {

// llama.h's llama_model_quantize_params of the pinned release, field for field (enums are ints).
struct QuantizeParams {
  int32_t nthread;
  int32_t ftype;
  int32_t output_tensor_type;
  int32_t token_embedding_type;
  bool allow_requantize, quantize_output_tensor, only_copy, pure, keep_split, dry_run;
  const void* imatrix;
  const void* kv_overrides;
  const void* tt_overrides;
  const int32_t* prune_layers;
  size_t max_buf_size;
};
static_assert(sizeof(QuantizeParams) == 64, "llama_model_quantize_params is 64 bytes on LP64");

// The folder of the CPU build's libraries for this platform: node_modules/@node-llama-cpp/<platform>/bins/<platform>.
std::string find_lib_dir() {
  const fs::path root = fs::path(llamacpp_dir()) / "node_modules" / "@node-llama-cpp";
  std::error_code ec;
  for (const auto& pkg : fs::directory_iterator(root, ec)) {
    const std::string name = pkg.path().filename().string();
    if (name.find("cuda") != std::string::npos || name.find("vulkan") != std::string::npos) continue;
    const fs::path bins = pkg.path() / "bins";
    for (const auto& d : fs::directory_iterator(bins, ec))
      if (fs::exists(d.path() / "libggml-base.so")) return d.path().string();
  }
  throw std::runtime_error("no libggml-base.so under " + root.string() + "/*/bins/* (the node-llama-cpp CPU build)");
}

void* open_lib(const std::string& path) {
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) throw std::runtime_error("dlopen " + path + ": " + ::dlerror());
  return h;
}

template <typename F>
F sym(void* lib, const std::string& name) {
  void* p = ::dlsym(lib, name.c_str());
  if (!p) throw std::runtime_error("llama.cpp's libraries lack the symbol " + name);
  return reinterpret_cast<F>(p);
}

// ggml's lower-case type suffix of the codec functions: "q4_K", "q8_0".
std::string suffix(uint32_t type) {
  switch (type) {
    case 2: return "q4_0";
    case 8: return "q8_0";
    case 12: return "q4_K";
    case 13: return "q5_K";
    case 14: return "q6_K";
  }
  return "";
}

}  // namespace

GgmlRef::RowToFloat GgmlRef::dequantize(uint32_t type) const {
  const std::string s = suffix(type);
  return s.empty() ? nullptr : sym<RowToFloat>(base, "dequantize_row_" + s);
}

GgmlRef::RowFromFloat GgmlRef::quantize_ref(uint32_t type) const {
  const std::string s = suffix(type);
  return s.empty() ? nullptr : sym<RowFromFloat>(base, "quantize_row_" + s + "_ref");
}

uint32_t GgmlRef::quantize_model(const std::string& in, const std::string& out, int ftype) const {
  auto defaults = sym<QuantizeParams (*)()>(llama, "llama_model_quantize_default_params");
  auto quantize = sym<uint32_t (*)(const char*, const char*, const QuantizeParams*)>(llama, "llama_model_quantize");
  // llama.cpp logs every tensor it quantizes: keep the test output to what the tests print.
  auto log_set = sym<void (*)(void (*)(int, const char*, void*), void*)>(llama, "llama_log_set");
  log_set([](int, const char*, void*) {}, nullptr);
  QuantizeParams p = defaults();
  p.ftype = ftype;
  p.nthread = 1;
  return quantize(in.c_str(), out.c_str(), &p);
}

const GgmlRef& ggml_ref() {
  static GgmlRef ref;
  static std::once_flag once;
  static std::string error;
  std::call_once(once, [] {
    try {
      ref.dir = find_lib_dir();
      ref.base = open_lib(ref.dir + "/libggml-base.so");
      ref.blck_size = sym<int64_t (*)(int)>(ref.base, "ggml_blck_size");
      ref.type_size = sym<size_t (*)(int)>(ref.base, "ggml_type_size");
      ref.type_name = sym<const char* (*)(int)>(ref.base, "ggml_type_name");
      ref.fp32_to_fp16 = sym<uint16_t (*)(float)>(ref.base, "ggml_fp32_to_fp16");
      ref.fp16_to_fp32 = sym<float (*)(uint16_t)>(ref.base, "ggml_fp16_to_fp32");
      ref.bf16_to_fp32_row = sym<void (*)(const uint16_t*, float*, int64_t)>(ref.base, "ggml_bf16_to_fp32_row");
      for (const auto& e : fs::directory_iterator(ref.dir)) {
        const std::string n = e.path().filename().string();
        if (n.rfind("libllama.", 0) == 0 && n.find(".so") != std::string::npos) ref.llama = open_lib(e.path().string());
      }
      if (!ref.llama) throw std::runtime_error("no libllama*.so in " + ref.dir);
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  if (!error.empty()) throw std::runtime_error(error);
  return ref;
}

}  // namespace edgetrain::test
