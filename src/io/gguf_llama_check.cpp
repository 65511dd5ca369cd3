// Whether a GGUF file is a Llama model edgetrain can train, and its config (see gguf_llama.h). The rule: a
// key or tensor that changes the model's math must be one edgetrain reads and implements; one it does not
// know, or knows with a value it does not implement (rope scaling other than rope_freqs.weight's factors,
// experts, per-layer head counts, biases), is a problem naming it, never silently ignored or replaced by a
// default.
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
  if (name.find(".bias") != std::string::npos) return " (a bias, which edgetrain's Llama has none of)";
  if (name.find("_exps") != std::string::npos || name.find("ffn_gate_inp") != std::string::npos)
    return " (mixture-of-experts weights)";
  if (name.find("attn_qkv") != std::string::npos) return " (fused q/k/v weights)";
  return "";
}

struct Keys {
  const gguf::File& f;
  std::vector<std::string>& problems;
  std::string pfx;  // "<architecture>."

  const Value* find(const std::string& key) const { return f.find(pfx + key); }
  // An integer key; `fallback` when absent (a problem when `required`) or unusable.
  int64_t integer(const std::string& key, bool required, int64_t fallback) {
    const Value* v = find(key);
    if (!v) {
      if (required) problems.push_back("metadata key '" + pfx + key + "' is missing");
      return fallback;
    }
    if (v->type == VType::ARRAY) {
      problems.push_back("metadata key '" + pfx + key + "' is an array " + v->describe() +
                         " (a value per layer); edgetrain's layers all have the same shape");
      return fallback;
    }
    if (!v->is_int() || (v->type == VType::U64 && v->u > (uint64_t{1} << 62))) {
      problems.push_back("metadata key '" + pfx + key + "' must be an integer, got " + v->describe());
      return fallback;
    }
    return v->i;
  }
  // A number key (integer or float); `fallback` and *present = false when absent or unusable.
  double number(const std::string& key, bool required, double fallback, bool* present = nullptr) {
    const Value* v = find(key);
    if (present) *present = false;
    if (!v) {
      if (required) problems.push_back("metadata key '" + pfx + key + "' is missing");
      return fallback;
    }
    if (!v->is_int() && !v->is_float()) {
      problems.push_back("metadata key '" + pfx + key + "' must be a number, got " + v->describe());
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
      k.problems.push_back("metadata key '" + k.pfx + "rope.scaling.type' must be a string, got " + v->describe());
    } else {
      type = v->s;
    }
  }
  if (type != "none" && type != "linear") {
    k.problems.push_back("metadata key '" + k.pfx + "rope.scaling.type' = \"" + type +
                         "\": edgetrain's rotary embedding has no rope scaling (only \"none\" or a linear factor of 1)");
    return;
  }
  for (const char* key : {"rope.scaling.factor", "rope.scale_linear"}) {
    bool present = false;
    const double factor = k.number(key, false, 0.0, &present);
    if (present && factor != 0.0 && factor != 1.0) {
      std::ostringstream os;
      os << "metadata key '" << k.pfx << key << "' = " << factor
         << ": edgetrain's rotary embedding has no rope scaling (factor 1 or 0 only)";
      k.problems.push_back(os.str());
    }
  }
  bool present = false;
  const double attn = k.number("rope.scaling.attn_factor", false, 1.0, &present);
  if (present && attn != 1.0) {
    std::ostringstream os;
    os << "metadata key '" << k.pfx << "rope.scaling.attn_factor' = " << attn << ": edgetrain implements only 1";
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
  if (arch->s != "llama" && arch->s != "qwen2" && arch->s != "qwen3") {
    P.push_back("general.architecture is '" + arch->s + "': edgetrain trains 'llama', 'qwen2' and 'qwen3' only");
    return out;
  }
  c.arch = arch->s;
  const std::string pfx = arch->s + ".";  // llama.cpp reads an architecture's keys under its name
  if (const Value* split = f.find("split.count"); split && (!split->is_int() || split->u != 1))
    P.push_back("split.count = " + split->describe() +
                ": this is one part of a split GGUF file (merge the parts with llama.cpp's llama-gguf-split --merge)");
  bool quantized = false;
  for (const gguf::TensorInfo& t : f.tensors()) quantized |= gguf::block_size(t.type).elems > 1;
  if (const Value* qv = f.find("general.quantization_version"); qv && quantized && !(qv->is_int() && qv->u == 2))
    P.push_back("general.quantization_version = " + qv->describe() +
                ": edgetrain reads the block layouts of version 2 (llama.cpp's since 2023)");
  for (const auto& [key, v] : f.metadata())
    if (key.rfind(pfx, 0) == 0 && !kKnownKeys.count(key.substr(pfx.size())))
      P.push_back("metadata key '" + key + "' = " + v.describe() +
                  " is not one edgetrain knows, so it cannot tell whether it changes the model's math");

  Keys k{f, P, pfx};
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
        P.push_back(pfx + "attention.head_count_kv = " + std::to_string(kv) + " does not divide " +
                    pfx + "attention.head_count = " + std::to_string(c.n_heads) +
                    " (grouped-query attention needs n_heads / n_kv_heads query heads per key/value head)");
    }
  }
  c.ffn_dim = k.integer("feed_forward_length", true, 0);
  c.max_seq = k.integer("context_length", false, 2048);
  c.rope_theta = static_cast<float>(k.number("rope.freq_base", false, 10000.0));  // llama.cpp's default too
  c.norm_eps = static_cast<float>(k.number("attention.layer_norm_rms_epsilon", true, 1e-5));
  // The head width: attention.key_length (= value_length) when given, else embedding_length / head_count.
  // Rotary embedding covers the whole head (rope.dimension_count, when given, must be that width).
  if (c.n_heads >= 1 && c.dim >= 1) {
    const size_t before = P.size();
    const bool has_k = k.find("attention.key_length") != nullptr, has_v = k.find("attention.value_length") != nullptr;
    const int64_t kl = has_k ? k.integer("attention.key_length", false, 0) : 0;
    const int64_t vl = has_v ? k.integer("attention.value_length", false, 0) : 0;
    int64_t hd = has_k ? kl : has_v ? vl : (c.dim % c.n_heads == 0 ? c.dim / c.n_heads : 0);
    if (P.size() != before) {
      hd = 0;
    } else if (has_k && has_v && kl != vl) {
      P.push_back(pfx + "attention.value_length = " + std::to_string(vl) + " differs from " + pfx + "attention.key_length = " +
                  std::to_string(kl) + " (edgetrain's value heads are as wide as its key heads)");
      hd = 0;
    } else if (!has_k && !has_v && hd == 0) {
      P.push_back(pfx + "embedding_length " + std::to_string(c.dim) + " is not a multiple of " + pfx + "attention.head_count " +
                  std::to_string(c.n_heads) + " and " + pfx + "attention.key_length is absent");
    } else if (hd < 2 || hd % 2 != 0) {
      P.push_back(pfx + "attention.key_length = " + std::to_string(hd) + ": a rotary head must be even and >= 2 wide");
      hd = 0;
    }
    if (hd > 0 && k.find("rope.dimension_count")) {
      const int64_t rd = k.integer("rope.dimension_count", false, hd);
      if (rd != hd)
        P.push_back(pfx + "rope.dimension_count = " + std::to_string(rd) + " differs from the head dim " +
                    std::to_string(hd) + " (partial rotary is not supported)");
    }
    if (hd > 0 && (c.dim % c.n_heads != 0 || hd != c.dim / c.n_heads)) c.head_size = hd;
  }
  check_rope_scaling(k);
  for (const char* key : {"expert_count", "expert_used_count"})
    if (k.find(key) && k.integer(key, false, 0) != 0)
      P.push_back(pfx + key + " = " + k.find(key)->describe() +
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
      P.push_back(pfx + "vocab_size = " + std::to_string(v) + " differs from token_embd.weight's " +
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

  // Llama 3.1/3.2 rope scaling: llama.cpp divides pair i's frequency by rope_freqs.weight[i] (one factor per
  // rotary pair, shared by every layer).
  const gguf::TensorInfo* rf = c.arch == "llama" ? f.tensor("rope_freqs.weight") : nullptr;  // llama's only
  if (rf) {
    const uint64_t pairs = static_cast<uint64_t>(c.head_dim() / 2);
    if (rf->ne != std::vector<uint64_t>{pairs}) {
      P.push_back("tensor 'rope_freqs.weight' (rope frequency factors) has ne " + dims_str(rf->ne) +
                  ", expected [" + std::to_string(pairs) + "]: one factor per rotary pair of a head");
    } else if (!gguf::can_decode(rf->type)) {
      P.push_back("tensor 'rope_freqs.weight' is " + gguf::type_name(rf->type) +
                  ", which edgetrain does not decode (it decodes " + gguf::decodable_types() + ")");
    } else {
      c.rope_factors = f.to_f32(*rf);
      for (float x : c.rope_factors)
        if (!(std::isfinite(x) && x > 0.0f)) {
          P.push_back("tensor 'rope_freqs.weight' holds " + std::to_string(x) +
                      ": rope frequency factors must be finite and > 0");
          break;
        }
    }
  }
  // A block count the file's tensors cannot hold (every block has at least 9) is a problem by itself: listing
  // the expected tensors of millions of claimed blocks would only exhaust memory (found by fuzz_gguf).
  const int64_t most_blocks = static_cast<int64_t>(f.tensors().size()) / 9;
  if (c.n_layers > most_blocks) {
    P.push_back("the block count " + std::to_string(c.n_layers) + " needs at least 9 tensors per block, but the file "
                "has " + std::to_string(f.tensors().size()) + " tensors");
    return out;
  }
  // The tensors: the model's, with their shapes and decodable types, and nothing else.
  std::set<std::string> expected;
  if (rf) expected.insert(rf->name);
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
