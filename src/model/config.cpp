// Model and optimizer configuration: presets, validation, JSON, and the learning-rate schedule.
#include <cmath>
#include <nlohmann/json.hpp>

#include "edgetrain/model.h"

namespace edgetrain {

const char* mode_name(TrainMode m) {
  switch (m) {
    case TrainMode::qat: return "qat";
    case TrainMode::qlora: return "qlora";
    case TrainMode::fp32: return "fp32";
  }
  return "?";
}

TrainMode mode_from_name(const std::string& s) {
  if (s == "qat") return TrainMode::qat;
  if (s == "qlora") return TrainMode::qlora;
  if (s == "fp32") return TrainMode::fp32;
  fail("unknown training mode '", s, "' (choose qat, qlora or fp32)");
}

int64_t ModelConfig::parameter_count() const {
  int64_t D = dim, F = ffn_dim, KV = kv_dim();
  int64_t per_layer = 2 * D * q_dim() + 2 * D * KV + 3 * D * F + 2 * D;  // q, o; k, v; gate, up, down; 2 norms
  if (qkv_bias()) per_layer += q_dim() + 2 * KV;
  if (qk_norm()) per_layer += 2 * head_dim();
  return vocab * D * (tied_head ? 1 : 2) + n_layers * per_layer + D;
}

std::vector<double> ModelConfig::rope_frequencies() const {
  const int64_t hd = head_dim();
  std::vector<double> f(static_cast<size_t>(hd / 2));
  for (int64_t i = 0; i < hd / 2; ++i) {
    f[static_cast<size_t>(i)] = std::pow(static_cast<double>(rope_theta), -2.0 * static_cast<double>(i) / static_cast<double>(hd));
    if (!rope_factors.empty()) f[static_cast<size_t>(i)] /= static_cast<double>(rope_factors[static_cast<size_t>(i)]);
  }
  return f;
}

void ModelConfig::validate() const {
  auto positive = [](const char* name, int64_t v) { ET_CHECK(v >= 1, "config: ", name, " must be >= 1, got ", v); };
  ET_CHECK(arch == "llama" || arch == "qwen2" || arch == "qwen3", "config: unknown arch '", arch,
           "' (choose llama, qwen2 or qwen3)");
  positive("vocab", vocab);
  positive("dim", dim);
  positive("n_layers", n_layers);
  positive("n_heads", n_heads);
  positive("ffn_dim", ffn_dim);
  positive("max_seq", max_seq);
  ET_CHECK(vocab <= (int64_t{1} << 24), "config: vocab ", vocab, " is too large (limit 16M)");
  ET_CHECK(head_size == -1 || head_size >= 2, "config: head_dim must be >= 2 (or absent), got ", head_size);
  ET_CHECK(head_size > 0 || dim % n_heads == 0, "config: dim (", dim, ") must be a multiple of n_heads (", n_heads,
           ") unless head_dim is given");
  ET_CHECK(n_kv_heads == -1 || n_kv_heads >= 1, "config: n_kv_heads must be >= 1, got ", n_kv_heads);
  ET_CHECK(n_heads % kv_heads() == 0, "config: n_kv_heads (", kv_heads(), ") must divide n_heads (", n_heads,
           "): each key/value head serves n_heads / n_kv_heads query heads");
  ET_CHECK(head_dim() % 2 == 0, "config: head dim ", head_dim(), " must be even for rotary embeddings");
  ET_CHECK(rope_theta > 1.0f && std::isfinite(rope_theta), "config: rope_theta must be > 1, got ", rope_theta);
  ET_CHECK(rope_factors.empty() || static_cast<int64_t>(rope_factors.size()) == head_dim() / 2,
           "config: rope_factors has ", rope_factors.size(), " values, the head has ", head_dim() / 2, " rotary pairs");
  ET_CHECK(rope_factors.empty() || arch == "llama", "config: rope_factors (Llama 3.1 rope scaling) are for arch llama, not ",
           arch);
  for (float f : rope_factors)
    ET_CHECK(std::isfinite(f) && f > 0.0f, "config: rope_factors must be finite and > 0, got ", f);
  ET_CHECK(norm_eps > 0.0f && norm_eps < 1.0f, "config: norm_eps must be in (0, 1), got ", norm_eps);
  ET_CHECK(group_size == 32 || group_size == 64 || group_size == 128, "config: group_size must be 32, 64 or 128, got ",
           group_size);
  if (mode == TrainMode::qlora) {
    positive("lora_rank", lora_rank);
    ET_CHECK(lora_alpha > 0.0f, "config: lora_alpha must be > 0, got ", lora_alpha);
    for (size_t b = 0, e; b <= lora_targets.size(); b = e + 1) {
      e = lora_targets.find(',', b);
      if (e == std::string::npos) e = lora_targets.size();
      std::string t = lora_targets.substr(b, e - b);
      ET_CHECK(t == "q" || t == "k" || t == "v" || t == "o" || t == "gate" || t == "up" || t == "down",
               "config: lora_targets has unknown target '", t, "' (use q,k,v,o,gate,up,down)");
    }
  }
}

std::string ModelConfig::to_json() const {
  nlohmann::json j = {{"vocab", vocab},           {"dim", dim},
                      {"n_layers", n_layers},     {"n_heads", n_heads},
                      {"n_kv_heads", kv_heads()},
                      {"ffn_dim", ffn_dim},       {"max_seq", max_seq},
                      {"rope_theta", rope_theta}, {"norm_eps", norm_eps},
                      {"tied_head", tied_head},   {"mode", mode_name(mode)},
                      {"group_size", group_size}, {"lora_rank", lora_rank},
                      {"lora_alpha", lora_alpha}, {"lora_targets", lora_targets}};
  if (!rope_factors.empty()) j["rope_factors"] = rope_factors;
  if (head_size > 0) j["head_dim"] = head_size;
  if (arch != "llama") j["arch"] = arch;
  return j.dump();
}

ModelConfig ModelConfig::from_json(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    fail("config: not valid JSON: ", e.what());
  }
  ET_CHECK(j.is_object(), "config: expected a JSON object");
  ModelConfig c;
  if (j.contains("preset")) {
    ET_CHECK(j["preset"].is_string(), "config: field 'preset' must be a string");
    c = preset(j["preset"].get<std::string>());
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const auto& v = it.value();
    auto integer = [&](int64_t& dst) {
      ET_CHECK(v.is_number_integer(), "config: field '", k, "' must be an integer, got ", v.dump());
      dst = v.get<int64_t>();
    };
    auto number = [&](float& dst) {
      ET_CHECK(v.is_number(), "config: field '", k, "' must be a number, got ", v.dump());
      dst = v.get<float>();
    };
    if (k == "preset") continue;
    else if (k == "vocab") integer(c.vocab);
    else if (k == "dim") integer(c.dim);
    else if (k == "n_layers") integer(c.n_layers);
    else if (k == "n_heads") integer(c.n_heads);
    else if (k == "n_kv_heads") {
      integer(c.n_kv_heads);
      ET_CHECK(c.n_kv_heads >= 1, "config: n_kv_heads must be >= 1, got ", c.n_kv_heads);
    }
    else if (k == "ffn_dim") integer(c.ffn_dim);
    else if (k == "head_dim") {
      integer(c.head_size);
      ET_CHECK(c.head_size >= 2, "config: head_dim must be >= 2, got ", c.head_size);
    }
    else if (k == "max_seq") integer(c.max_seq);
    else if (k == "group_size") integer(c.group_size);
    else if (k == "lora_rank") integer(c.lora_rank);
    else if (k == "rope_theta") number(c.rope_theta);
    else if (k == "norm_eps") number(c.norm_eps);
    else if (k == "rope_factors") {
      ET_CHECK(v.is_array(), "config: field 'rope_factors' must be an array of numbers");
      c.rope_factors.clear();
      for (const auto& x : v) {
        ET_CHECK(x.is_number(), "config: field 'rope_factors' must be an array of numbers, got ", x.dump());
        c.rope_factors.push_back(x.get<float>());
      }
    }
    else if (k == "lora_alpha") number(c.lora_alpha);
    else if (k == "tied_head") {
      ET_CHECK(v.is_boolean(), "config: field 'tied_head' must be true or false");
      c.tied_head = v.get<bool>();
    } else if (k == "mode") {
      ET_CHECK(v.is_string(), "config: field 'mode' must be a string");
      c.mode = mode_from_name(v.get<std::string>());
    } else if (k == "arch") {
      ET_CHECK(v.is_string(), "config: field 'arch' must be a string");
      c.arch = v.get<std::string>();
    } else if (k == "lora_targets") {
      ET_CHECK(v.is_string(), "config: field 'lora_targets' must be a string like \"q,k,v,o\"");
      c.lora_targets = v.get<std::string>();
    } else {
      fail("config: unknown field '", k, "'");
    }
  }
  c.validate();
  return c;
}

std::vector<std::string> ModelConfig::preset_names() { return {"tiny", "mini", "small", "base"}; }

ModelConfig ModelConfig::preset(const std::string& name) {
  ModelConfig c;
  // Parameter counts below are with the byte-level tokenizer (vocab 256); a BPE vocabulary adds
  // vocab*dim per embedding table.
  if (name == "tiny") {  // for tests: ~26K parameters
    c.dim = 32, c.n_layers = 2, c.n_heads = 2, c.ffn_dim = 64, c.max_seq = 32;
  } else if (name == "mini") {  // CPU demo: ~0.9M parameters
    c.dim = 128, c.n_layers = 4, c.n_heads = 4, c.ffn_dim = 384, c.max_seq = 128;
  } else if (name == "small") {  // ~14M parameters
    c.dim = 384, c.n_layers = 8, c.n_heads = 6, c.ffn_dim = 1024, c.max_seq = 256;
  } else if (name == "base") {  // GPUs: ~85M (byte vocab) to ~124M (GPT-2 BPE, tied head) parameters
    c.dim = 768, c.n_layers = 12, c.n_heads = 12, c.ffn_dim = 2048, c.max_seq = 512;
  } else {
    fail("unknown model preset '", name, "' (choose tiny, mini, small or base)");
  }
  return c;
}

double OptimConfig::decay_progress(int64_t step) const {
  const bool anchored = decay_from_step > warmup_steps;
  const int64_t from = anchored ? decay_from_step : warmup_steps;
  const double done = anchored ? decay_from_progress : 0.0;
  const int64_t decay_steps = std::max<int64_t>(1, total_steps - from);
  return std::min(1.0, done + (1.0 - done) * static_cast<double>(step - from) / static_cast<double>(decay_steps));
}

float OptimConfig::lr_at(int64_t step) const {
  if (warmup_steps > 0 && step <= warmup_steps) return lr * static_cast<float>(step) / static_cast<float>(warmup_steps);
  double progress = decay_progress(step);
  double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
  return static_cast<float>(lr * (min_lr_ratio + (1.0 - min_lr_ratio) * cosine));
}

}  // namespace edgetrain
