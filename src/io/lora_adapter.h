// The names a LoRA adapter's matrices go by, private to io: edgetrain's parameter ("<linear>.lora_a"),
// llama.cpp's adapter GGUF tensor ("<gguf linear>.lora_a") and PEFT's safetensors key
// ("base_model.model.<hf module>.lora_A.weight"), for the block linears edgetrain adapts. Shared by the
// reader (lora_adapter.cpp) and the writers (lora_export.cpp).
#pragma once

#include <string>
#include <vector>

#include "edgetrain/model.h"

namespace edgetrain::lora_names {

// One adaptable linear: its ModelConfig::lora_targets letter, our weight's name after "layers.<i>." and
// PEFT's target_modules entry.
struct Target {
  const char* target;  // "q"
  const char* ours;    // "attention.wq.weight"
  const char* module;  // "q_proj"
};
// In edgetrain's order: q, k, v, o, gate, up, down.
const std::vector<Target>& targets();
const Target* target_by_letter(const std::string& letter);

// The weight one of our adapter parameters belongs to ("layers.0.attention.wq.weight" for
// "layers.0.attention.wq.weight.lora_a"), and whether it is the A (else the B) matrix; false when `ours`
// is not an adapter parameter.
bool split(const std::string& ours, std::string& weight, bool& is_a);
// File names of the A (is_a) or B matrix of our weight `weight`.
std::string gguf_name(const std::string& weight, bool is_a);
std::string peft_name(const std::string& weight, bool is_a);

// The targets of a model config's lora_targets, in edgetrain's order ("v,q" -> {"q", "v"}).
std::vector<std::string> config_targets(const ModelConfig& c);

}  // namespace edgetrain::lora_names
