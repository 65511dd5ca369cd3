// A Hugging Face Llama folder (see hf_folder.h): opening its safetensors shards, and reading config.json as
// transformers 4 and 5 write it, with every field that changes a Llama's math either understood or
// reported as a problem naming it.
#include "io/hf_folder.h"

#include <filesystem>
#include <fstream>
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

// rope_theta from transformers 5's rope_parameters {rope_theta, rope_type, ...} or transformers 4's
// top-level rope_theta, with the rope type (either's rope_type, or rope_scaling's older "type") "default".
double read_rope(Fields& f) {
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
    bool scaled = false;
    for (const char* key : {"rope_type", "type"})
      if (o.contains(key) && o[key] != "default") {
        f.problem(std::string(block) + "." + key,
                  "is " + o[key].dump() + ": edgetrain's rotary embedding has no rope scaling (only rope_type \"default\")");
        scaled = true;
      }
    if (scaled) continue;
    for (const auto& [k, v] : o.items()) {
      const std::string field = std::string(block) + "." + k;
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
      } else if (v.is_object()) {
        f.problem(field, "holds rope parameters per layer type, which a Llama does not have");
      } else {
        f.problem(field, "= " + v.dump() + " is not a parameter of rope_type \"default\" that edgetrain knows");
      }
    }
  }
  if (top && inner && *top != *inner)
    f.problem("rope_theta", "= " + num(*top) + " disagrees with " + inner_from + " = " + num(*inner));
  return inner ? *inner : top ? *top : 10000.0;  // LlamaConfig's default
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
  if (j.contains("model_type") && j["model_type"] != "llama") {
    P.push_back("config.json: model_type " + j["model_type"].dump() + " is not supported (only \"llama\")");
    return out;
  }
  if (f.present("architectures") && j["architectures"] != json::array({"LlamaForCausalLM"}))
    f.problem("architectures", "is " + j["architectures"].dump() + ": edgetrain trains [\"LlamaForCausalLM\"] only");
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
  const int64_t vocab_size = f.integer("vocab_size", true, 0);
  c.vocab = vocab_size;
  if (f.present("rms_norm_eps"))
    if (auto e = f.number(j["rms_norm_eps"], "rms_norm_eps")) c.norm_eps = static_cast<float>(*e);
  if (!f.present("rms_norm_eps")) c.norm_eps = 1e-6f;  // LlamaConfig's default
  c.rope_theta = static_cast<float>(read_rope(f));
  f.must_be("hidden_act", "silu", "edgetrain's MLP is SwiGLU (\"silu\")");
  f.must_be("attention_bias", false, "edgetrain's attention projections have no bias");
  f.must_be("mlp_bias", false, "edgetrain's MLP projections have no bias");
  f.must_be("attention_dropout", 0.0, "edgetrain trains without attention dropout");
  if (f.present("partial_rotary_factor")) f.must_be("partial_rotary_factor", 1.0, "edgetrain rotates the whole head");
  if (f.present("quantization_config"))
    f.problem("quantization_config", "is present: the weights are quantized (" +
                                         (j["quantization_config"].is_object() && j["quantization_config"].contains("quant_method")
                                              ? j["quantization_config"]["quant_method"].dump()
                                              : std::string("unknown method")) +
                                         "), and edgetrain reads F32, F16 and BF16 weights only");
  if (f.present("head_dim") && c.n_heads >= 1 && c.dim % c.n_heads == 0) {
    const int64_t hd = f.integer("head_dim", false, c.dim / c.n_heads);
    if (hd != c.dim / c.n_heads)
      f.problem("head_dim", "= " + std::to_string(hd) + " differs from hidden_size / num_attention_heads = " +
                                std::to_string(c.dim / c.n_heads));
  }
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
