// Private state of Model: the parameters by role, and the recorded programs.
#pragma once

#include <memory>
#include <vector>

#include "edgetrain/graph.h"
#include "edgetrain/model.h"

namespace edgetrain {

struct Model::Impl {
  // A block linear: its weight, optional LoRA adapters, and shape [N, K].
  struct Lin {
    Param* w = nullptr;
    Param* a = nullptr;  // lora_a [r, K]
    Param* b = nullptr;  // lora_b [N, r]
    Param* bias = nullptr;  // [N], qwen2's q, k, v
    int64_t N = 0, K = 0;
  };
  struct Layer {
    Param *attn_norm = nullptr, *ffn_norm = nullptr;
    Param *q_norm = nullptr, *k_norm = nullptr;  // qwen3: [head_dim] each
    Lin q, k, v, o, gate, up, down;
  };
  Param* emb = nullptr;
  Param* norm = nullptr;
  Param* head = nullptr;  // == emb when tied
  std::vector<Layer> layers;
  // rope's freqs [head_dim/2] when the config scales rope (ModelConfig::rope_factors); undefined otherwise.
  Tensor rope_freqs;

  // Forward + backward of one micro-batch (train) or forward only (eval), for a fixed batch x seq, plain or
  // packed (recorded with rope's and attention's pos input, the tensor `pos`). Two variants rather than
  // always binding pos: the plain step then runs the plain causal kernels, with no per-element window test.
  struct StepProgram {
    std::unique_ptr<Program> program;
    Tensor tokens, labels, pos, loss;  // pos [batch, seq] i32 when packed, else undefined
    Scalar n_valid;
    int64_t batch = 0, seq = 0;
    bool packed = false;
  };
  StepProgram train, eval;
  // The buffers of the planned tensors of every program above and below: they run one at a time, so a
  // model needs the largest plan (the training step's, usually), not the sum of them.
  std::shared_ptr<ProgramMemory> memory = std::make_shared<ProgramMemory>();
  // Optimizer: norm (read back and checked before anything is written), apply (clip, AdamW, requant,
  // zero grads), zero (drop a bad step's gradients).
  std::unique_ptr<Program> norm_prog, apply_prog, zero_prog;
  Tensor grad_norm;
  Scalar lr, beta1, beta2, eps, weight_decay, bc1, bc2, max_norm;
  Scalar inv_scale;  // fp16: 1 / loss scale, folded into the clipping (recorded only then)

  // Generation: per-layer KV caches [max_seq, n_kv_heads * head_dim] (rows = positions, rope already applied).
  std::vector<Tensor> k_cache, v_cache;
  int64_t cache_len = 0;
};

// The vocabulary's tensors — the embedding table and head [V, D], the logits [R, V] — taken a part of the
// vocabulary at a time where they exceed one kernel binding (vocab.cpp). With one part (every device whose
// bindings hold them) these are the plain embedding / linear / fused_ce calls.
Tensor embed(Graph& g, const Tensor& table, const Tensor& tokens);
// grad (+)= the scatter-add of dx at tokens (accumulate: add to what grad holds).
void embed_backward(Graph& g, const Tensor& dx, const Tensor& tokens, const Tensor& grad, bool accumulate);
struct HeadLoss {
  Tensor loss;  // [] the mean cross-entropy over n_valid labels
  Tensor dh;    // [R, D] its gradient at the head's input (train only)
};
// The head h [R, D] -> logits -> cross-entropy against labels; train: the head's weight gradient into
// head.grad (when trainable) and dh.
HeadLoss head_loss(Graph& g, const Param& head, const Tensor& h, const Tensor& labels, Scalar n_valid, bool train);
// How many parts a step of R rows takes the vocabulary in on this backend (1: the plain ops).
int64_t vocab_parts(const Backend& b, int64_t V, int64_t D, int64_t R);
// The logits of h [R, D] as parts [R, rows] of the vocabulary, in order.
std::vector<Tensor> head_logits(Graph& g, const Tensor& head, const Tensor& h);

}  // namespace edgetrain
