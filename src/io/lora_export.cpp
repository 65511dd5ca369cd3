// LoRA adapters out: a qlora model's A and B matrices alone, as llama.cpp's adapter GGUF (what
// convert_lora_to_gguf.py writes: general.type "adapter", adapter.type "lora", adapter.lora.alpha, tensors
// "<linear>.lora_a" ne [K, r] and ".lora_b" ne [r, N]) or as a PEFT folder (adapter_config.json and
// adapter_model.safetensors, as PeftModel.save_pretrained writes a Llama LoRA). The base model stays the
// file the user has; llama.cpp and PEFT both add alpha / r * B A x, as edgetrain's forward does.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "edgetrain/error.h"
#include "edgetrain/half.h"
#include "edgetrain/interop.h"
#include "edgetrain/safetensors.h"
#include "io/atomic_file.h"
#include "io/gguf.h"
#include "io/llama_names.h"
#include "io/lora_adapter.h"

namespace fs = std::filesystem;

namespace edgetrain {
namespace {

// One adapter matrix of the model, rows in the file's order.
struct Out {
  std::string weight;  // the linear's name
  bool is_a = false;
  int64_t rows = 0, cols = 0;
  std::vector<float> values;
};

// Every adapter matrix of a qlora model in parameter order; B rows reordered by `row_order` of the linear.
template <typename RowOrder>
std::vector<Out> adapter_matrices(Model& model, const char* what, RowOrder row_order) {
  const ModelConfig& c = model.config();
  ET_CHECK(c.mode == TrainMode::qlora, what, ": the model is in ", mode_name(c.mode),
           " mode; only a qlora model has LoRA adapters (export the whole model with --to gguf-f32 etc.)");
  std::vector<Out> out;
  for (Param& p : model.params()) {
    Out o;
    if (!lora_names::split(p.name, o.weight, o.is_a)) continue;
    o.rows = p.value.shape()[0], o.cols = p.value.shape()[1];
    o.values = model.backend().to_vector<float>(p.value);
    if (!o.is_a) o.values = llama_names::rows_to_file(row_order(c, o.weight), o.values);
    out.push_back(std::move(o));
  }
  ET_CHECK(!out.empty(), what, ": the model has no LoRA adapters (lora_targets '", c.lora_targets, "')");
  return out;
}

std::vector<uint8_t> bytes_of(const std::vector<float>& v, GgufType type) {
  if (type == GgufType::F32) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  }
  std::vector<uint8_t> b(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = f32_to_f16(v[i]);
    std::memcpy(&b[2 * i], &h, 2);
  }
  return b;
}

}  // namespace

void save_lora_gguf(const std::string& path, Model& model, GgufType type) {
  ET_CHECK(type == GgufType::F32 || type == GgufType::F16, "LoRA GGUF export: adapter tensors are F32 or F16");
  const std::vector<Out> mats = adapter_matrices(model, "LoRA GGUF export", llama_names::gguf_row_order);
  const ModelConfig& c = model.config();
  gguf::Writer w;
  using V = gguf::Value;
  // The keys llama.cpp's llama_adapter_lora_init checks: general.type, general.architecture (must be the
  // base model's), adapter.type; adapter.lora.alpha sets the scale alpha / rank.
  w.add_kv("general.architecture", V::str(c.arch));
  w.add_kv("general.type", V::str("adapter"));
  w.add_kv("general.name", V::str("edgetrain LoRA"));
  w.add_kv("general.alignment", V::u32(32));
  w.add_kv("general.file_type", V::u32(type == GgufType::F32 ? 0 : 1));
  w.add_kv("adapter.type", V::str("lora"));
  w.add_kv("adapter.lora.alpha", V::f32(c.lora_alpha));
  for (const Out& m : mats)
    w.add_tensor(lora_names::gguf_name(m.weight, m.is_a),
                 {static_cast<uint64_t>(m.cols), static_cast<uint64_t>(m.rows)},  // ne: fastest first
                 type == GgufType::F32 ? gguf::F32 : gguf::F16, bytes_of(m.values, type));
  w.save(path);
}

void save_peft_adapter(const std::string& dir, Model& model, const std::string& base_model) {
  const std::vector<Out> mats = adapter_matrices(model, "PEFT export", llama_names::neox_row_order);
  const ModelConfig& c = model.config();
  std::error_code ec;
  fs::create_directories(dir, ec);
  ET_CHECK_KIND(ErrorKind::io, fs::is_directory(dir), "PEFT export: cannot create folder '", dir, "'");

  safetensors::Writer st;
  // transformers/PEFT load with safetensors' "pt" format; the architecture lets edgetrain refuse this adapter
  // on another kind of base model (PEFT itself ignores the key).
  st.set_metadata("format", "pt");
  st.set_metadata("edgetrain.arch", c.arch);
  for (const Out& m : mats)
    st.add(lora_names::peft_name(m.weight, m.is_a), "F32", {m.rows, m.cols}, m.values.data(),
           m.values.size() * sizeof(float));
  st.save(dir + "/adapter_model.safetensors");

  nlohmann::json modules = nlohmann::json::array();
  for (const std::string& t : lora_names::config_targets(c)) modules.push_back(lora_names::target_by_letter(t)->module);
  nlohmann::json alpha = c.lora_alpha == std::floor(c.lora_alpha) && std::fabs(c.lora_alpha) < 1e9
                             ? nlohmann::json(static_cast<int64_t>(c.lora_alpha))
                             : nlohmann::json(c.lora_alpha);
  // LoraConfig's fields that decide what the adapter computes, as PEFT writes them for a plain LoRA.
  const nlohmann::json cfg = {
      {"peft_type", "LORA"},
      {"task_type", "CAUSAL_LM"},
      {"base_model_name_or_path", base_model.empty() ? nlohmann::json(nullptr) : nlohmann::json(base_model)},
      {"r", c.lora_rank},
      {"lora_alpha", alpha},
      {"target_modules", modules},
      {"lora_dropout", 0.0},
      {"bias", "none"},
      {"fan_in_fan_out", false},
      {"use_rslora", false},
      {"use_dora", false},
      {"init_lora_weights", true},
      {"inference_mode", true},
      {"modules_to_save", nullptr},
      {"layers_to_transform", nullptr},
      {"layers_pattern", nullptr},
      {"rank_pattern", nlohmann::json::object()},
      {"alpha_pattern", nlohmann::json::object()},
      {"revision", nullptr},
  };
  const std::string text = cfg.dump(2) + "\n";
  const std::string path = dir + "/adapter_config.json";
  write_file_atomic(path, [&](std::FILE* f) { fwrite_checked(f, text.data(), text.size(), path); });
}

}  // namespace edgetrain
