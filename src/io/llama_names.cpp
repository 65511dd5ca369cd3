// The Llama tensor name table (see llama_names.h): one row per tensor, three names and a shape each.
#include "io/llama_names.h"

#include "edgetrain/error.h"

namespace edgetrain::llama_names {
namespace {

// A dimension of a shape by what sets it: the model dim, the key/value rows, the MLP width, the vocabulary.
enum Dim : char { kNone = 0, kD, kQ, kKV, kF, kV };

struct Row {
  const char* ours;
  const char* gguf;
  const char* hf;
  Dim rows, cols;  // cols kNone: a vector [rows]
};

constexpr Row kEmbedding = {"tok_embeddings.weight", "token_embd.weight", "model.embed_tokens.weight", kV, kD};
constexpr Row kNorm = {"norm.weight", "output_norm.weight", "model.norm.weight", kD, kNone};
constexpr Row kHead = {"output.weight", "output.weight", "lm_head.weight", kV, kD};
// One block's tensors in Model's order; names are after the "layers.<i>." / "blk.<i>." / "model.layers.<i>."
// prefix. Q projects to n_heads * head_dim rows, K and V to n_kv_heads * head_dim (grouped-query attention).
constexpr Row kBlock[] = {
    {"attention_norm.weight", "attn_norm.weight", "input_layernorm.weight", kD, kNone},
    {"attention.wq.weight", "attn_q.weight", "self_attn.q_proj.weight", kQ, kD},
    {"attention.wk.weight", "attn_k.weight", "self_attn.k_proj.weight", kKV, kD},
    {"attention.wv.weight", "attn_v.weight", "self_attn.v_proj.weight", kKV, kD},
    {"attention.wo.weight", "attn_output.weight", "self_attn.o_proj.weight", kD, kQ},
    {"ffn_norm.weight", "ffn_norm.weight", "post_attention_layernorm.weight", kD, kNone},
    {"feed_forward.w1.weight", "ffn_gate.weight", "mlp.gate_proj.weight", kF, kD},
    {"feed_forward.w3.weight", "ffn_up.weight", "mlp.up_proj.weight", kF, kD},
    {"feed_forward.w2.weight", "ffn_down.weight", "mlp.down_proj.weight", kD, kF},
};

int64_t size_of(Dim d, const ModelConfig& c) {
  switch (d) {
    case kD: return c.dim;
    case kQ: return c.q_dim();
    case kKV: return c.kv_dim();
    case kF: return c.ffn_dim;
    case kV: return c.vocab;
    case kNone: break;
  }
  return 0;
}

BaseTensor tensor(const Row& r, const std::string& layer, const ModelConfig& c) {
  const bool block = !layer.empty();
  BaseTensor t;
  t.name = block ? "layers." + layer + "." + r.ours : r.ours;
  t.gguf = block ? "blk." + layer + "." + r.gguf : r.gguf;
  t.hf = block ? "model.layers." + layer + "." + r.hf : r.hf;
  t.shape = r.cols == kNone ? Shape{size_of(r.rows, c)} : Shape{size_of(r.rows, c), size_of(r.cols, c)};
  return t;
}

// The row of one of our names and, for a block tensor, its layer index as text; null when there is none.
const Row* find(const std::string& ours, std::string& layer) {
  layer.clear();
  for (const Row* r : {&kEmbedding, &kNorm, &kHead})
    if (ours == r->ours) return r;
  const size_t dot = ours.find('.', 7);  // "layers.<i>.<rest>"
  if (ours.rfind("layers.", 0) != 0 || dot == std::string::npos) return nullptr;
  const std::string rest = ours.substr(dot + 1);
  for (const Row& r : kBlock)
    if (rest == r.ours) {
      layer = ours.substr(7, dot - 7);
      return &r;
    }
  return nullptr;
}

}  // namespace

std::vector<BaseTensor> base_tensors(const ModelConfig& cfg) {
  std::vector<BaseTensor> out;
  out.push_back(tensor(kEmbedding, "", cfg));
  for (int64_t i = 0; i < cfg.n_layers; ++i)
    for (const Row& r : kBlock) out.push_back(tensor(r, std::to_string(i), cfg));
  out.push_back(tensor(kNorm, "", cfg));
  if (!cfg.tied_head) out.push_back(tensor(kHead, "", cfg));
  return out;
}

std::string gguf_name(const std::string& ours) {
  if (ours.find(".lora_") != std::string::npos) return "";
  std::string layer;
  const Row* r = find(ours, layer);
  ET_CHECK(r, "gguf: no GGUF name for '", ours, "'");
  return layer.empty() ? r->gguf : "blk." + layer + "." + r->gguf;
}

}  // namespace edgetrain::llama_names
