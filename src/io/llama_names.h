// Llama's tensors under the three names they go by — edgetrain's (Model::params, checkpoints), GGUF's
// (llama.cpp) and Hugging Face's — with the shape each has for a config: the mapping the GGUF and Hugging
// Face importers and exporters share, usable without a backend or a Model.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "edgetrain/model.h"

namespace edgetrain::llama_names {

struct BaseTensor {
  std::string name;  // ours, e.g. "layers.0.attention.wq.weight"
  std::string gguf;  // "blk.0.attn_q.weight"
  std::string hf;    // "model.layers.0.self_attn.q_proj.weight"
  Shape shape;       // [N, K] for a linear (out, in), [dim] for a norm
};

// The tensors of Model(cfg).params() that files hold (every one but LoRA adapters), in the same order;
// output.weight only when the head is not tied. A test checks this against Model.
std::vector<BaseTensor> base_tensors(const ModelConfig& cfg);

// Our name -> GGUF's ("" for a LoRA adapter, which exports merge into its linear). Throws Error for a name
// that is not a Llama tensor.
std::string gguf_name(const std::string& ours);

// The fp32 weights of a llama GGUF file under our names, each checked for presence and shape: the GGUF half
// of import_masters (defined in gguf_llama.cpp, beside the rest of the GGUF import). `cfg_out` receives
// the file's config (fp32 mode).
std::map<std::string, std::vector<float>> gguf_masters(const std::string& path, ModelConfig* cfg_out);

}  // namespace edgetrain::llama_names
