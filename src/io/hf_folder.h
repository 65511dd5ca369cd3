// A Hugging Face Llama folder, private to io (hf_folder.cpp): its safetensors files, and what its
// config.json and tensors are to edgetrain — the config and every reason edgetrain cannot train it. The
// import (hf_import.cpp) and `edgetrain info` share the check, so `info` says exactly what an import refuses.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "edgetrain/model.h"
#include "edgetrain/safetensors.h"

namespace edgetrain::hf_folder {

// Every safetensors file of the folder (model.safetensors, or the shards model.safetensors.index.json
// names) and which one holds each tensor. Throws Error naming the file that cannot be read.
struct Shards {
  std::vector<safetensors::Reader> readers;
  std::map<std::string, size_t> where;
  const safetensors::Reader* find(const std::string& name) const {
    auto it = where.find(name);
    return it == where.end() ? nullptr : &readers[it->second];
  }
};
Shards open_shards(const std::string& dir);

struct Check {
  ModelConfig config;                 // usable when problems is empty
  std::vector<std::string> problems;  // each names the config.json field or the tensor
};
// Reads config.json as transformers 4 and 5 write it (rope_theta/rope_scaling at the top, or
// rope_parameters {rope_theta, rope_type}). Every LlamaConfig field that changes the math must be absent or
// in a form edgetrain implements (rope_type "default", hidden_act "silu", no biases, head_dim =
// hidden_size / num_attention_heads, no quantization_config); anything else is a problem naming the field.
// Fields LlamaConfig does not read do not change a Llama's math and are ignored, as transformers does.
// The tensors: each the model needs present, of its shape and of F32/F16/BF16; none the model would lack.
// Throws Error only for a config.json that cannot be read or is not JSON.
Check check(const std::string& dir, const Shards& shards, TrainMode mode, int64_t group_size);
// check()'s config; throws Error naming the folder and its first problem (and how many more there are).
ModelConfig config_of(const std::string& dir, const Shards& shards, TrainMode mode, int64_t group_size);

}  // namespace edgetrain::hf_folder
