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

// Rotary pairs in a GGUF file: llama files keep a pair's two elements in adjacent rows (2i, 2i+1) of each
// q/k head, as edgetrain does; qwen2 and qwen3 files (llama.cpp's "neox" rope) half a head apart (i and
// i + head_dim/2), as Hugging Face does. For a tensor of ours whose rows a file holds in another order (the
// q and k weights, biases and per-head norms of a neox file), file row r holds our row order[r]; empty when
// the file's order is ours.
std::vector<int64_t> gguf_row_order(const ModelConfig& cfg, const std::string& ours);
// The same for a file in neox order whatever the architecture: a Hugging Face folder.
std::vector<int64_t> neox_row_order(const ModelConfig& cfg, const std::string& ours);
// v (rows of v.size() / order.size() values) from the file's row order to ours, and back.
std::vector<float> rows_from_file(const std::vector<int64_t>& order, const std::vector<float>& v);
std::vector<float> rows_to_file(const std::vector<int64_t>& order, const std::vector<float>& v);

// Our name -> GGUF's ("" for a LoRA adapter, which exports merge into its linear). Throws Error for a name
// that is not a Llama tensor.
std::string gguf_name(const std::string& ours);
// Our name -> Hugging Face's ("model.layers.0.self_attn.q_proj.weight"). Throws Error for a name that is not
// a Llama tensor (a LoRA adapter included: PEFT names those, io/lora_adapter.cpp).
std::string hf_name(const std::string& ours);

// The fp32 weights of a llama GGUF file under our names, each checked for presence and shape: the GGUF half
// of import_masters (defined in gguf_llama.cpp, beside the rest of the GGUF import). `cfg_out` receives
// the file's config (fp32 mode).
std::map<std::string, std::vector<float>> gguf_masters(const std::string& path, ModelConfig* cfg_out);

}  // namespace edgetrain::llama_names
