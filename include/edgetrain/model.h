// A Llama-style decoder (token embedding, RMSNorm, rotary attention, SwiGLU MLP, final norm, output
// head) whose training step — forward, hand-written backward, gradient clipping, AdamW, re-quantization —
// is recorded once as a Program on any backend and replayed every step.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "edgetrain/backend.h"
#include "edgetrain/precision.h"
#include "edgetrain/q4gsw.h"

namespace edgetrain {

enum class TrainMode { qat, qlora, fp32 };
const char* mode_name(TrainMode m);
TrainMode mode_from_name(const std::string& s);

struct ModelConfig {
  // The architecture, as GGUF's general.architecture names it: "llama"; "qwen2" (Llama with trainable fp32
  // biases on the q, k and v projections); "qwen3" (Llama with an RMSNorm over each q and k head, weights
  // [head_dim] shared by the heads, applied before rope).
  std::string arch = "llama";
  int64_t vocab = 256;
  int64_t dim = 128;
  int64_t n_layers = 2;
  int64_t n_heads = 4;
  // Key/value heads (grouped-query attention): query head h reads key/value head h / (n_heads / n_kv_heads),
  // the llama.cpp / Hugging Face convention. Must divide n_heads. -1 (the default) means n_heads: plain
  // multi-head attention. Configs in JSON always carry the resolved value (kv_heads()).
  int64_t n_kv_heads = -1;
  int64_t ffn_dim = 384;
  // Width of one attention head when it is not dim / n_heads (llama.attention.key_length, HF head_dim): the
  // q projection then has n_heads * head_dim rows and o as many columns. -1 (the default): dim / n_heads.
  int64_t head_size = -1;
  int64_t max_seq = 128;
  float rope_theta = 10000.0f;
  // Rope scaling (Llama 3.1/3.2): one factor per rotary pair of a head [head_dim/2], dividing pair i's
  // frequency theta^(-2i/head_dim), as GGUF's rope_freqs.weight holds them (llama.cpp applies them so).
  // Empty: no scaling. Hugging Face's rope_type "llama3" parameters are turned into these factors on import.
  std::vector<float> rope_factors;
  float norm_eps = 1e-5f;
  bool tied_head = false;  // output head shares the token embedding
  // Quantization / training mode.
  TrainMode mode = TrainMode::qat;
  int64_t group_size = 32;
  // LoRA (qlora mode): rank, alpha, and which block linears get adapters ("q,k,v,o,gate,up,down").
  int64_t lora_rank = 8;
  float lora_alpha = 16.0f;
  std::string lora_targets = "q,k,v,o";

  int64_t head_dim() const { return head_size > 0 ? head_size : dim / n_heads; }
  int64_t q_dim() const { return n_heads * head_dim(); }  // rows of the Q projection, columns of O
  bool qkv_bias() const { return arch == "qwen2"; }
  bool qk_norm() const { return arch == "qwen3"; }
  int64_t kv_heads() const { return n_kv_heads < 0 ? n_heads : n_kv_heads; }
  int64_t kv_dim() const { return kv_heads() * head_dim(); }  // rows of the K and V projections
  // Each rotary pair's frequency, theta^(-2i/head_dim) / rope_factors[i], computed in double.
  std::vector<double> rope_frequencies() const;
  int64_t parameter_count() const;
  void validate() const;  // throws Error naming the field
  std::string to_json() const;
  static ModelConfig from_json(const std::string& text);  // unknown or bad fields are errors
  static ModelConfig preset(const std::string& name);     // tiny, mini, small, base
  static std::vector<std::string> preset_names();
};

struct OptimConfig {
  float lr = 3e-3f;
  float min_lr_ratio = 0.1f;  // cosine decays to lr * min_lr_ratio
  int64_t warmup_steps = 20;
  int64_t total_steps = 1000;
  float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f;
  float weight_decay = 0.1f;  // on 2-D weights only
  float grad_clip = 1.0f;     // max global gradient norm; 0 disables clipping
  // Where the cosine's current plan starts: at step decay_from_step (after the warmup) the decay is
  // decay_from_progress of the way done, and it ends at total_steps. A time budget moves total_steps while
  // the run goes and anchors the rest of the decay at the step it does so, keeping the rate continuous.
  // {0, 0}: the plain cosine from the end of the warmup.
  int64_t decay_from_step = 0;
  double decay_from_progress = 0;
  float lr_at(int64_t step) const;  // warmup + cosine, step is 1-based
  // The cosine's progress at `step` (0 at the end of the warmup, 1 at total_steps).
  double decay_progress(int64_t step) const;
};

// Dynamic loss scaling of fp16 training, with the semantics of PyTorch's GradScaler: the loss, and so every
// gradient, is multiplied by `scale`, which keeps small gradients representable as fp16 GEMM operands;
// Model::update divides it out again (in the clipping coefficient) before AdamW sees fp32 gradients. A step
// whose scaled gradients overflow (a NaN/Inf gradient norm) is skipped — no weight or moment is written —
// and counted, and the scale is multiplied by `backoff`; after `growth_interval` applied steps in a row it is
// multiplied by `growth`. Only Precision::fp16 uses it; its state is saved in checkpoints.
struct LossScaler {
  float scale = 65536.0f;  // 2^16
  float growth = 2.0f, backoff = 0.5f;
  int64_t growth_interval = 2000;
  // An overflow at a scale <= min_scale stops training (Model::update throws ErrorKind::numeric): then the
  // gradients overflow fp16 even (almost) unscaled, and lowering the scale further cannot help.
  float min_scale = 1.0f;
  // State.
  int64_t good_steps = 0;          // applied steps since the last overflow or growth
  int64_t overflows = 0;           // steps skipped for an overflow, in all
  int64_t overflows_in_a_row = 0;  // the current run of them
  bool last_overflowed = false;    // the last update() was skipped for an overflow
};

// One trainable or frozen tensor of the model with its name in checkpoints.
struct Param {
  std::string name;
  Tensor value;      // fp32 master (or frozen fp32 for norms in qlora)
  Tensor grad;       // fp32 gradient (undefined when frozen)
  Tensor m, v;       // AdamW moments (undefined when frozen)
  bool trainable = true;
  bool decay = false;  // weight decay applies (2-D weights)
  // q4gsw linears only: packed codes the forward reads, and frozen per-group scales.
  Tensor codes, scales;
  bool quantized() const { return codes.defined(); }
};

// The model's tensors on one backend, and the recorded programs that train and evaluate it.
class Model {
 public:
  Model(Backend& b, const ModelConfig& cfg);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return cfg_; }
  Backend& backend() const { return backend_; }
  // The precision of the training and evaluation steps (accumulate, update, evaluate): fp32 (the default,
  // the reference) or fp16 — every GEMM with fp16 operands and fp32 accumulation, norms, softmax, the loss
  // and AdamW in fp32, and dynamic loss scaling (scaler). Not part of the weights: checkpoints hold fp32
  // masters either way, and a resumed run may change it. Changing it drops the recorded programs (they are
  // recorded again at the next call) and any accumulated gradients. Generation (next_logits) stays fp32.
  void set_precision(Precision p);
  Precision precision() const { return precision_; }
  // Activation checkpointing: the training step keeps only each block's input from the forward and
  // recomputes the block's activations just before its backward — about one more forward of compute for
  // activation memory of one block instead of all of them. The gradients are bit-identical (the same
  // kernels run on the same inputs). Not part of the weights; changing it re-records the training step.
  void set_activation_checkpointing(bool on);
  bool activation_checkpointing() const { return checkpoint_activations_; }
  std::vector<Param>& params() { return params_; }
  Param& param(const std::string& name);

  // Random initialisation (deterministic in seed), then quantization of the q4 linears.
  void init(uint64_t seed);
  // Re-derives codes from the fp32 masters with the frozen scales (after loading masters).
  void requantize();
  // Derives scales (max|w|/7 per group, fp16) and codes from the current masters: for a fresh model or
  // imported weights. Groups whose masters already are q4gsw values keep exactly those (q4::quantize).
  // Training never changes the scales (measured against re-deriving them periodically: docs/QAT.md).
  void quantize_from_masters();

  // Training: tokens/labels are i32 [batch*seq] on the host; labels < 0 are ignored. The first call
  // records the programs; later calls replay them, uploading the batch and reading back one loss.
  // Accumulates gradients of one micro-batch; n_valid_total is the number of valid labels of the
  // whole (accumulated) step so the gradients come out as the mean over it.
  // Sample packing: positions (i32 [batch*seq], optional) give each token's position within its own
  // sample: 0 at a sample's first token, then 1, 2, ... (each row starts a sample at 0). rope then uses
  // that position and attention sees only the sample's own tokens, so a row of packed samples trains as
  // each sample alone would (labels stay the caller's: -1 where a sample's last token has no next one in
  // it). Empty: one sequence per row, as without packing. Packed and plain calls record separate programs
  // (a switch between the two re-records, as a new batch x seq does).
  float accumulate(const std::vector<int32_t>& tokens, const std::vector<int32_t>& labels, int64_t batch,
                   int64_t seq, int64_t n_valid_total, const std::vector<int32_t>& positions = {});
  // Computes the global gradient norm and reads it back; if it is finite, clips, applies AdamW (lr from the
  // schedule at the 1-based `step`, bias correction after adam_steps + 1 updates), re-quantizes the 4-bit
  // codes, and zeroes the gradients. If it is NaN/Inf, or apply is false (the caller saw a NaN/Inf loss),
  // only the gradients are zeroed: no weight or moment is written. Either way steps_done becomes `step`.
  // Returns the norm before clipping (fp16: of the unscaled gradients). fp16: a NaN/Inf norm is an overflow
  // of the scaled gradients and updates the scaler (LossScaler); at min_scale it throws Error (numeric).
  float update(const OptimConfig& opt, int64_t step, bool apply = true);
  // Mean loss over valid labels without touching gradients.
  // positions as for accumulate.
  float evaluate(const std::vector<int32_t>& tokens, const std::vector<int32_t>& labels, int64_t batch, int64_t seq,
                 const std::vector<int32_t>& positions = {});
  // Logits [seq, vocab] of the last position(s) for generation: runs the forward over the given prefix
  // (with a KV cache: only new tokens are computed). reset() clears the cache.
  std::vector<float> next_logits(const std::vector<int32_t>& new_tokens);
  void reset_cache();

  // Whole-model gradient access for tests: runs accumulate() on a zeroed gradient set (fp16: divided by the
  // loss scale on the host, so they are the model's gradients in either precision).
  std::map<std::string, std::vector<float>> gradients(const std::vector<int32_t>& tokens,
                                                      const std::vector<int32_t>& labels, int64_t batch, int64_t seq,
                                                      const std::vector<int32_t>& positions = {});

  // 4-bit linears together: how many fp32 masters lie outside the range their codes follow (q4::in_range).
  q4::RangeStats range_stats();

  // Host copies of every tensor worth saving (masters, codes, scales, moments), by checkpoint name.
  struct Named {
    std::string name;
    Tensor tensor;
  };
  std::vector<Named> state_tensors();
  // Steps taken: the last `step` given to update(), the schedule's position, saved as a checkpoint's "step"
  // (--resume continues after it). A skipped step (update() that wrote nothing) counts: it used its batch.
  int64_t steps_done = 0;
  // AdamW updates applied: the t of bias correction (1 - beta^t), saved as a checkpoint's "adam_steps". A
  // skipped step leaves the moments as they were, so it does not count (as in PyTorch, where a skipped
  // optimizer.step() leaves the optimizer's step count while the learning-rate schedule moves on).
  int64_t adam_steps = 0;
  // fp16 loss scaling: configuration and state (used only under Precision::fp16; checkpointed then).
  LossScaler scaler;

  struct Impl;  // opaque: parameters by role and the recorded programs (src/model/model_impl.h)

 private:
  Backend& backend_;
  ModelConfig cfg_;
  Precision precision_ = Precision::fp32;
  bool checkpoint_activations_ = false;
  std::vector<Param> params_;
  std::unique_ptr<Impl> impl_;
};

// What training takes in backend memory for one micro-batch of batch x seq tokens, in bytes, counted by
// building the model and recording its programs on a backend that allocates nothing (exact for the
// tensors; a device's own staging buffers and pipelines come on top). Costs no device memory and little
// time, so it runs before a run starts and for `edgetrain info`.
struct MemoryEstimate {
  uint64_t weights = 0;     // what the forward reads: masters, 4-bit codes and scales, frozen tensors
  uint64_t optimizer = 0;   // gradients and AdamW moments of the trainable tensors
  uint64_t step = 0;        // activations and workspaces of the recorded training step and update
  uint64_t evaluation = 0;  // those of the recorded evaluation program
  uint64_t total = 0;       // all of them alive together (a run keeps every program)
  // Kept in host memory instead, not in the figures above: a qlora model's frozen fp32 masters on a device
  // (Backend::host_storage).
  uint64_t host = 0;
  uint64_t largest_binding = 0;      // bytes of the largest tensor (or part of one) a kernel binds
  std::string largest_binding_name;  // which: "embedding's input 0 f32[...]"
  bool largest_binding_is_weight = false;  // a parameter's (else an activation, which batch x seq sizes)
  int64_t vocab_parts = 1;  // the vocabulary's tensors are taken in this many parts (1: whole; model vocab.cpp)
};
// The device estimated for: its binding limits (Backend::max_binding_bytes, binding_alignment: tensors
// beyond them are recorded a part at a time, as on that device; 0: no limit) and whether it keeps frozen
// masters in host memory (Backend::host_storage is not the backend itself). {}: the CPU's.
struct TargetDevice {
  uint64_t max_binding_bytes = 0, binding_alignment = 1;
  bool frozen_on_host = false;
};
TargetDevice target_device(Backend& b);
MemoryEstimate estimate_training_memory(const ModelConfig& cfg, int64_t batch, int64_t seq,
                                        Precision precision = Precision::fp32, bool checkpoint_activations = false,
                                        TargetDevice device = {});
// "12.0 KiB", "512.0 MiB", "1.25 GiB".
std::string format_bytes(uint64_t bytes);

}  // namespace edgetrain
