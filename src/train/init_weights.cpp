// --init: a run that starts from another model's weights (an edgetrain checkpoint, a GGUF file or a
// Hugging Face folder) with a fresh optimizer, possibly in another mode (fp32 -> qat, qat -> qlora, ...).
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "edgetrain/interop.h"
#include "edgetrain/safetensors.h"
#include "train/run.h"

namespace edgetrain::training {

// The fp32 weights of the file by name (its optimizer state, codes and LoRA adapters are not used), then
// fresh scales and codes from them.
void init_weights_from(const std::string& path, Model& model) {
  // A GGUF file or Hugging Face folder is converted to our names first; otherwise a safetensors file.
  const bool foreign = is_gguf_file(path) || is_hf_folder(path);
  std::map<std::string, std::vector<float>> imported;
  if (foreign) imported = import_masters(path);
  std::optional<safetensors::Reader> r;
  if (!foreign) r.emplace(safetensors::Reader::open(path));
  int loaded = 0;
  for (Param& p : model.params()) {
    if (p.name.find(".lora_") != std::string::npos) continue;  // adapters start fresh
    ET_CHECK(foreign ? imported.count(p.name) > 0 : r->contains(p.name), "train: --init: '", path,
             "' has no tensor '", p.name, "'");
    std::vector<float> v = foreign ? std::move(imported[p.name]) : r->to_f32(p.name);
    ET_CHECK(static_cast<int64_t>(v.size()) == p.value.numel(), "train: --init: tensor '", p.name, "' in '", path,
             "' has ", v.size(), " elements, the model needs ", p.value.numel());
    for (size_t i = 0; i < v.size(); ++i)
      ET_CHECK(std::isfinite(v[i]), "train: --init: tensor '", p.name, "' in '", path, "' holds ", v[i], " at index ",
               i, "; weights must not contain NaN/Inf");
    model.backend().upload(p.value, v.data(), v.size() * sizeof(float));
    ++loaded;
  }
  model.quantize_from_masters();
  model.steps_done = 0;
  model.adam_steps = 0;
  std::printf("  initialised %d tensors from %s\n", loaded, path.c_str());
}

}  // namespace edgetrain::training
