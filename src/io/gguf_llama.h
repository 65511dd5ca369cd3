// What a GGUF file is to edgetrain as a Llama model, private to io: its config and every reason edgetrain
// cannot train it (gguf_llama_check.cpp). The import (load_gguf_model, gguf_masters) and `edgetrain info`
// share it, so `info` says exactly what an import would refuse.
#pragma once

#include <string>
#include <vector>

#include "edgetrain/model.h"
#include "io/gguf.h"

namespace edgetrain::gguf_llama {

struct Check {
  ModelConfig config;                 // usable when problems is empty
  std::vector<std::string> problems;  // each names the key or tensor and what is wrong with it
};

// Reads the llama.* keys (every one: a key that could change the math but is unknown, or known with a value
// edgetrain does not implement, is a problem, never a silent default), checks general.architecture,
// general.quantization_version and split.count, and checks the tensors: every tensor the model needs
// present with its shape and a decodable type, no tensor the model would ignore.
Check check(const gguf::File& f, TrainMode mode, int64_t group_size);

// check()'s config; throws Error naming the file and its first problem (and how many more there are).
ModelConfig config_of(const gguf::File& f, TrainMode mode, int64_t group_size);

}  // namespace edgetrain::gguf_llama
