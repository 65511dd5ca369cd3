// Whether a GGUF file is a Llama model edgetrain can train, and its config (see gguf_llama.h). The rule: a
// key or tensor that changes the model's math must be one edgetrain reads and implements; one it does not
// know, or knows with a value it does not implement (rope scaling, experts, per-layer head counts, rope
// frequency factors, biases), is a problem naming it, never silently ignored or replaced by a default.
// llama.cpp reads a llama model's math from the llama.* keys and the tensors only; general.*, tokenizer.*
// and other namespaces (quantize.imatrix.*, ...) describe the file.
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "edgetrain/error.h"
#include "io/gguf_llama.h"
#include "io/llama_names.h"

namespace edgetrain::gguf_llama {

namespace {

using gguf::Value;
using gguf::VType;

std::vector<uint64_t> gguf_dims(const Shape& s) {
  std::vector<uint64_t> ne;
  for (int64_t d = s.rank() - 1; d >= 0; --d) ne.push_back(static_cast<uint64_t>(s[d]));
  return ne;
}

std::string dims_str(const std::vector<uint64_t>& ne) {
  std::ostringstream os;
  os << "[";
  for (size_t d = 0; d < ne.size(); ++d) os << (d ? ", " : "") << ne[d];
  os << "]";
  return os.str();
}

// The llama.* keys edgetrain reads, without the prefix; anything else under llama. is a problem.
const std::set<std::string> kKnownKeys = {
    "context_length", "embedding_length", "block_count", "feed_forward_length", "attention.head_count",
    "attention.head_count_kv", "attention.layer_norm_rms_epsilon", "rope.freq_base", "rope.dimension_count",
    "attention.key_length", "attention.value_length", "vocab_size", "rope.scaling.type", "rope.scaling.factor",
    "rope.scale_linear", "rope.scaling.attn_factor", "rope.scaling.original_context_length",
    "rope.scaling.finetuned", "expert_count", "expert_used_count"};

// What some tensors llama.cpp knows are, for the message that edgetrain does not use them.
std::string what_tensor_is(const std::string& name) {
  if (name == "rope_freqs.weight") return " (Llama 3.1-style rope frequency factors)";
  if (name.find(".bias") != std::string::npos) return " (a bias, which edgetrain's Llama has none of)";
  if (name.find("_exps") != std::string::npos || name.find("ffn_gate_inp") != std::string::npos)
    return " (mixture-of-experts weights)";
  if (name.find("attn_qkv") != std::string::npos) return " (fused q/k/v weights)";
  return "";
}

struct Keys {
  const gguf::File& f;
  std::vector<std::string>& problems;

  const Value* find(const std::string& key) const { return f.find("llama." + key); }
  // An integer key; `fallback` when absent (a problem when `required`) or unusable.
  int64_t integer(const std::string& key, bool required, int64_t fallback) {
    const Value* v = find(key);
    if (!v) {
      if (required) problems.push_back("metadata key 'llama." + key + "' is missing");
      return fallback;
    }
    if (v->type == VType::ARRAY) {
      problems.push_back("metadata key 'llama." + key + "' is an array " + v->describe() +
                         " (a value per layer); edgetrain's layers all have the same shape");
      return fallback;
    }
    if (!v->is_int() || (v->type == VType::U64 && v->u > (uint64_t{1} << 62))) {
      problems.push_back("metadata key 'llama." + key + "' must be an integer, got " + v->describe());
      return fallback;
    }
    return v->i;
  }
  // A number key (integer or float); `fallback` and *present = false when absent or unusable.
  double number(const std::string& key, bool required, double fallback, bool* present = nullptr) {
    const Value* v = find(key);
    if (present) *present = false;
    if (!v) {
      if (required) problems.push_back("metadata key 'llama." + key + "' is missing");
      return fallback;
    }
    if (!v->is_int() && !v->is_float()) {
      problems.push_back("metadata key 'llama." + key + "' must be a number, got " + v->describe());
      return fallback;
    }
    if (present) *present = true;
    return v->is_int() ? static_cast<double>(v->i) : v->f;
  }
};

void check_rope_scaling(Keys& k) {
  // llama.cpp's default type is "linear" with factor 0 (= 1): no scaling. Anything that scales is not
  // implemented by edgetrain's rotary embedding.
  std::string type = "linear";
  if (const Value* v = k.find("rope.scaling.type")) {
    if (v->type != VType::STRING) {
      k.problems.push_back("metadata key 'llama.rope.scaling.type' must be a string, got " + v->describe());
    } else {
      type = v->s;
    }
  }
  if (type != "none" && type != "linear") {
    k.problems.push_back("metadata key 'llama.rope.scaling.type' = \"" + type +
                         "\": edgetrain's rotary embedding has no rope scaling (only \"none\" or a linear factor of 1)");
    return;
  }
  for (const char* key : {"rope.scaling.factor", "rope.scale_linear"}) {
    bool present = false;
    const double factor = k.number(key, false, 0.0, &present);
    if (present && factor != 0.0 && factor != 1.0) {
      std::ostringstream os;
      os << "metadata key 'llama." << key << "' = " << factor
         << ": edgetrain's rotary embedding has no rope scaling (factor 1 or 0 only)";
      k.problems.push_back(os.str());
    }
  }
  bool present = false;
  const double attn = k.number("rope.scaling.attn_factor", false, 1.0, &present);
  if (present && attn != 1.0) {
    std::ostringstream os;
    os << "metadata key 'llama.rope.scaling.attn_factor' = " << attn << ": edgetrain implements only 1";
    k.problems.push_back(os.str());
  }
}

}  // namespace

Check check(const gguf::File& f, TrainMode mode, int64_t group_size) {
  Check out;
  std::vector<std::string>& P = out.problems;
  ModelConfig& c = out.config;
  c.mode = mode;
  c.group_size = group_size;
  const Value* arch = f.find("general.architecture");
  if (!arch || arch->type != VType::STRING) {
    P.push_back(arch ? "metadata key 'general.architecture' must be a string" : "metadata key 'general.architecture' is missing");
    return out;
  }
  if (arch->s != "llama") {
    P.push_back("general.architecture is '" + arch->s + "', only 'llama' is supported");
    return out;
  }
  if (const Value* split = f.find("split.count"); split && (!split->is_int() || split->u != 1))
    P.push_back("split.count = " + split->describe() +
                ": this is one part of a split GGUF file (merge the parts with llama.cpp's llama-gguf-split --merge)");
  bool quantized = false;
  for (const gguf::TensorInfo& t : f.tensors()) quantized |= gguf::block_size(t.type).elems > 1;
  if (const Value* qv = f.find("general.quantization_version"); qv && quantized && !(qv->is_int() && qv->u == 2))
    P.push_back("general.quantization_version = " + qv->describe() +
                ": edgetrain reads the block layouts of version 2 (llama.cpp's since 2023)");
  for (const auto& [key, v] : f.metadata())
    if (key.rfind("llama.", 0) == 0 && !kKnownKeys.count(key.substr(6)))
      P.push_back("metadata key '" + key + "' = " + v.describe() +
                  " is not one edgetrain knows, so it cannot tell whether it changes the model's math");

  Keys k{f, P};
  c.dim = k.integer("embedding_length", true, 0);
  c.n_layers = k.integer("block_count", true, 0);
  c.n_heads = k.integer("attention.head_count", true, 0);
  if (k.find("attention.head_count_kv")) {
    // Grouped-query attention. K rows are in llama.cpp's order already (adjacent rotary pairs within each
    // of the head_count_kv heads, as convert_hf_to_gguf permutes them): nothing to permute here.
    const size_t before = P.size();
    const int64_t kv = k.integer("attention.head_count_kv", false, 0);
    if (P.size() == before) {
      if (kv >= 1 && c.n_heads >= 1 && c.n_heads % kv == 0)
        c.n_kv_heads = kv;
      else
        P.push_back("llama.attention.head_count_kv = " + std::to_string(kv) + " does not divide " +
                    "llama.attention.head_count = " + std::to_string(c.n_heads) +
                    " (grouped-query attention needs n_heads / n_kv_heads query heads per key/value head)");
    }
  }
  c.ffn_dim = k.integer("feed_forward_length", true, 0);
  c.max_seq = k.integer("context_length", false, 2048);
  c.rope_theta = static_cast<float>(k.number("rope.freq_base", false, 10000.0));  // llama.cpp's default too
  c.norm_eps = static_cast<float>(k.number("attention.layer_norm_rms_epsilon", true, 1e-5));
  const bool heads_ok = c.n_heads >= 1 && c.dim >= 1 && c.dim % c.n_heads == 0;
  if (c.n_heads >= 1 && c.dim >= 1 && !heads_ok)
    P.push_back("llama.embedding_length " + std::to_string(c.dim) + " is not a multiple of llama.attention.head_count " +
                std::to_string(c.n_heads));
  if (heads_ok) {
    const int64_t hd = c.dim / c.n_heads;
    for (const char* key : {"rope.dimension_count", "attention.key_length", "attention.value_length"}) {
      if (!k.find(key)) continue;
      const int64_t v = k.integer(key, false, hd);
      if (v != hd)
        P.push_back(std::string("llama.") + key + " = " + std::to_string(v) + " differs from the head dim " +
                    std::to_string(hd) + " = embedding_length / head_count" +
                    (std::string(key) == "rope.dimension_count" ? " (partial rotary is not supported)"
                                                                : " (edgetrain's heads are embedding_length / head_count wide)"));
    }
  }
  check_rope_scaling(k);
  for (const char* key : {"expert_count", "expert_used_count"})
    if (k.find(key) && k.integer(key, false, 0) != 0)
      P.push_back(std::string("llama.") + key + " = " + k.find(key)->describe() +
                  ": a mixture-of-experts model, which edgetrain does not train");

  const gguf::TensorInfo* emb = f.tensor("token_embd.weight");
  if (!emb || emb->ne.size() != 2) {
    P.push_back("missing 2-D tensor 'token_embd.weight'");
    return out;
  }
  c.vocab = static_cast<int64_t>(emb->ne[1]);
  if (k.find("vocab_size")) {
    const int64_t v = k.integer("vocab_size", false, c.vocab);
    if (v != c.vocab)
      P.push_back("llama.vocab_size = " + std::to_string(v) + " differs from token_embd.weight's " +
                  std::to_string(c.vocab) + " rows");
  }
  c.tied_head = f.tensor("output.weight") == nullptr;
  if (!P.empty()) return out;  // the tensors' shapes depend on a config that is not right yet
  try {
    c.validate();
  } catch (const Error& e) {
    P.push_back(e.what());
    return out;
  }

  // The tensors: the model's, with their shapes and decodable types, and nothing else.
  std::set<std::string> expected;
  for (const llama_names::BaseTensor& t : llama_names::base_tensors(c)) {
    expected.insert(t.gguf);
    const gguf::TensorInfo* ti = f.tensor(t.gguf);
    if (!ti) {
      P.push_back("missing tensor '" + t.gguf + "' (for " + t.name + ")");
      continue;
    }
    if (ti->ne != gguf_dims(t.shape))
      P.push_back("tensor '" + t.gguf + "' has the wrong shape for " + t.name + " " + t.shape.str() + ": ne " +
                  dims_str(ti->ne) + " (fastest first)");
    if (!gguf::can_decode(ti->type))
      P.push_back("tensor '" + t.gguf + "' is " + gguf::type_name(ti->type) + ", which edgetrain does not decode (it decodes " +
                  gguf::decodable_types() + ")");
  }
  for (const gguf::TensorInfo& t : f.tensors())
    if (!expected.count(t.name))
      P.push_back("tensor '" + t.name + "'" + what_tensor_is(t.name) +
                  " is not part of the Llama model edgetrain trains, and would change its math");
  return out;
}

ModelConfig config_of(const gguf::File& f, TrainMode mode, int64_t group_size) {
  Check c = check(f, mode, group_size);
  if (!c.problems.empty()) {
    const size_t more = c.problems.size() - 1;
    fail("file ", f.source(), ": ", c.problems.front(),
         more ? " (and " + std::to_string(more) + " more problem" + (more > 1 ? "s" : "") +
                    "; `edgetrain info " + f.source() + "` lists them)"
              : std::string());
  }
  return c.config;
}

}  // namespace edgetrain::gguf_llama
