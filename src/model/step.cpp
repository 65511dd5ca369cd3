// The training step as recorded programs: forward through q4 (or fp32) linears, fused cross-entropy,
// the hand-written backward of every block, then (separately) gradient norm, clipping, AdamW and
// re-quantization. Precision::fp16 records the same ops with fp16 GEMM operands and scales the loss
// (LossScaler: the scale enters through fused_ce's n_valid and leaves through the clipping coefficient);
// the fused attention op keeps fp32 in both precisions.
// Shapes: B sequences of T tokens, R = B*T rows, D = dim, H heads of hd (D/H unless head_dim says), F = ffn.
// Attention is the fused causal attention op on the projections' own layouts: the rows of Q are
// [B, T, H, hd] and those of K and V [B, T, KV, hd], so nothing is permuted or copied around it, and its
// output rows [B, T, H, hd] are the o projection's input [R, D]. Grouped-query attention: KV = n_kv_heads
// key/value heads, each shared by G = H/KV consecutive query heads (query head h reads kv head h / G);
// the op's backward sums dk and dv over each group. The forward keeps only the output and the per-row
// log-sum-exp; the backward recomputes the probabilities from them.
// Activation checkpointing (Model::set_activation_checkpointing): the forward keeps each block's input
// only, and the backward records the block's forward again (its saved activations) right before the
// block's backward; the memory plan then gives every block's recomputed activations the same buffers.
// The recomputation stops short of the block's last GEMM (down), whose output the backward never reads.
// Sample packing: a packed step passes pos [B, T] (each token's position within its sample) to rope
// (forward and backward) and to attention (forward and backward), which then restarts positions and the
// causal window at every sample's first token; every other op is per row already.
#include <cmath>

#include "model/model_impl.h"

namespace edgetrain {
namespace {

// Activations a block keeps for its backward.
struct LinSaved {
  Tensor x;  // the input [R, K]
  Tensor t;  // LoRA: (alpha/r) x A^T [R, r]
};
struct BlockSaved {
  Tensor x, h, rstd1, qr, kr, vr, attn, lse, x2, h2, rstd2, g, u, m;  // qr, attn [B,T,H,hd]; kr, vr [B,T,KV,hd]
  Tensor qh, kh, rstd_q, rstd_k;  // qwen3: the heads before their RMSNorm, and its rstd
  LinSaved q, k, v, o, gate, up, down;
};

class Recorder {
 public:
  // pos: [B, T] i32 positions within packed samples, or undefined (plain sequences).
  Recorder(Graph& g, const ModelConfig& cfg, Model::Impl& m, Tensor pos, bool checkpoint)
      : g_(g), cfg_(cfg), m_(m), pos_(pos), checkpoint_(checkpoint) {}

  // y = x W^T (4-bit or fp32) + bias + t B^T with t = (alpha/r) x A^T. The scale goes onto t, so that the
  // update t B^T (and dB = dy^T t) is a plain product; t comes first and the update right after the base
  // product, in place (no [R, N] temporary): the Vulkan program folds such an update into the 4-bit
  // product's tensor-core GEMM as a few more steps of its contraction (fuse_low_rank_update, ops_gemm.h).
  Tensor lin(const Tensor& x, const Model::Impl::Lin& L, LinSaved& s) {
    s.x = x;
    if (L.a) s.t = g_.mm(x, L.a->value, false, true, lora_scale());
    const Tensor bias = L.bias ? L.bias->value : Tensor();
    Tensor y = L.w->quantized() ? g_.linear_q4gsw(x, L.w->codes, L.w->scales, cfg_.group_size, bias)
                                : g_.linear(x, L.w->value, bias);
    if (L.a) g_.mm_into(s.t, L.b->value, y, false, true, 1.0f, true);
    return y;
  }

  // What lin saves for its backward, without the product itself (a recomputation's down projection).
  void lin_saved_only(const Tensor& x, const Model::Impl::Lin& L, LinSaved& s) {
    s.x = x;
    if (L.a) s.t = g_.mm(x, L.a->value, false, true, lora_scale());
  }

  // Gradients of lin: accumulates dW (trainable base) and LoRA grads; returns dx.
  Tensor lin_backward(const Tensor& dy, const Model::Impl::Lin& L, const LinSaved& s) {
    lin_weight_grads(dy, L, s);
    return lin_input_grad(dy, L, s);
  }

  // The base weight's (and bias's) gradients of lin. Projections of one input record theirs one after
  // another: the tensor-core GEMMs then stage that input once for all of them (vulkan/program.cpp).
  void lin_weight_grads(const Tensor& dy, const Model::Impl::Lin& L, const LinSaved& s) {
    if (L.w->trainable) g_.linear_dW_into(dy, s.x, L.w->grad, true);
    if (L.bias && L.bias->trainable) add_into(L.bias->grad, g_.sum(dy, {0}));  // d bias[n] = sum_m dy[m, n]
  }

  // dx of lin, accumulating the LoRA grads on the way: dt = s dy B, dB += dy^T t (t holds s), dA += dt^T x,
  // then dx = the base product's input gradient + dt A, the update right after the base product (as in lin).
  // The adapters' products read dy as the 4-bit product does (a tensor-core path stages it once).
  Tensor lin_input_grad(const Tensor& dy, const Model::Impl::Lin& L, const LinSaved& s) {
    const Tensor dt = lin_lora_grads(dy, L, s);
    Tensor dx = L.w->quantized() ? g_.linear_q4gsw_backward(dy, L.w->codes, L.w->scales, cfg_.group_size, L.K)
                                 : g_.mm(dy, L.w->value);
    if (L.a) g_.mm_into(dt, L.a->value, dx, false, false, 1.0f, true);  // dx += dt A
    return dx;
  }

  // The LoRA grads of lin (dB += dy^T t, dA += dt^T x); returns dt = s dy B (undefined without an adapter).
  Tensor lin_lora_grads(const Tensor& dy, const Model::Impl::Lin& L, const LinSaved& s) {
    if (!L.a) return Tensor();
    Tensor dt = g_.mm(dy, L.b->value, false, false, lora_scale());  // [R, r]
    g_.mm_into(dy, s.t, L.b->grad, true, false, 1.0f, true);
    g_.linear_dW_into(dt, s.x, L.a->grad, true);
    return dt;
  }

  void add_into(const Tensor& acc, const Tensor& x) { g_.call(Op::add, {acc, x}, {acc}, {}, {1.0f}); }

  Tensor rms_norm_backward(const Tensor& dy, const Tensor& x, Param* w, const Tensor& rstd) {
    // dx is written whole: a planned tensor, sharing the program's buffers (a buffer of its own per call took
    // 1 GiB of the 1B qlora step: 33 calls of [4096, 2048]). A trainable w accumulates into its gradient; a
    // frozen one (qlora) gets no dw at all (dw = 0: the op leaves that [D] buffer alone), only dx.
    Tensor dx = g_.alloc(x.shape(), DType::f32);
    Tensor dw = w->trainable ? w->grad : g_.backend().zeros(w->value.shape(), DType::f32);
    const int64_t trainable = w->trainable ? 1 : 0;
    g_.call(Op::rms_norm_backward, {dy, x, w->value, rstd}, {dx, dw}, {trainable, trainable});
    return dx;
  }

  // Returns the block's output; a recomputation (`recompute`) only fills `s` and returns nothing.
  Tensor block_forward(const Tensor& x, const Model::Impl::Layer& L, int64_t B, int64_t T, BlockSaved& s,
                       bool recompute = false) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(cfg_.head_dim()));
    const int64_t H = cfg_.n_heads, KV = cfg_.kv_heads(), hd = cfg_.head_dim();
    s.x = x;
    std::tie(s.h, s.rstd1) = g_.rms_norm(x, L.attn_norm->value, cfg_.norm_eps);
    Tensor q = lin(s.h, L.q, s.q), k = lin(s.h, L.k, s.k), v = lin(s.h, L.v, s.v);
    q = q.reshape(Shape{B, T, H, hd});
    k = k.reshape(Shape{B, T, KV, hd});
    if (L.q_norm) {  // qwen3: RMSNorm over each head, before rope
      s.qh = q, s.kh = k;
      std::tie(q, s.rstd_q) = g_.rms_norm(q, L.q_norm->value, cfg_.norm_eps);
      std::tie(k, s.rstd_k) = g_.rms_norm(k, L.k_norm->value, cfg_.norm_eps);
    }
    s.qr = g_.rope(q, cfg_.rope_theta, 0.0f, m_.rope_freqs, pos_);
    s.kr = g_.rope(k, cfg_.rope_theta, 0.0f, m_.rope_freqs, pos_);
    s.vr = v.reshape(Shape{B, T, KV, hd});
    std::tie(s.attn, s.lse) = g_.attention(s.qr, s.kr, s.vr, scale, pos_);
    s.x2 = g_.add(x, lin(s.attn.reshape(Shape{B * T, cfg_.q_dim()}), L.o, s.o));
    std::tie(s.h2, s.rstd2) = g_.rms_norm(s.x2, L.ffn_norm->value, cfg_.norm_eps);
    s.g = lin(s.h2, L.gate, s.gate);
    s.u = lin(s.h2, L.up, s.up);
    s.m = g_.silu_mul(s.g, s.u);
    if (recompute) {
      lin_saved_only(s.m, L.down, s.down);
      return Tensor();
    }
    return g_.add(s.x2, lin(s.m, L.down, s.down));
  }

  // Returns the gradient of the block's input, or nothing where `need_dx` is false and the attention norm is
  // frozen: then nothing below the q, k and v projections wants a gradient (the first block under a frozen
  // embedding, as in qlora), and their input gradients, the norm's backward and the residual add are skipped.
  Tensor block_backward(const Tensor& dx3, const Model::Impl::Layer& L, int64_t B, int64_t T, const BlockSaved& s,
                        bool need_dx) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(cfg_.head_dim()));
    const Shape rd{B * T, cfg_.q_dim()}, rkv{B * T, cfg_.kv_dim()};
    // MLP: x3 = x2 + down(silu(gate(h2)) * up(h2)), h2 = rms_norm(x2).
    Tensor dm = lin_backward(dx3, L.down, s.down);
    auto [dg, du] = g_.silu_mul_backward(dm, s.g, s.u);
    lin_weight_grads(dg, L.gate, s.gate);
    lin_weight_grads(du, L.up, s.up);
    Tensor dh2 = lin_input_grad(dg, L.gate, s.gate);
    add_into(dh2, lin_input_grad(du, L.up, s.up));
    Tensor dx2 = rms_norm_backward(dh2, s.x2, L.ffn_norm, s.rstd2);
    add_into(dx2, dx3);
    // Attention: x2 = x + o(attn(rope(q(h)), rope(k(h)), v(h))), h = rms_norm(x).
    Tensor dattn = lin_backward(dx2, L.o, s.o).reshape(s.attn.shape());
    auto [dqr, dkr, dvr] = g_.attention_backward(dattn, s.qr, s.kr, s.vr, s.attn, s.lse, scale, pos_);
    Tensor dq = g_.rope_backward(dqr, cfg_.rope_theta, 0.0f, m_.rope_freqs, pos_);
    Tensor dk = g_.rope_backward(dkr, cfg_.rope_theta, 0.0f, m_.rope_freqs, pos_);
    if (L.q_norm) {
      dq = rms_norm_backward(dq, s.qh, L.q_norm, s.rstd_q);
      dk = rms_norm_backward(dk, s.kh, L.k_norm, s.rstd_k);
    }
    dq = dq.reshape(rd);
    dk = dk.reshape(rkv);
    const Tensor dv = dvr.reshape(rkv);
    lin_weight_grads(dq, L.q, s.q);
    lin_weight_grads(dk, L.k, s.k);
    lin_weight_grads(dv, L.v, s.v);
    if (!need_dx && !L.attn_norm->trainable) {
      lin_lora_grads(dq, L.q, s.q);
      lin_lora_grads(dk, L.k, s.k);
      lin_lora_grads(dv, L.v, s.v);
      return Tensor();
    }
    Tensor dh = lin_input_grad(dq, L.q, s.q);
    add_into(dh, lin_input_grad(dk, L.k, s.k));
    add_into(dh, lin_input_grad(dv, L.v, s.v));
    Tensor dx = rms_norm_backward(dh, s.x, L.attn_norm, s.rstd1);
    add_into(dx, dx2);
    return dx;
  }

  // Records forward (and backward when train) for one micro-batch; returns the loss tensor.
  Tensor step(const Tensor& tokens, const Tensor& labels, Scalar n_valid, int64_t B, int64_t T, bool train) {
    Tensor x = embed(g_, m_.emb->value, tokens);  // [B*T, D]
    const bool checkpoint = train && checkpoint_;
    std::vector<BlockSaved> saved(m_.layers.size());
    std::vector<Tensor> inputs(m_.layers.size());  // checkpointing: each block's input
    for (size_t i = 0; i < m_.layers.size(); ++i) {
      inputs[i] = x;
      BlockSaved dropped;  // checkpointing: its tensors die inside the forward, their memory is reused
      x = block_forward(x, m_.layers[i], B, T, checkpoint ? dropped : saved[i]);
    }
    auto [hf, rstdf] = g_.rms_norm(x, m_.norm->value, cfg_.norm_eps);
    HeadLoss head = head_loss(g_, *m_.head, hf, labels, n_valid, train);
    if (!train) return head.loss;
    Tensor dx = rms_norm_backward(head.dh, x, m_.norm, rstdf);
    for (size_t i = m_.layers.size(); i-- > 0;) {
      if (checkpoint) block_forward(inputs[i], m_.layers[i], B, T, saved[i], /*recompute=*/true);
      dx = block_backward(dx, m_.layers[i], B, T, saved[i], /*need_dx=*/i > 0 || m_.emb->trainable);
    }
    if (m_.emb->trainable) embed_backward(g_, dx, tokens, m_.emb->grad, /*accumulate=*/true);
    return head.loss;
  }

 private:
  Scalar lora_scale() const { return cfg_.lora_alpha / static_cast<float>(cfg_.lora_rank); }
  Graph& g_;
  const ModelConfig& cfg_;
  Model::Impl& m_;
  Tensor pos_;
  bool checkpoint_;
};

void check_batch(const ModelConfig& cfg, const std::vector<int32_t>& tokens, const std::vector<int32_t>& labels,
                 int64_t batch, int64_t seq) {
  ET_CHECK(batch >= 1 && seq >= 1, "model: batch and seq must be >= 1, got ", batch, " x ", seq);
  ET_CHECK(seq <= cfg.max_seq, "model: sequence length ", seq, " exceeds max_seq ", cfg.max_seq);
  ET_CHECK(static_cast<int64_t>(tokens.size()) == batch * seq && tokens.size() == labels.size(),
           "model: expected ", batch * seq, " tokens and labels, got ", tokens.size(), " and ", labels.size());
  for (int32_t t : tokens) ET_CHECK(t >= 0 && t < cfg.vocab, "model: token id ", t, " outside the vocabulary [0, ", cfg.vocab, ")");
  for (int32_t t : labels) ET_CHECK(t < cfg.vocab, "model: label ", t, " outside the vocabulary [0, ", cfg.vocab, ")");
}

// Packed positions (empty: none): [batch*seq], each row a run of samples numbered 0, 1, 2, ... from their
// first token, so every row starts with 0 and a position is 0 (a new sample) or the previous one plus 1.
void check_positions(const std::vector<int32_t>& positions, int64_t batch, int64_t seq) {
  if (positions.empty()) return;
  ET_CHECK(static_cast<int64_t>(positions.size()) == batch * seq, "model: expected ", batch * seq,
           " positions (batch x seq) for packed samples, got ", positions.size());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < seq; ++t) {
      const int32_t p = positions[static_cast<size_t>(b * seq + t)];
      const int32_t prev = t == 0 ? -1 : positions[static_cast<size_t>(b * seq + t - 1)];
      ET_CHECK(p == 0 || p == prev + 1, "model: packed position ", p, " at row ", b, ", token ", t,
               " must be 0 (a sample's first token) or ", prev + 1, " (the previous position + 1)",
               t == 0 ? "; every row starts a sample" : "");
    }
}

}  // namespace

// The factor the loss and the gradients carry: the loss scale under fp16, else 1.
static double loss_scale_now(const Model& model) {
  return model.precision() == Precision::fp16 ? static_cast<double>(model.scaler.scale) : 1.0;
}

static Model::Impl::StepProgram& step_program(Model& model, Model::Impl& m, Model::Impl::StepProgram& sp, int64_t B,
                                              int64_t T, bool train, bool packed) {
  if (sp.program && sp.batch == B && sp.seq == T && sp.packed == packed) return sp;
  Backend& b = model.backend();
  sp = Model::Impl::StepProgram{};
  sp.program = b.new_program();
  sp.program->share_memory(m.memory);
  sp.batch = B;
  sp.seq = T;
  sp.packed = packed;
  sp.tokens = b.zeros(Shape{B * T}, DType::i32);
  sp.labels = b.zeros(Shape{B * T}, DType::i32);
  if (packed) sp.pos = b.zeros(Shape{B, T}, DType::i32);
  sp.n_valid = sp.program->slot("n_valid", 1.0f);
  Graph g(b, *sp.program);
  g.set_precision(model.precision());  // fp16: every GEMM of the step takes fp16 operands
  Recorder rec(g, model.config(), m, sp.pos, model.activation_checkpointing());
  sp.loss = rec.step(sp.tokens, sp.labels, sp.n_valid, B, T, train);
  sp.program->finalize();
  return sp;
}

// Uploads one micro-batch into its program's inputs.
static void upload_batch(Backend& be, Model::Impl::StepProgram& sp, const std::vector<int32_t>& tokens,
                         const std::vector<int32_t>& labels, const std::vector<int32_t>& positions) {
  be.upload(sp.tokens, tokens.data(), tokens.size() * sizeof(int32_t));
  be.upload(sp.labels, labels.data(), labels.size() * sizeof(int32_t));
  if (sp.packed) be.upload(sp.pos, positions.data(), positions.size() * sizeof(int32_t));
}

float Model::accumulate(const std::vector<int32_t>& tokens, const std::vector<int32_t>& labels, int64_t batch,
                        int64_t seq, int64_t n_valid_total, const std::vector<int32_t>& positions) {
  check_batch(cfg_, tokens, labels, batch, seq);
  check_positions(positions, batch, seq);
  ET_CHECK(n_valid_total >= 1, "model: a step needs at least one valid label");
  auto& sp = step_program(*this, *impl_, impl_->train, batch, seq, true, !positions.empty());
  upload_batch(backend_, sp, tokens, labels, positions);
  // fp16 scales the loss by dividing the mean's denominator: fused_ce's dlogits, and so every gradient,
  // come out multiplied by the scale (exactly, for a power of two) at no extra pass; the loss read back is
  // divided again.
  const double loss_scale = loss_scale_now(*this);
  sp.program->set(sp.n_valid, static_cast<float>(static_cast<double>(n_valid_total) / loss_scale));
  sp.program->replay();
  float loss = 0;
  backend_.download(sp.loss, &loss, sizeof(float));
  return static_cast<float>(loss / loss_scale);  // this micro-batch's share of the step's mean loss
}

float Model::evaluate(const std::vector<int32_t>& tokens, const std::vector<int32_t>& labels, int64_t batch,
                      int64_t seq, const std::vector<int32_t>& positions) {
  check_batch(cfg_, tokens, labels, batch, seq);
  check_positions(positions, batch, seq);
  int64_t valid = 0;
  for (int32_t l : labels) valid += l >= 0;
  ET_CHECK(valid >= 1, "model: evaluation batch has no valid labels");
  auto& sp = step_program(*this, *impl_, impl_->eval, batch, seq, false, !positions.empty());
  upload_batch(backend_, sp, tokens, labels, positions);
  sp.program->set(sp.n_valid, static_cast<float>(valid));
  sp.program->replay();
  float loss = 0;
  backend_.download(sp.loss, &loss, sizeof(float));
  return loss;
}

// A parameter larger than one binding (a 128K-token embedding on a 128 MiB device) is updated a part of its
// rows at a time: its gradient's parts are normed, clipped and zeroed like separate tensors.
static void record_optimizer(Model& model, Model::Impl& m) {
  Backend& b = model.backend();
  std::vector<Tensor> grads;
  for (Param& p : model.params())
    if (p.trainable)
      for (const Tensor& part : binding_parts(b, p.grad)) grads.push_back(part);
  ET_CHECK(!grads.empty(), "model: nothing to train (every parameter is frozen)");

  m.norm_prog = b.new_program();
  m.norm_prog->share_memory(m.memory);
  {
    Graph g(b, *m.norm_prog);
    m.grad_norm = g.grad_norm(grads);
    m.norm_prog->finalize();
  }
  m.apply_prog = b.new_program();
  m.apply_prog->share_memory(m.memory);
  Program& p = *m.apply_prog;
  m.lr = p.slot("lr");
  m.beta1 = p.slot("beta1", 0.9f);
  m.beta2 = p.slot("beta2", 0.95f);
  m.eps = p.slot("eps", 1e-8f);
  m.weight_decay = p.slot("weight_decay");
  m.bc1 = p.slot("bias_correction1", 1.0f);
  m.bc2 = p.slot("bias_correction2", 1.0f);
  m.max_norm = p.slot("max_norm", INFINITY);
  {
    Graph g(b, p);
    Tensor coef;
    if (model.precision() == Precision::fp16) {
      // The gradients carry the loss scale: clip on the unscaled norm, and unscale with the same multiply.
      m.inv_scale = p.slot("inv_scale", 1.0f);
      coef = g.scale(g.clip_coef(g.scale(m.grad_norm, m.inv_scale), m.max_norm), m.inv_scale);
    } else {
      coef = g.clip_coef(m.grad_norm, m.max_norm);
    }
    // AdamW takes the gradients times coef and leaves them zeroed for the next step's accumulation.
    // Recorded op by op rather than parameter by parameter: the calls of one group touch disjoint tensors,
    // so a GPU backend runs each group without barriers inside it (vulkan/program.cpp).
    // A 4-bit weight's AdamW and requantization are one op (one pass over the weight, one dispatch).
    for (Param& q : model.params()) {
      if (!q.trainable) continue;
      const Scalar decay = q.decay ? m.weight_decay : Scalar(0.0f);
      if (q.quantized()) {
        g.adamw_q4gsw_step(q.value, q.m, q.v, q.grad, q.scales, model.config().group_size, q.codes, m.lr, m.beta1,
                           m.beta2, m.eps, decay, m.bc1, m.bc2, coef);
        continue;
      }
      const std::vector<Tensor> value = binding_parts(b, q.value), mom = binding_parts(b, q.m),
                                vel = binding_parts(b, q.v), grad = binding_parts(b, q.grad);
      for (size_t i = 0; i < value.size(); ++i)
        g.adamw_step(value[i], mom[i], vel[i], grad[i], m.lr, m.beta1, m.beta2, m.eps, decay, m.bc1, m.bc2, coef);
    }
    p.finalize();
  }
  m.zero_prog = b.new_program();
  m.zero_prog->share_memory(m.memory);
  {
    Graph g(b, *m.zero_prog);
    for (const Tensor& gr : grads) g.fill(gr, 0.0f);
    m.zero_prog->finalize();
  }
}

// fp16: the scaled gradients of `step` overflowed. The step is skipped (the caller zeroes the gradients),
// counted, and the scale backs off; an overflow already at the floor ends training.
static void on_overflow(LossScaler& s, int64_t step) {
  s.last_overflowed = true;
  ++s.overflows;
  ++s.overflows_in_a_row;
  s.good_steps = 0;
  const float was = s.scale;
  s.scale = was * s.backoff;
  ET_CHECK_KIND(ErrorKind::numeric, was > s.min_scale, "fp16 loss scaling: step ", step,
                ": the gradients overflowed fp16 at loss scale ", was, ", the floor (min_scale ", s.min_scale, "); ",
                s.overflows_in_a_row, " steps in a row (", step - s.overflows_in_a_row + 1, "..", step,
                ") overflowed and were skipped, so no weight was written. The gradients do not fit fp16 even "
                "unscaled: train this model with --precision fp32");
}

// fp16: an applied step; after growth_interval of them in a row the scale grows (while it stays finite).
static void on_good_step(LossScaler& s) {
  s.last_overflowed = false;
  s.overflows_in_a_row = 0;
  if (++s.good_steps < s.growth_interval) return;
  s.good_steps = 0;
  if (std::isfinite(s.scale * s.growth)) s.scale *= s.growth;
}

float Model::update(const OptimConfig& opt, int64_t step, bool apply) {
  if (!impl_->apply_prog) record_optimizer(*this, *impl_);
  Impl& m = *impl_;
  m.norm_prog->replay();
  float norm = 0;
  backend_.download(m.grad_norm, &norm, sizeof(float));
  steps_done = step;  // taken, even when skipped: the step consumed its batch
  const bool fp16 = precision_ == Precision::fp16;
  const float loss_scale = scaler.scale;
  if (fp16) norm /= loss_scale;
  if (!std::isfinite(norm) || !apply) {
    m.zero_prog->replay();  // nothing is written to the weights or the moments
    if (fp16 && !std::isfinite(norm)) {
      on_overflow(scaler, step);
    } else if (fp16) {  // skipped for the caller's reason (a NaN loss), not an overflow
      scaler.last_overflowed = false;
      scaler.overflows_in_a_row = 0;
    }
    return norm;
  }
  ++adam_steps;
  const double t = static_cast<double>(adam_steps);
  Program& p = *m.apply_prog;
  if (fp16) p.set(m.inv_scale, 1.0f / loss_scale);
  p.set(m.lr, opt.lr_at(step));
  p.set(m.beta1, opt.beta1);
  p.set(m.beta2, opt.beta2);
  p.set(m.eps, opt.eps);
  p.set(m.weight_decay, opt.weight_decay);
  p.set(m.bc1, static_cast<float>(1.0 - std::pow(static_cast<double>(opt.beta1), t)));
  p.set(m.bc2, static_cast<float>(1.0 - std::pow(static_cast<double>(opt.beta2), t)));
  p.set(m.max_norm, opt.grad_clip > 0 ? opt.grad_clip : INFINITY);
  p.replay();
  if (fp16) on_good_step(scaler);
  return norm;
}

void Model::set_precision(Precision p) {
  if (p == precision_) return;
  // The gradients hold the old precision's scale: start from zero.
  for (Param& q : params_)
    if (q.trainable) {
      std::vector<float> z(static_cast<size_t>(q.grad.numel()), 0.0f);
      backend_.upload(q.grad, z.data(), z.size() * sizeof(float));
    }
  precision_ = p;
  impl_->train = {};
  impl_->eval = {};
  impl_->norm_prog.reset();
  impl_->apply_prog.reset();
  impl_->zero_prog.reset();
}

void Model::set_activation_checkpointing(bool on) {
  if (on == checkpoint_activations_) return;
  checkpoint_activations_ = on;
  impl_->train = {};  // recorded again at the next accumulate (the gradients so far stay valid)
}

std::map<std::string, std::vector<float>> Model::gradients(const std::vector<int32_t>& tokens,
                                                           const std::vector<int32_t>& labels, int64_t batch,
                                                           int64_t seq, const std::vector<int32_t>& positions) {
  if (!impl_->zero_prog) record_optimizer(*this, *impl_);
  impl_->zero_prog->replay();
  int64_t valid = 0;
  for (int32_t l : labels) valid += l >= 0;
  accumulate(tokens, labels, batch, seq, std::max<int64_t>(valid, 1), positions);
  std::map<std::string, std::vector<float>> out;
  const double loss_scale = loss_scale_now(*this);
  for (Param& p : params_)
    if (p.trainable) {
      out[p.name] = backend_.to_vector<float>(p.grad);
      for (float& g : out[p.name]) g = static_cast<float>(g / loss_scale);
    }
  impl_->zero_prog->replay();
  return out;
}

}  // namespace edgetrain
