// The Llama tensor name table (see llama_names.h): one row per tensor, three names and a shape each.
#include "io/llama_names.h"

#include <algorithm>

#include "edgetrain/error.h"

namespace edgetrain::llama_names {
namespace {

// A dimension of a shape by what sets it: the model dim, the key/value rows, the MLP width, the vocabulary.
enum Dim : char { kNone = 0, kD, kQ, kKV, kF, kV, kHd };

// Which architectures have a row: every one, or only those with q/k/v biases (qwen2), or q/k norms (qwen3).
enum Only : char { kAll = 0, kBias, kQkNorm };

struct Row {
  const char* ours;
  const char* gguf;
  const char* hf;
  Dim rows, cols;  // cols kNone: a vector [rows]
  Only only = kAll;
};

constexpr Row kEmbedding = {"tok_embeddings.weight", "token_embd.weight", "model.embed_tokens.weight", kV, kD};
constexpr Row kNorm = {"norm.weight", "output_norm.weight", "model.norm.weight", kD, kNone};
constexpr Row kHead = {"output.weight", "output.weight", "lm_head.weight", kV, kD};
// One block's tensors in Model's order; names are after the "layers.<i>." / "blk.<i>." / "model.layers.<i>."
// prefix. Q projects to n_heads * head_dim rows, K and V to n_kv_heads * head_dim (grouped-query attention).
constexpr Row kBlock[] = {
    {"attention_norm.weight", "attn_norm.weight", "input_layernorm.weight", kD, kNone},
    {"attention.wq.weight", "attn_q.weight", "self_attn.q_proj.weight", kQ, kD},
    {"attention.wq.bias", "attn_q.bias", "self_attn.q_proj.bias", kQ, kNone, kBias},
    {"attention.wk.weight", "attn_k.weight", "self_attn.k_proj.weight", kKV, kD},
    {"attention.wk.bias", "attn_k.bias", "self_attn.k_proj.bias", kKV, kNone, kBias},
    {"attention.wv.weight", "attn_v.weight", "self_attn.v_proj.weight", kKV, kD},
    {"attention.wv.bias", "attn_v.bias", "self_attn.v_proj.bias", kKV, kNone, kBias},
    {"attention.wo.weight", "attn_output.weight", "self_attn.o_proj.weight", kD, kQ},
    {"attention.q_norm.weight", "attn_q_norm.weight", "self_attn.q_norm.weight", kHd, kNone, kQkNorm},
    {"attention.k_norm.weight", "attn_k_norm.weight", "self_attn.k_norm.weight", kHd, kNone, kQkNorm},
    {"ffn_norm.weight", "ffn_norm.weight", "post_attention_layernorm.weight", kD, kNone},
    {"feed_forward.w1.weight", "ffn_gate.weight", "mlp.gate_proj.weight", kF, kD},
    {"feed_forward.w3.weight", "ffn_up.weight", "mlp.up_proj.weight", kF, kD},
    {"feed_forward.w2.weight", "ffn_down.weight", "mlp.down_proj.weight", kD, kF},
};

int64_t size_of(Dim d, const ModelConfig& c) {
  switch (d) {
    case kD: return c.dim;
    case kQ: return c.q_dim();
    case kHd: return c.head_dim();
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
    for (const Row& r : kBlock)
      if (r.only == kAll || (r.only == kBias && cfg.qkv_bias()) || (r.only == kQkNorm && cfg.qk_norm()))
        out.push_back(tensor(r, std::to_string(i), cfg));
  out.push_back(tensor(kNorm, "", cfg));
  if (!cfg.tied_head) out.push_back(tensor(kHead, "", cfg));
  return out;
}

std::vector<int64_t> gguf_row_order(const ModelConfig& c, const std::string& ours) {
  return c.arch == "llama" ? std::vector<int64_t>() : neox_row_order(c, ours);
}

std::vector<int64_t> neox_row_order(const ModelConfig& c, const std::string& ours) {
  auto ends = [&](const char* s) {
    const std::string t = s;
    return ours.size() >= t.size() && ours.compare(ours.size() - t.size(), t.size(), t) == 0;
  };
  int64_t heads = 0;
  if (ends("attention.wq.weight") || ends("attention.wq.bias")) heads = c.n_heads;
  else if (ends("attention.wk.weight") || ends("attention.wk.bias")) heads = c.kv_heads();
  else if (ends("attention.q_norm.weight") || ends("attention.k_norm.weight")) heads = 1;
  else return {};
  const int64_t hd = c.head_dim();
  std::vector<int64_t> order(static_cast<size_t>(heads * hd));
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < hd / 2; ++i)
      for (int64_t e = 0; e < 2; ++e) order[static_cast<size_t>(h * hd + e * (hd / 2) + i)] = h * hd + 2 * i + e;
  return order;
}

std::vector<float> rows_from_file(const std::vector<int64_t>& order, const std::vector<float>& v) {
  if (order.empty()) return v;
  const size_t cols = v.size() / order.size();
  std::vector<float> out(v.size());
  for (size_t r = 0; r < order.size(); ++r)
    std::copy_n(&v[r * cols], cols, &out[static_cast<size_t>(order[r]) * cols]);
  return out;
}

std::vector<float> rows_to_file(const std::vector<int64_t>& order, const std::vector<float>& v) {
  if (order.empty()) return v;
  const size_t cols = v.size() / order.size();
  std::vector<float> out(v.size());
  for (size_t r = 0; r < order.size(); ++r)
    std::copy_n(&v[static_cast<size_t>(order[r]) * cols], cols, &out[r * cols]);
  return out;
}

std::string gguf_name(const std::string& ours) {
  if (ours.find(".lora_") != std::string::npos) return "";
  std::string layer;
  const Row* r = find(ours, layer);
  ET_CHECK(r, "gguf: no GGUF name for '", ours, "'");
  return layer.empty() ? r->gguf : "blk." + layer + "." + r->gguf;
}

std::string hf_name(const std::string& ours) {
  std::string layer;
  const Row* r = find(ours, layer);
  ET_CHECK(r, "hf: no Hugging Face name for '", ours, "'");
  return layer.empty() ? r->hf : "model.layers." + layer + "." + r->hf;
}

}  // namespace edgetrain::llama_names
