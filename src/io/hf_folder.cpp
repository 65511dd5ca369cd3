// A Hugging Face Llama folder (see hf_folder.h): opening its safetensors shards, and reading config.json as
// transformers 4 and 5 write it, with every field that changes a Llama's math either understood or
// reported as a problem naming it.
#include "io/hf_folder.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "edgetrain/error.h"
#include "io/llama_names.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace edgetrain::hf_folder {

namespace {

json read_json(const std::string& path) {
  std::ifstream in(path);
  ET_CHECK_KIND(ErrorKind::io, in, "file ", path, ": cannot open");
  try {
    return json::parse(in);
  } catch (const std::exception& e) {
    fail("file ", path, ": not valid JSON: ", e.what());
  }
}

std::string num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// The fields of config.json, read with every problem recorded (naming the field) instead of thrown.
struct Fields {
  const json& j;
  std::vector<std::string>& problems;

  bool present(const char* k) const { return j.contains(k) && !j[k].is_null(); }
  void problem(const std::string& field, const std::string& what) {
    problems.push_back("config.json field '" + field + "' " + what);
  }
  int64_t integer(const char* k, bool required, int64_t def) {
    if (!present(k)) {
      if (required) problems.push_back("config.json has no field '" + std::string(k) + "'");
      return def;
    }
    if (!j[k].is_number_integer()) {
      problem(k, "must be an integer, got " + j[k].dump());
      return def;
    }
    return j[k].get<int64_t>();
  }
  std::optional<double> number(const json& v, const std::string& field) {
    if (!v.is_number()) {
      problem(field, "must be a number, got " + v.dump());
      return std::nullopt;
    }
    return v.get<double>();
  }
  // A field LlamaConfig reads whose only value edgetrain implements is `want`.
  void must_be(const char* k, const json& want, const std::string& why) {
    if (present(k) && j[k] != want) problem(k, "is " + j[k].dump() + ": " + why);
  }
};

// The rotary embedding of config.json: rope_theta and, for rope_type "llama3" (Llama 3.1/3.2), its four
// parameters.
struct Rope {
  double theta = 10000.0;  // LlamaConfig's default
  bool llama3 = false;
  std::string block;                      // the object that said "llama3"
  std::map<std::string, double> params;  // factor, low_freq_factor, high_freq_factor, original_max_position_embeddings
};
const char* const kLlama3Params[] = {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"};

// rope_theta from transformers 5's rope_parameters {rope_theta, rope_type, ...} or transformers 4's
// top-level rope_theta, with the rope type (either's rope_type, or rope_scaling's older "type") "default" or
// "llama3" (with all four of its parameters, as transformers requires them).
Rope read_rope(Fields& f) {
  Rope r;
  std::optional<double> top, inner;
  std::string inner_from;
  if (f.present("rope_theta")) top = f.number(f.j["rope_theta"], "rope_theta");
  for (const char* block : {"rope_parameters", "rope_scaling"}) {
    if (!f.present(block)) continue;
    const json& o = f.j[block];
    if (!o.is_object()) {
      f.problem(block, "must be an object, got " + o.dump());
      continue;
    }
    // The type first: a scaled rope's other parameters are that type's, and the type is the problem.
    bool unknown = false, llama3 = false;
    for (const char* key : {"rope_type", "type"}) {
      if (!o.contains(key) || o[key] == "default") continue;
      if (o[key] == "llama3") {
        llama3 = true;
        continue;
      }
      f.problem(std::string(block) + "." + key, "is " + o[key].dump() +
                                                    ": edgetrain's rotary embedding implements rope_type \"default\" "
                                                    "and \"llama3\" only");
      unknown = true;
    }
    if (unknown) continue;
    if (llama3) r.llama3 = true, r.block = block;
    for (const auto& [k, v] : o.items()) {
      const std::string field = std::string(block) + "." + k;
      const bool l3 = std::find(std::begin(kLlama3Params), std::end(kLlama3Params), k) != std::end(kLlama3Params);
      if (k == "rope_type" || k == "type") {
        continue;
      } else if (k == "rope_theta") {
        if (auto t = f.number(v, field)) {
          if (inner && *inner != *t)
            f.problem(field, "= " + num(*t) + " disagrees with " + inner_from + " = " + num(*inner));
          inner = *t, inner_from = field;
        }
      } else if (k == "partial_rotary_factor") {
        if (auto p = f.number(v, field); p && *p != 1.0)
          f.problem(field, "= " + num(*p) + ": edgetrain rotates the whole head (factor 1 only)");
      } else if (llama3 && l3) {
        if (auto x = f.number(v, field)) {
          if (r.params.count(k) && r.params[k] != *x)
            f.problem(field, "= " + num(*x) + " disagrees with the other block's " + num(r.params[k]));
          r.params[k] = *x;
        }
      } else if (v.is_object()) {
        f.problem(field, "holds rope parameters per layer type, which a Llama does not have");
      } else {
        f.problem(field, "= " + v.dump() + " is not a parameter of rope_type \"" + (llama3 ? "llama3" : "default") +
                             "\" that edgetrain knows");
      }
    }
  }
  if (top && inner && *top != *inner)
    f.problem("rope_theta", "= " + num(*top) + " disagrees with " + inner_from + " = " + num(*inner));
  r.theta = inner ? *inner : top ? *top : 10000.0;
  if (r.llama3) {
    for (const char* k : kLlama3Params)
      if (!r.params.count(k)) f.problem(r.block + "." + k, "is missing (rope_type \"llama3\" needs it)");
    if (r.params.size() == 4 &&
        !(r.params["factor"] > 0 && r.params["low_freq_factor"] > 0 &&
          r.params["high_freq_factor"] > r.params["low_freq_factor"] && r.params["original_max_position_embeddings"] > 0))
      f.problem(r.block, "has llama3 parameters edgetrain cannot use: factor and low_freq_factor must be "
                                   "> 0 and high_freq_factor > low_freq_factor");
  }
  return r;
}

// Llama 3.1's rope scaling as per-pair factors dividing theta^(-2i/hd) (the form of GGUF's rope_freqs.weight,
// ModelConfig::rope_factors): with wavelength w = 2 pi / theta^(-2i/hd) and old context L, a pair keeps its
// frequency when w < L / high_freq_factor, is divided by `factor` when w > L / low_freq_factor, and in
// between by 1 / ((1 - s) / factor + s) with s = (L / w - low_freq_factor) / (high_freq_factor -
// low_freq_factor) -- what transformers' llama3 inv_freq and llama.cpp's converter compute.
std::vector<float> llama3_factors(const Rope& r, int64_t hd) {
  const double factor = r.params.at("factor"), low = r.params.at("low_freq_factor"),
               high = r.params.at("high_freq_factor"), L = r.params.at("original_max_position_embeddings");
  std::vector<float> out;
  for (int64_t i = 0; i < hd / 2; ++i) {
    const double w = 2.0 * M_PI / std::pow(r.theta, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
    double f;
    if (w < L / high) f = 1.0;
    else if (w > L / low) f = factor;
    else {
      const double smooth = (L / w - low) / (high - low);
      f = 1.0 / ((1.0 - smooth) / factor + smooth);
    }
    out.push_back(static_cast<float>(f));
  }
  return out;
}

bool float_dtype(const std::string& d) { return d == "F32" || d == "F16" || d == "BF16"; }

}  // namespace

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

Check check(const std::string& dir, const Shards& shards, TrainMode mode, int64_t group_size) {
  const json j = read_json(dir + "/config.json");
  Check out;
  std::vector<std::string>& P = out.problems;
  ModelConfig& c = out.config;
  c.mode = mode;
  c.group_size = group_size;
  if (!j.is_object()) {
    P.push_back("config.json is not a JSON object");
    return out;
  }
  Fields f{j, P};
  // model_type -> the class transformers builds for it. Mistral is a Llama (llama.cpp's GGUF says "llama"
  // too) whose sliding window must not cut into the context.
  const std::map<std::string, std::string> kClasses = {{"llama", "LlamaForCausalLM"},
                                                       {"mistral", "MistralForCausalLM"},
                                                       {"qwen2", "Qwen2ForCausalLM"},
                                                       {"qwen3", "Qwen3ForCausalLM"}};
  if (j.contains("model_type") && !(j["model_type"].is_string() && kClasses.count(j["model_type"].get<std::string>()))) {
    P.push_back("config.json: model_type " + j["model_type"].dump() +
                " is not supported (only \"llama\", \"mistral\", \"qwen2\" and \"qwen3\")");
    return out;
  }
  const std::string model_type = j.contains("model_type") ? j["model_type"].get<std::string>() : "llama";
  c.arch = model_type == "mistral" ? "llama" : model_type;
  const std::string cls = kClasses.at(model_type);
  if (f.present("architectures") && j["architectures"] != json::array({cls}))
    f.problem("architectures", "is " + j["architectures"].dump() + ": edgetrain trains [\"" + cls + "\"] only for model_type \"" +
                                   model_type + "\"");
  c.dim = f.integer("hidden_size", true, 0);
  c.n_layers = f.integer("num_hidden_layers", true, 0);
  c.n_heads = f.integer("num_attention_heads", true, 0);
  const size_t before = P.size();
  const int64_t kv = f.integer("num_key_value_heads", false, c.n_heads);
  if (P.size() == before) {
    if (kv >= 1 && c.n_heads >= 1 && c.n_heads % kv == 0)
      c.n_kv_heads = kv;
    else
      P.push_back("num_key_value_heads = " + std::to_string(kv) + " does not divide num_attention_heads = " +
                  std::to_string(c.n_heads) +
                  " (grouped-query attention needs num_attention_heads / num_key_value_heads query heads per "
                  "key/value head)");
  }
  c.ffn_dim = f.integer("intermediate_size", true, 0);
  c.max_seq = f.integer("max_position_embeddings", false, 2048);
  if (model_type == "mistral" && f.present("sliding_window")) {
    const int64_t w = f.integer("sliding_window", false, 0);
    if (w < c.max_seq)
      f.problem("sliding_window", "= " + std::to_string(w) + " is shorter than max_position_embeddings = " +
                                      std::to_string(c.max_seq) + ": edgetrain's attention is full causal attention");
  }
  const int64_t vocab_size = f.integer("vocab_size", true, 0);
  c.vocab = vocab_size;
  if (f.present("rms_norm_eps"))
    if (auto e = f.number(j["rms_norm_eps"], "rms_norm_eps")) c.norm_eps = static_cast<float>(*e);
  if (!f.present("rms_norm_eps")) c.norm_eps = 1e-6f;  // LlamaConfig's default
  const Rope rope = read_rope(f);
  c.rope_theta = static_cast<float>(rope.theta);
  f.must_be("hidden_act", "silu", "edgetrain's MLP is SwiGLU (\"silu\")");
  // qwen2's q/k/v biases are always there (Qwen2Config has no switch); other biases edgetrain does not have.
  if (c.arch != "qwen2") f.must_be("attention_bias", false, "edgetrain's " + model_type + " attention projections have no bias");
  f.must_be("mlp_bias", false, "edgetrain's MLP projections have no bias");
  f.must_be("use_sliding_window", false, "edgetrain's attention is full causal attention, no sliding window");
  if (f.present("layer_types")) {
    const json& lt = j["layer_types"];
    bool full = lt.is_array();
    if (full)
      for (const json& t : lt) full &= t == "full_attention";
    if (!full) f.problem("layer_types", "is " + lt.dump() + ": edgetrain's layers are all \"full_attention\"");
  }
  f.must_be("attention_dropout", 0.0, "edgetrain trains without attention dropout");
  if (f.present("partial_rotary_factor")) f.must_be("partial_rotary_factor", 1.0, "edgetrain rotates the whole head");
  if (f.present("quantization_config"))
    f.problem("quantization_config", "is present: the weights are quantized (" +
                                         (j["quantization_config"].is_object() && j["quantization_config"].contains("quant_method")
                                              ? j["quantization_config"]["quant_method"].dump()
                                              : std::string("unknown method")) +
                                         "), and edgetrain reads F32, F16 and BF16 weights only");
  // head_dim (transformers: hidden_size / num_attention_heads when absent) sets the q/k/v head width.
  if (f.present("head_dim") && c.n_heads >= 1) {
    const int64_t hd = f.integer("head_dim", false, 0);
    if (hd < 2 || hd % 2 != 0)
      f.problem("head_dim", "= " + std::to_string(hd) + ": a rotary head must be even and >= 2 wide");
    else if (c.dim % c.n_heads != 0 || hd != c.dim / c.n_heads)
      c.head_size = hd;
  }
  if (rope.llama3 && rope.params.size() == 4 && c.n_heads >= 1 && (c.head_size > 0 || c.dim % c.n_heads == 0))
    c.rope_factors = llama3_factors(rope, c.head_dim());
  if (f.present("tie_word_embeddings")) {
    if (j["tie_word_embeddings"].is_boolean())
      c.tied_head = j["tie_word_embeddings"].get<bool>();
    else
      f.problem("tie_word_embeddings", "must be true or false, got " + j["tie_word_embeddings"].dump());
  }

  const safetensors::Reader* emb = shards.find("model.embed_tokens.weight");
  if (!emb || emb->info("model.embed_tokens.weight").shape.size() != 2) {
    P.push_back(emb ? "tensor 'model.embed_tokens.weight' must be 2-D" : "no tensor 'model.embed_tokens.weight'");
    return out;
  }
  c.vocab = emb->info("model.embed_tokens.weight").shape[0];
  if (vocab_size != 0 && vocab_size != c.vocab)
    f.problem("vocab_size", "= " + std::to_string(vocab_size) + " differs from model.embed_tokens.weight's " +
                                std::to_string(c.vocab) + " rows");
  // transformers ties the head when asked to; without lm_head.weight the head can only be the embedding.
  if (!shards.find("lm_head.weight")) c.tied_head = true;
  if (!P.empty()) return out;
  try {
    c.validate();
  } catch (const Error& e) {
    P.push_back(std::string("config.json: ") + e.what());
    return out;
  }

  std::set<std::string> expected;
  for (const llama_names::BaseTensor& t : llama_names::base_tensors(c)) {
    expected.insert(t.hf);
    const safetensors::Reader* r = shards.find(t.hf);
    if (!r) {
      P.push_back("missing tensor '" + t.hf + "' (for " + t.name + ")");
      continue;
    }
    const safetensors::TensorInfo& ti = r->info(t.hf);
    if (ti.shape != std::vector<int64_t>(t.shape.data(), t.shape.data() + t.shape.rank()))
      P.push_back("tensor '" + t.hf + "' in " + r->source() + " has the wrong shape for " + t.name + " " + t.shape.str());
    if (!float_dtype(ti.dtype))
      P.push_back("tensor '" + t.hf + "' in " + r->source() + " is " + ti.dtype + "; edgetrain reads F32, F16 and BF16");
  }
  for (const auto& [name, at] : shards.where) {
    // A tied head's lm_head.weight is what transformers ignores too; rotary_emb.inv_freq (older
    // checkpoints) is recomputed from rope_theta by transformers, not loaded.
    if (expected.count(name) || (name == "lm_head.weight" && c.tied_head) ||
        name.find("rotary_emb.inv_freq") != std::string::npos)
      continue;
    P.push_back("tensor '" + name + "' in " + shards.readers[at].source() +
                " is not part of the Llama model edgetrain trains, and would change its math");
  }
  return out;
}

ModelConfig config_of(const std::string& dir, const Shards& shards, TrainMode mode, int64_t group_size) {
  Check c = check(dir, shards, mode, group_size);
  if (!c.problems.empty()) {
    const size_t more = c.problems.size() - 1;
    fail("hf: ", dir, ": ", c.problems.front(),
         more ? " (and " + std::to_string(more) + " more problem" + (more > 1 ? "s" : "") + "; `edgetrain info " +
                    dir + "` lists them)"
              : std::string());
  }
  return c.config;
}

}  // namespace edgetrain::hf_folder
