// Hugging Face Llama import (config.json + single or sharded safetensors, rotate_half q/k rows permuted to
// adjacent pairs), plus the interop helpers shared by the importers and exporters: the weight a model
// computes with (LoRA merged), masters for `train --init`, and file descriptions for `edgetrain info`.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "edgetrain/checkpoint.h"
#include "edgetrain/interop.h"
#include "edgetrain/q4gsw.h"
#include "edgetrain/safetensors.h"
#include "io/gguf.h"
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

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  ET_CHECK_KIND(ErrorKind::io, in, "file ", path, ": cannot open");
  try {
    return nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    fail("file ", path, ": not valid JSON: ", e.what());
  }
}

// Every safetensors file of the folder and which one holds each tensor.
struct Shards {
  std::vector<safetensors::Reader> readers;
  std::map<std::string, size_t> where;
  const safetensors::Reader* find(const std::string& name) const {
    auto it = where.find(name);
    return it == where.end() ? nullptr : &readers[it->second];
  }
};

Shards open_shards(const std::string& dir) {
  Shards s;
  std::string single = dir + "/model.safetensors", index = dir + "/model.safetensors.index.json";
  std::vector<std::string> files;
  if (fs::exists(single)) {
    files.push_back(single);
  } else {
    ET_CHECK(fs::exists(index), "hf: folder ", dir, " has neither model.safetensors nor model.safetensors.index.json");
    auto j = read_json(index);
    ET_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(), "file ", index,
             ": missing object 'weight_map'");
    std::set<std::string> uniq;
    for (auto& [k, v] : j["weight_map"].items()) {
      ET_CHECK(v.is_string(), "file ", index, ": weight_map['", k, "'] must be a file name");
      std::string fname = v.get<std::string>();
      ET_CHECK(fname.find('/') == std::string::npos && fname.find("..") == std::string::npos, "file ", index,
               ": shard name '", fname, "' must be a plain file name");
      uniq.insert(fname);
    }
    for (auto& f : uniq) files.push_back(dir + "/" + f);
  }
  for (auto& f : files) {
    s.readers.push_back(safetensors::Reader::open(f));
    for (auto& t : s.readers.back().tensors()) s.where[t.name] = s.readers.size() - 1;
  }
  return s;
}

ModelConfig hf_config(const std::string& dir, const Shards* shards, TrainMode mode, int64_t group_size) {
  std::string path = dir + "/config.json";
  auto j = read_json(path);
  ET_CHECK(j.is_object(), "file ", path, ": expected a JSON object");
  auto integer = [&](const char* k, bool required, int64_t def) -> int64_t {
    if (!j.contains(k) || j[k].is_null()) {
      ET_CHECK(!required, "file ", path, ": missing field '", k, "'");
      return def;
    }
    ET_CHECK(j[k].is_number_integer(), "file ", path, ": field '", k, "' must be an integer");
    return j[k].get<int64_t>();
  };
  auto number = [&](const char* k, double def) -> double {
    if (!j.contains(k) || j[k].is_null()) return def;
    ET_CHECK(j[k].is_number(), "file ", path, ": field '", k, "' must be a number");
    return j[k].get<double>();
  };
  if (j.contains("model_type"))
    ET_CHECK(j["model_type"] == "llama", "file ", path, ": model_type ", j["model_type"].dump(),
             " is not supported (only \"llama\")");
  ModelConfig c;
  c.mode = mode;
  c.group_size = group_size;
  c.dim = integer("hidden_size", true, 0);
  c.n_layers = integer("num_hidden_layers", true, 0);
  c.n_heads = integer("num_attention_heads", true, 0);
  int64_t kv = integer("num_key_value_heads", false, c.n_heads);
  ET_CHECK(kv >= 1 && c.n_heads >= 1 && c.n_heads % kv == 0, "file ", path, ": num_key_value_heads = ", kv,
           " does not divide num_attention_heads = ", c.n_heads,
           " (grouped-query attention needs num_attention_heads / num_key_value_heads query heads per key/value head)");
  c.n_kv_heads = kv;
  c.ffn_dim = integer("intermediate_size", true, 0);
  c.max_seq = integer("max_position_embeddings", false, 2048);
  c.vocab = integer("vocab_size", true, 0);
  c.norm_eps = static_cast<float>(number("rms_norm_eps", 1e-6));
  c.rope_theta = static_cast<float>(number("rope_theta", 10000.0));
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
    fail("file ", path, ": rope_scaling is not supported");
  c.tied_head = j.value("tie_word_embeddings", false);
  if (shards) {
    const safetensors::Reader* r = shards->find("model.embed_tokens.weight");
    ET_CHECK(r, "hf: ", dir, ": no tensor 'model.embed_tokens.weight'");
    const auto& shape = r->info("model.embed_tokens.weight").shape;
    ET_CHECK(shape.size() == 2, "hf: model.embed_tokens.weight must be 2-D");
    c.vocab = shape[0];
    if (!shards->find("lm_head.weight")) c.tied_head = true;
  }
  try {
    c.validate();
  } catch (const Error& e) {
    fail_kind(e.kind(), "file ", path, ": ", e.what());
  }
  return c;
}

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
  return hf_config(dir, &sh, mode, group_size);
}

std::unique_ptr<Model> load_hf_llama(const std::string& dir, Backend& backend, TrainMode mode, int64_t group_size,
                                     ImportInfo* info) {
  Shards sh = open_shards(dir);
  ModelConfig c = hf_config(dir, &sh, mode, group_size);
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
  if (info) info->config = c;
  return model;
}

bool is_hf_folder(const std::string& path) { return fs::is_directory(path) && fs::exists(path + "/config.json"); }

std::map<std::string, std::vector<float>> import_masters(const std::string& path, ModelConfig* cfg_out) {
  if (is_hf_folder(path)) {
    Shards sh = open_shards(path);
    ModelConfig c = hf_config(path, &sh, TrainMode::fp32, 32);
    if (cfg_out) *cfg_out = c;
    return hf_masters(path, sh, c);
  }
  ET_CHECK(is_gguf_file(path), "import: '", path, "' is neither a GGUF file nor a Hugging Face folder");
  return llama_names::gguf_masters(path, cfg_out);
}

std::string describe_model_file(const std::string& path) {
  std::ostringstream os;
  if (is_hf_folder(path)) {
    ModelConfig c = read_hf_config(path, TrainMode::qat, 32);
    os << path << ": Hugging Face Llama folder\n  config: " << c.to_json() << "\n";
    return os.str();
  }
  if (is_gguf_file(path)) {
    gguf::File f = gguf::File::open(path);
    os << path << ": GGUF v" << f.version() << ", " << f.metadata().size() << " metadata keys, "
       << f.tensors().size() << " tensors, alignment " << f.alignment() << "\n  metadata:\n";
    for (auto& [k, v] : f.metadata()) os << "    " << k << " = " << v.describe() << "\n";
    os << "  tensors:\n";
    for (auto& t : f.tensors()) {
      os << "    " << t.name << " " << gguf::type_name(t.type) << " [";
      for (size_t d = 0; d < t.ne.size(); ++d) os << (d ? ", " : "") << t.ne[d];
      os << "] (ne, fastest first)\n";
    }
    try {
      ImportInfo info;
      info.config = read_gguf_config(path, TrainMode::qat, 32);
      os << "  edgetrain config: " << info.config.to_json() << "\n";
    } catch (const Error& e) {
      os << "  not importable: " << e.what() << "\n";
    }
    try {
      const GgufVocab v = gguf::read_vocab(f);
      if (v.model.empty()) {
        os << "  tokenizer: none (train --init uses the byte tokenizer)\n";
      } else {
        auto tok = make_gguf_tokenizer(v, path);
        os << "  tokenizer: " << tok->name() << " (\"" << v.model << "\", " << tok->vocab_size()
           << " tokens), usable: train --init takes it by default\n";
      }
    } catch (const Error& e) {
      os << "  tokenizer not usable: " << e.what() << "\n";
    }
    return os.str();
  }
  auto r = safetensors::Reader::open(path);
  auto fmt = r.metadata().find("format");
  if (fmt != r.metadata().end() && fmt->second == kCheckpointFormat) {
    auto meta = read_checkpoint_metadata(path);
    os << path << ": edgetrain checkpoint, step " << meta["step"] << "\n  config: " << meta["config"] << "\n";
    for (auto& [k, v] : meta)
      if (k != "config" && k != "step") os << "  " << k << ": " << (v.size() > 120 ? v.substr(0, 120) + "..." : v) << "\n";
    // The 4-bit linears: how far the fp32 masters have left the range their codes can follow.
    const ModelConfig c = ModelConfig::from_json(meta["config"]);
    q4::RangeStats all;
    std::ostringstream rows;
    for (auto& t : r.tensors()) {
      const std::string suffix = ".q4_scales";
      if (t.name.size() <= suffix.size() || t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) != 0)
        continue;
      const std::string w = t.name.substr(0, t.name.size() - suffix.size());
      if (!r.contains(w)) continue;
      const auto& ws = r.info(w).shape;
      if (ws.size() != 2) continue;
      q4::Geometry g(ws[0], ws[1], c.group_size);
      const auto lat = r.to_f32(w), sc = r.to_f32(t.name);
      if (static_cast<int64_t>(sc.size()) != g.groups() * g.N) continue;
      const q4::RangeStats st = q4::range_stats(g, lat.data(), sc.data());
      all.outside += st.outside, all.total += st.total, all.max_ratio = std::max(all.max_ratio, st.max_ratio);
      char buf[160];
      std::snprintf(buf, sizeof buf, "    %-40s %6.2f%% outside, max |w/s| %.1f\n", w.c_str(),
                    100.0 * static_cast<double>(st.outside) / static_cast<double>(st.total), st.max_ratio);
      rows << buf;
    }
    if (all.total > 0) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "  4-bit linears: %.2f%% of masters outside the range their codes follow "
                    "(-8.5*s <= w <= 7.5*s; training keeps them inside), max |w/s| %.1f\n",
                    100.0 * static_cast<double>(all.outside) / static_cast<double>(all.total), all.max_ratio);
      os << buf << rows.str();
    }
    return os.str();
  }
  os << path << ": safetensors, " << r.tensors().size() << " tensors\n";
  for (auto& [k, v] : r.metadata()) os << "  metadata " << k << ": " << v << "\n";
  for (auto& t : r.tensors()) {
    os << "  " << t.name << " " << t.dtype << " [";
    for (size_t d = 0; d < t.shape.size(); ++d) os << (d ? ", " : "") << t.shape[d];
    os << "]\n";
  }
  return os.str();
}

}  // namespace edgetrain
