// LoRA adapters in: reading llama.cpp's adapter GGUF and PEFT folders into one LoraAdapter (every check a
// file alone allows), then loading it into a qlora model (every check against the base model) — for
// `train --init BASE --mode qlora --adapter A` and for generate/eval/convert of base + adapter.
#include "io/lora_adapter.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "edgetrain/checkpoint.h"
#include "edgetrain/error.h"
#include "edgetrain/interop.h"
#include "edgetrain/safetensors.h"
#include "io/gguf.h"
#include "io/llama_names.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace edgetrain {

namespace lora_names {

const std::vector<Target>& targets() {
  static const std::vector<Target> t = {
      {"q", "attention.wq.weight", "q_proj"},      {"k", "attention.wk.weight", "k_proj"},
      {"v", "attention.wv.weight", "v_proj"},      {"o", "attention.wo.weight", "o_proj"},
      {"gate", "feed_forward.w1.weight", "gate_proj"}, {"up", "feed_forward.w3.weight", "up_proj"},
      {"down", "feed_forward.w2.weight", "down_proj"}};
  return t;
}

const Target* target_by_letter(const std::string& letter) {
  for (const Target& t : targets())
    if (letter == t.target) return &t;
  return nullptr;
}

bool split(const std::string& ours, std::string& weight, bool& is_a) {
  if (ours.size() < 8) return false;
  const std::string tail = ours.substr(ours.size() - 7);
  if (tail != ".lora_a" && tail != ".lora_b") return false;
  weight = ours.substr(0, ours.size() - 7);
  is_a = tail == ".lora_a";
  return true;
}

std::string gguf_name(const std::string& weight, bool is_a) {
  return llama_names::gguf_name(weight) + (is_a ? ".lora_a" : ".lora_b");
}

std::string peft_name(const std::string& weight, bool is_a) {
  std::string hf = llama_names::hf_name(weight);
  hf.resize(hf.size() - 7);  // without ".weight": PEFT's key is the module's, then its lora_A/lora_B Linear
  return "base_model.model." + hf + (is_a ? ".lora_A.weight" : ".lora_B.weight");
}

std::vector<std::string> config_targets(const ModelConfig& c) {
  const std::string list = "," + c.lora_targets + ",";
  std::vector<std::string> out;
  for (const Target& t : targets())
    if (list.find(std::string(",") + t.target + ",") != std::string::npos) out.push_back(t.target);
  return out;
}

}  // namespace lora_names

namespace {

using Format = LoraAdapter::Format;

std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  return os.str() + "]";
}

// Our parameter name of a file's tensor name, or "" when it is not the A or B of an adaptable block linear.
std::string ours_of(const std::string& file_name, Format format) {
  const std::string prefix = format == Format::gguf ? "blk." : "base_model.model.model.layers.";
  if (file_name.rfind(prefix, 0) != 0) return "";
  size_t end = prefix.size();
  while (end < file_name.size() && std::isdigit(static_cast<unsigned char>(file_name[end]))) ++end;
  const std::string layer = file_name.substr(prefix.size(), end - prefix.size());
  if (layer.empty() || layer.size() > 6 || (layer.size() > 1 && layer[0] == '0')) return "";
  for (const lora_names::Target& t : lora_names::targets()) {
    const std::string weight = "layers." + layer + "." + t.ours;
    for (bool is_a : {true, false}) {
      const std::string name = format == Format::gguf ? lora_names::gguf_name(weight, is_a)
                                                      : lora_names::peft_name(weight, is_a);
      if (name == file_name) return weight + (is_a ? ".lora_a" : ".lora_b");
    }
  }
  return "";
}

// Adds one matrix of the file (shape [rows, cols] in our orientation), checking its name and values.
void add_matrix(LoraAdapter& a, const std::string& file_name, std::vector<int64_t> shape, std::vector<float> values) {
  const std::string ours = ours_of(file_name, a.format);
  ET_CHECK(!ours.empty(), "LoRA adapter ", a.path, ": tensor '", file_name, "' is not the ",
           a.format == Format::gguf ? "lora_a or lora_b of a block linear (blk.N.attn_q/attn_k/attn_v/attn_output/"
                                      "ffn_gate/ffn_up/ffn_down.weight)"
                                    : "lora_A or lora_B of a block linear (base_model.model.model.layers.N.self_attn."
                                      "q_proj/k_proj/v_proj/o_proj or mlp.gate_proj/up_proj/down_proj)",
           ", the only tensors edgetrain's adapters have");
  for (size_t i = 0; i < values.size(); ++i)
    ET_CHECK_KIND(ErrorKind::numeric, std::isfinite(values[i]), "LoRA adapter ", a.path, ": tensor '", file_name,
                  "' holds ", values[i], " at index ", i, "; weights must not contain NaN/Inf");
  a.tensors[ours] = LoraAdapter::Matrix{file_name, std::move(shape), std::move(values)};
}

// What every adapter must be whatever its format: pairs complete, one rank, every layer 0..n-1 with the same
// targets. Sets rank (when the file did not say), targets and n_layers.
void check_structure(LoraAdapter& a) {
  ET_CHECK(!a.tensors.empty(), "LoRA adapter ", a.path, " holds no lora_a/lora_b tensors");
  std::map<int64_t, std::set<std::string>> layers;  // layer -> targets
  std::string rank_from;
  for (const auto& [ours, m] : a.tensors) {
    std::string weight;
    bool is_a = false;
    lora_names::split(ours, weight, is_a);
    const std::string other = weight + (is_a ? ".lora_b" : ".lora_a");
    ET_CHECK(a.tensors.count(other), "LoRA adapter ", a.path, ": tensor '", m.file_name, "' has no ",
             is_a ? "B" : "A", " matrix beside it (",
             a.format == Format::gguf ? lora_names::gguf_name(weight, !is_a) : lora_names::peft_name(weight, !is_a),
             ")");
    const int64_t r = is_a ? m.shape[0] : m.shape[1];
    if (a.rank == 0) a.rank = r, rank_from = m.file_name;
    ET_CHECK(r == a.rank, "LoRA adapter ", a.path, ": tensor '", m.file_name, "' ", shape_str(m.shape), " has rank ",
             r, ", the adapter's rank is ", a.rank, rank_from.empty() ? " (adapter_config.json's r)" : " (from '" + rank_from + "')");
    const size_t dot = weight.find('.', 7);
    const int64_t layer = std::stoll(weight.substr(7, dot - 7));
    for (const lora_names::Target& t : lora_names::targets())
      if (weight.compare(dot + 1, std::string::npos, t.ours) == 0) layers[layer].insert(t.target);
  }
  ET_CHECK(a.rank >= 1, "LoRA adapter ", a.path, ": rank 0");
  a.n_layers = layers.rbegin()->first + 1;
  const std::set<std::string>& first = layers.begin()->second;
  for (int64_t l = 0; l < a.n_layers; ++l) {
    const std::set<std::string>& have = layers.count(l) ? layers[l] : std::set<std::string>{};
    for (const lora_names::Target& t : lora_names::targets()) {
      if (first.count(t.target) == have.count(t.target)) continue;
      const std::string weight = "layers." + std::to_string(l) + "." + t.ours;
      const std::string name = a.format == Format::gguf ? lora_names::gguf_name(weight, true)
                                                        : lora_names::peft_name(weight, true);
      fail("LoRA adapter ", a.path, ": ", have.count(t.target) ? "unexpected" : "no", " tensor '", name,
           "': edgetrain's adapters give every layer 0..", a.n_layers - 1, " the same targets");
    }
  }
  a.targets.clear();
  for (const lora_names::Target& t : lora_names::targets())
    if (first.count(t.target)) a.targets += (a.targets.empty() ? "" : ",") + std::string(t.target);
}

LoraAdapter read_gguf_adapter(const std::string& path) {
  LoraAdapter a;
  a.format = Format::gguf;
  a.path = path;
  const gguf::File f = gguf::File::open(path);
  auto text = [&](const std::string& key) -> std::string {
    const gguf::Value* v = f.find(key);
    if (!v) return "";
    ET_CHECK(v->type == gguf::VType::STRING, "LoRA adapter ", path, ": key '", key, "' is not a string");
    return v->s;
  };
  const std::string type = text("general.type");
  ET_CHECK(type == "adapter", "'", path, "' is not a LoRA adapter: its general.type is ",
           type.empty() ? std::string("absent (a model file?)") : "'" + type + "'",
           "; llama.cpp adapters have general.type 'adapter'");
  ET_CHECK(text("adapter.type") == "lora", "'", path, "' is not a LoRA adapter: adapter.type is '",
           text("adapter.type"), "', not 'lora'");
  a.arch = text("general.architecture");
  ET_CHECK(!a.arch.empty(), "LoRA adapter ", path, " has no general.architecture");
  for (const gguf::TensorInfo& t : f.tensors()) {
    ET_CHECK(t.ne.size() == 2, "LoRA adapter ", path, ": tensor '", t.name, "' has ", t.ne.size(),
             " dimensions, LoRA matrices have 2");
    // ne[0] is the fastest dimension: lora_a ne [K, r] is our [r, K]; lora_b ne [r, N] is our [N, r].
    add_matrix(a, t.name, {static_cast<int64_t>(t.ne[1]), static_cast<int64_t>(t.ne[0])}, f.to_f32(t));
  }
  check_structure(a);
  // llama.cpp scales by alpha / rank, or by 1 when alpha is 0 or absent: alpha = rank then.
  const gguf::Value* alpha = f.find("adapter.lora.alpha");
  ET_CHECK(!alpha || alpha->is_float(), "LoRA adapter ", path, ": adapter.lora.alpha is not a float");
  a.alpha = alpha ? static_cast<float>(alpha->f) : 0.0f;
  ET_CHECK(std::isfinite(a.alpha) && a.alpha >= 0, "LoRA adapter ", path, ": adapter.lora.alpha is ", a.alpha);
  if (a.alpha == 0) {
    a.alpha = static_cast<float>(a.rank);
    a.notes.push_back("adapter.lora.alpha is " + std::string(alpha ? "0" : "absent") +
                      ": llama.cpp then scales by 1, which is alpha = rank = " + std::to_string(a.rank));
  }
  return a;
}

json read_json_file(const std::string& path) {
  std::ifstream in(path);
  ET_CHECK_KIND(ErrorKind::io, in.good(), "cannot read '", path, "'");
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, false);
  ET_CHECK(j.is_object(), "'", path, "' is not a JSON object");
  return j;
}

LoraAdapter read_peft_adapter(const std::string& dir) {
  LoraAdapter a;
  a.format = Format::peft;
  a.path = dir;
  const std::string cfg_path = dir + "/adapter_config.json";
  const json c = read_json_file(cfg_path);
  auto field = [&](const char* k) { return c.contains(k) ? c[k] : json(); };
  const json type = field("peft_type");
  ET_CHECK(type == "LORA", "PEFT adapter ", dir, ": peft_type is ", type.dump(), ", edgetrain reads \"LORA\"");
  const json r = field("r"), alpha = field("lora_alpha");
  ET_CHECK(r.is_number_integer() && r.get<int64_t>() >= 1, "PEFT adapter ", cfg_path, ": r must be an integer >= 1, got ",
           r.dump());
  a.rank = r.get<int64_t>();
  // PEFT's default lora_alpha is 8.
  ET_CHECK(alpha.is_null() || alpha.is_number(), "PEFT adapter ", cfg_path, ": lora_alpha must be a number");
  const double lora_alpha = alpha.is_null() ? 8.0 : alpha.get<double>();
  ET_CHECK(std::isfinite(lora_alpha) && lora_alpha > 0, "PEFT adapter ", cfg_path, ": lora_alpha must be > 0, got ",
           lora_alpha);
  a.alpha = static_cast<float>(lora_alpha);
  // Options that change the math in ways edgetrain's forward does not compute.
  auto refuse = [&](bool bad, const char* key, const char* why) {
    ET_CHECK(!bad, "PEFT adapter ", cfg_path, ": ", key, " is ", field(key).dump(), "; ", why);
  };
  refuse(field("use_dora") == true, "use_dora", "edgetrain trains plain LoRA, not DoRA");
  refuse(!field("bias").is_null() && field("bias") != "none", "bias", "edgetrain's adapters have no biases (\"none\")");
  refuse(field("fan_in_fan_out") == true, "fan_in_fan_out", "Llama linears are not Conv1D: it must be false");
  for (const char* k : {"rank_pattern", "alpha_pattern"})
    refuse(field(k).is_object() && !field(k).empty(), k, "edgetrain gives every linear one rank and alpha");
  refuse(!field("modules_to_save").is_null() && !field("modules_to_save").empty(), "modules_to_save",
         "edgetrain's qlora trains only the adapters");
  if (field("use_rslora") == true) {
    // rsLoRA scales by lora_alpha / sqrt(r); edgetrain by alpha / r: the same with alpha = lora_alpha * sqrt(r).
    a.alpha = static_cast<float>(lora_alpha * std::sqrt(static_cast<double>(a.rank)));
    a.notes.push_back("use_rslora: scale lora_alpha / sqrt(r), read as alpha " + std::to_string(a.alpha));
  }
  if (field("base_model_name_or_path").is_string()) a.base_model = field("base_model_name_or_path").get<std::string>();

  const std::string st = dir + "/adapter_model.safetensors";
  ET_CHECK(fs::exists(st), "PEFT adapter ", dir, " has no adapter_model.safetensors",
           fs::exists(dir + "/adapter_model.bin") ? " (adapter_model.bin, a pickle, is not read: save with "
                                                    "safe_serialization=True)" : "");
  const safetensors::Reader reader = safetensors::Reader::open(st);
  if (auto it = reader.metadata().find("edgetrain.arch"); it != reader.metadata().end()) a.arch = it->second;
  for (const safetensors::TensorInfo& t : reader.tensors()) {
    ET_CHECK(t.shape.size() == 2, "PEFT adapter ", st, ": tensor '", t.name, "' has shape ", shape_str(t.shape),
             ", LoRA matrices have 2 dimensions");
    add_matrix(a, t.name, t.shape, reader.to_f32(t.name));
  }
  check_structure(a);

  // target_modules, when a list, names exactly the modules the tensors adapt (a regex string is not checked).
  const json tm = field("target_modules");
  if (tm.is_array()) {
    std::set<std::string> listed, have;
    for (const json& m : tm) {
      ET_CHECK(m.is_string(), "PEFT adapter ", cfg_path, ": target_modules holds ", m.dump(), ", not a module name");
      listed.insert(m.get<std::string>());
    }
    ModelConfig targets;
    targets.lora_targets = a.targets;
    for (const std::string& t : lora_names::config_targets(targets))
      have.insert(lora_names::target_by_letter(t)->module);
    for (const std::string& m : listed)
      ET_CHECK(have.count(m), "PEFT adapter ", dir, ": target_modules names '", m,
               "' but adapter_model.safetensors has no lora_A/lora_B for it (edgetrain adapts q_proj, k_proj, v_proj, "
               "o_proj, gate_proj, up_proj, down_proj)");
    for (const std::string& m : have)
      ET_CHECK(listed.count(m), "PEFT adapter ", dir, ": adapter_model.safetensors adapts '", m,
               "', which target_modules does not list");
  }
  return a;
}

}  // namespace

bool is_lora_adapter(const std::string& path) {
  if (fs::is_directory(path)) return fs::exists(path + "/adapter_config.json");
  if (!is_gguf_file(path)) return false;
  try {
    const gguf::File f = gguf::File::open(path);
    const gguf::Value* v = f.find("general.type");
    return v && v->type == gguf::VType::STRING && v->s == "adapter";
  } catch (const Error&) {
    return false;  // a GGUF file that does not parse is no adapter; its reader says why
  }
}

LoraAdapter read_lora_adapter(const std::string& path) {
  if (fs::is_directory(path)) {
    ET_CHECK(fs::exists(path + "/adapter_config.json"), "'", path,
             "' is not a LoRA adapter: a PEFT folder holds adapter_config.json");
    return read_peft_adapter(path);
  }
  ET_CHECK_KIND(ErrorKind::io, fs::exists(path), "LoRA adapter '", path, "' does not exist");
  ET_CHECK(is_gguf_file(path), "'", path, "' is not a LoRA adapter: neither a GGUF file nor a PEFT folder");
  return read_gguf_adapter(path);
}

ModelConfig with_lora_adapter(const ModelConfig& base, const LoraAdapter& a) {
  ET_CHECK(a.arch.empty() || a.arch == base.arch, "LoRA adapter ", a.path, " is for a '", a.arch,
           "' model, the base model is '", base.arch, "'");
  ModelConfig c = base;
  c.mode = TrainMode::qlora;
  c.lora_rank = a.rank;
  c.lora_alpha = a.alpha;
  c.lora_targets = a.targets;
  return c;
}

void load_lora_adapter(Model& model, const LoraAdapter& a) {
  const ModelConfig& c = model.config();
  ET_CHECK(c.mode == TrainMode::qlora, "LoRA adapter ", a.path, ": the model is in ", mode_name(c.mode),
           " mode; adapters load into a qlora model");
  ET_CHECK(a.arch.empty() || a.arch == c.arch, "LoRA adapter ", a.path, " is for a '", a.arch,
           "' model, the base model is '", c.arch, "'");
  ET_CHECK(c.lora_rank == a.rank && c.lora_alpha == a.alpha &&
               lora_names::config_targets(c) == lora_names::config_targets(with_lora_adapter(c, a)),
           "LoRA adapter ", a.path, " (rank ", a.rank, ", alpha ", a.alpha, ", targets ", a.targets,
           ") does not fit the model's LoRA settings (rank ", c.lora_rank, ", alpha ", c.lora_alpha, ", targets ",
           c.lora_targets, "): build it with with_lora_adapter()");
  ET_CHECK(a.n_layers == c.n_layers, "LoRA adapter ", a.path, " has adapters for ", a.n_layers,
           " layers, the base model has ", c.n_layers, " (an adapter of another model)");
  // Every check before the first upload: a rejected adapter leaves the model as it was.
  std::vector<std::pair<Param*, std::vector<float>>> uploads;
  size_t used = 0;
  for (Param& p : model.params()) {
    std::string weight;
    bool is_a = false;
    if (!lora_names::split(p.name, weight, is_a)) continue;
    const std::string file_name = a.format == LoraAdapter::Format::gguf ? lora_names::gguf_name(weight, is_a)
                                                                        : lora_names::peft_name(weight, is_a);
    auto it = a.tensors.find(p.name);
    ET_CHECK(it != a.tensors.end(), "LoRA adapter ", a.path, " has no tensor '", file_name, "'");
    const std::vector<int64_t> need = {p.value.shape()[0], p.value.shape()[1]};
    ET_CHECK(it->second.shape == need, "LoRA adapter ", a.path, ": tensor '", file_name, "' is ",
             shape_str(it->second.shape), " (", is_a ? "[r, in]" : "[out, r]", "), the base model's '", weight,
             "' needs ", shape_str(need), " (an adapter of another model)");
    std::vector<int64_t> order;
    if (!is_a)  // B's rows are the linear's output rows: rope pairs in the file's order
      order = a.format == LoraAdapter::Format::gguf ? llama_names::gguf_row_order(c, weight)
                                                    : llama_names::neox_row_order(c, weight);
    uploads.emplace_back(&p, llama_names::rows_from_file(order, it->second.values));
    ++used;
  }
  ET_CHECK(used == a.tensors.size(), "LoRA adapter ", a.path, " has tensors the model has no adapters for");
  for (auto& [p, v] : uploads) model.backend().upload(p->value, v.data(), v.size() * sizeof(float));
  model.reset_cache();
}

std::unique_ptr<Model> attach_lora_adapter(Model& base, const LoraAdapter& a, Backend& backend) {
  const ModelConfig cfg = with_lora_adapter(base.config(), a);
  Backend& from = base.backend();
  auto m = std::make_unique<Model>(backend, cfg);
  m->init(1);  // adapters, moments and gradients; every base tensor is overwritten below
  std::vector<std::pair<Param*, Param*>> coded;  // (ours, base) 4-bit linears whose codes the base has
  for (Param& p : m->params()) {
    std::string weight;
    bool is_a = false;
    if (lora_names::split(p.name, weight, is_a)) continue;
    Param& q = base.param(p.name);
    const std::vector<float> v = from.to_vector<float>(q.value);
    backend.upload(p.value, v.data(), v.size() * sizeof(float));
    if (p.quantized() && q.quantized()) coded.emplace_back(&p, &q);
  }
  m->quantize_from_masters();  // for an fp32 base; a 4-bit base's codes and scales replace these
  for (auto [p, q] : coded) {
    const auto words = from.to_vector<uint32_t>(q->codes);
    const auto scales = from.to_vector<float>(q->scales);
    backend.upload(p->codes, words.data(), words.size() * sizeof(uint32_t));
    backend.upload(p->scales, scales.data(), scales.size() * sizeof(float));
  }
  load_lora_adapter(*m, a);
  m->steps_done = 0;
  m->adam_steps = 0;
  return m;
}

std::unique_ptr<Model> load_model_file(const std::string& path, Backend& backend) {
  ET_CHECK(!is_lora_adapter(path), "'", path, "' is a LoRA adapter, not a model: give the base model it adapts and "
           "the adapter with --adapter");
  if (is_gguf_file(path)) return load_gguf_model(path, backend, TrainMode::qat, 32);
  if (is_hf_folder(path)) return load_hf_llama(path, backend, TrainMode::qat, 32);
  auto m = std::make_unique<Model>(backend, read_checkpoint_config(path));
  load_checkpoint(path, *m);
  return m;
}

std::unique_ptr<Model> load_model_with_adapter(const std::string& base, const std::string& adapter, Backend& backend) {
  const LoraAdapter a = read_lora_adapter(adapter);
  // The base passes through a model of its own on the same backend (io creates no backends): for the moment
  // of the copy the base's weights are there twice.
  auto b = load_model_file(base, backend);
  return attach_lora_adapter(*b, a, backend);
}

}  // namespace edgetrain
