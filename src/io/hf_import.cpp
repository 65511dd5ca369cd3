// Hugging Face Llama import (config.json + single or sharded safetensors, read by hf_folder.cpp; rotate_half
// q/k rows permuted to adjacent pairs), plus the interop helpers shared by the importers and exporters: the
// weight a model computes with (LoRA merged) and masters for `train --init`.
#include <filesystem>

#include "edgetrain/interop.h"
#include "edgetrain/q4gsw.h"
#include "edgetrain/safetensors.h"
#include "io/hf_folder.h"
#include "io/llama_names.h"

namespace fs = std::filesystem;

namespace edgetrain {

namespace interop_detail {

std::vector<float> effective_weight(Model& model, Param& p) {
  Backend& b = model.backend();
  const ModelConfig& c = model.config();
  if (!p.quantized()) return b.to_vector<float>(p.value);
  // A 4-bit linear computes with its codes and scales, never with the fp32 master (qat masters drift past
  // the representable range: writing them would export a different model); qlora adds its adapters.
  q4::Geometry g(p.value.shape()[0], p.value.shape()[1], c.group_size);
  auto codes = q4::unpack_w4x8(g, b.to_vector<uint32_t>(p.codes).data());
  auto scales = b.to_vector<float>(p.scales);
  std::vector<float> w = q4::dequantize(g, codes.data(), scales.data());
  Param *A = nullptr, *B = nullptr;
  for (Param& q : model.params()) {
    if (q.name == p.name + ".lora_a") A = &q;
    if (q.name == p.name + ".lora_b") B = &q;
  }
  if (!A || !B) return w;
  auto a = b.to_vector<float>(A->value), bb = b.to_vector<float>(B->value);
  const int64_t r = c.lora_rank;
  const double s = static_cast<double>(c.lora_alpha) / static_cast<double>(r);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t k = 0; k < g.K; ++k) {
      double acc = 0;
      for (int64_t j = 0; j < r; ++j) acc += static_cast<double>(bb[n * r + j]) * a[j * g.K + k];
      w[n * g.K + k] += static_cast<float>(s * acc);
    }
  return w;
}

// Within each head of hd rows, HF keeps pair i's two elements at rows i and i + hd/2; we keep them at rows
// 2i and 2i+1.
std::vector<float> permute_from_hf(const std::vector<float>& w, int64_t n_heads, int64_t rows, int64_t cols) {
  const int64_t hd = rows / n_heads;
  std::vector<float> out(w.size());
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t i = 0; i < hd / 2; ++i)
      for (int64_t e = 0; e < 2; ++e)
        std::copy_n(&w[(h * hd + e * (hd / 2) + i) * cols], cols, &out[(h * hd + 2 * i + e) * cols]);
  return out;
}

std::vector<float> permute_to_hf(const std::vector<float>& w, int64_t n_heads, int64_t rows, int64_t cols) {
  const int64_t hd = rows / n_heads;
  std::vector<float> out(w.size());
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t i = 0; i < hd / 2; ++i)
      for (int64_t e = 0; e < 2; ++e)
        std::copy_n(&w[(h * hd + 2 * i + e) * cols], cols, &out[(h * hd + e * (hd / 2) + i) * cols]);
  return out;
}

}  // namespace interop_detail

namespace {

using hf_folder::Shards;
using hf_folder::open_shards;

std::map<std::string, std::vector<float>> hf_masters(const std::string& dir, const Shards& sh, const ModelConfig& c) {
  std::map<std::string, std::vector<float>> out;
  for (const llama_names::BaseTensor& t : llama_names::base_tensors(c)) {
    const std::string& hn = t.hf;
    const safetensors::Reader* r = sh.find(hn);
    ET_CHECK(r, "hf: ", dir, ": missing tensor '", hn, "' (for ", t.name, ")");
    const auto& shape = r->info(hn).shape;
    const std::vector<int64_t> want(t.shape.data(), t.shape.data() + t.shape.rank());
    ET_CHECK(shape == want, "file ", r->source(), ": tensor '", hn, "' has the wrong shape for ", t.name, " ",
             t.shape.str());
    std::vector<float> v = r->to_f32(hn);
    // rotate_half -> adjacent pairs within each head: n_heads heads in q_proj, n_kv_heads in k_proj.
    if (t.name.find("attention.wq") != std::string::npos)
      v = interop_detail::permute_from_hf(v, c.n_heads, want[0], want[1]);
    else if (t.name.find("attention.wk") != std::string::npos)
      v = interop_detail::permute_from_hf(v, c.kv_heads(), want[0], want[1]);
    out[t.name] = std::move(v);
  }
  return out;
}

}  // namespace

ModelConfig read_hf_config(const std::string& dir, TrainMode mode, int64_t group_size) {
  Shards sh = open_shards(dir);
  return hf_folder::config_of(dir, sh, mode, group_size);
}

std::unique_ptr<Model> load_hf_llama(const std::string& dir, Backend& backend, TrainMode mode, int64_t group_size,
                                     ImportInfo* info) {
  Shards sh = open_shards(dir);
  ModelConfig c = hf_folder::config_of(dir, sh, mode, group_size);
  auto masters = hf_masters(dir, sh, c);
  auto model = std::make_unique<Model>(backend, c);
  model->init(1);  // LoRA adapters; base tensors are overwritten
  for (Param& p : model->params()) {
    auto it = masters.find(p.name);
    if (it == masters.end()) continue;
    backend.upload(p.value, it->second.data(), it->second.size() * sizeof(float));
  }
  model->quantize_from_masters();
  model->steps_done = 0;
  if (info) {
    info->config = c;
    info->q4_error = interop_detail::q4_error(*model);
  }
  return model;
}

bool is_hf_folder(const std::string& path) { return fs::is_directory(path) && fs::exists(path + "/config.json"); }

std::map<std::string, std::vector<float>> import_masters(const std::string& path, ModelConfig* cfg_out) {
  if (is_hf_folder(path)) {
    Shards sh = open_shards(path);
    ModelConfig c = hf_folder::config_of(path, sh, TrainMode::fp32, 32);
    if (cfg_out) *cfg_out = c;
    return hf_masters(path, sh, c);
  }
  ET_CHECK(is_gguf_file(path), "import: '", path, "' is neither a GGUF file nor a Hugging Face folder");
  return llama_names::gguf_masters(path, cfg_out);
}

}  // namespace edgetrain
