// The trainer: corpus -> tokens -> batches -> recorded model steps, with a warmup+cosine schedule,
// gradient accumulation and clipping, periodic evaluation, atomic checkpoints, exact resume, metrics
// (metrics.jsonl), a loss-curve SVG and a generated sample.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "edgetrain/model.h"

namespace edgetrain {

class Tokenizer;
class Communicator;

// A tokenized corpus: memory-mapped text (byte tokenizer: the bytes are the tokens) or a memory-mapped
// token cache written once per (corpus, tokenizer). Never copies the corpus into memory.
class TokenStream {
 public:
  static std::unique_ptr<TokenStream> open(const std::string& corpus_path, const Tokenizer& tok,
                                           const std::string& cache_dir);
  virtual ~TokenStream() = default;
  virtual int64_t size() const = 0;
  virtual int32_t at(int64_t i) const = 0;
};

struct TrainOptions {
  std::string corpus;             // text file
  // Fine-tuning on chat / instruction samples instead of a corpus (src/train/samples.h): a JSONL file of
  // {"prompt": ..., "completion": ...} or {"messages": [{"role": ..., "content": ...}, ...]} lines, rendered
  // through the chat template; validation on val_data, or when that is "" on the last val_fraction of the
  // samples (at least one).
  std::string data, val_data;
  // A chat template name or a file holding one (resolve_chat_template); "": the tokenizer's own, else plain.
  // The checkpoint records the resolved name.
  std::string chat_template;
  std::string train_on = "completion";  // completion (assistant replies only) or all
  std::string batching = "pad";         // pad (one sample per row) or pack (several per row)
  std::string out_dir = "runs/default";
  // "auto" (the --init file's own tokenizer, else bytes), "gguf" (the --init GGUF file's), or a
  // make_tokenizer() spec: bytes, gpt2, a folder with encoder.json + vocab.bpe, a GGUF file.
  std::string tokenizer = "auto";
  std::string backend = "auto";   // a --backend value: one name, an ordered list to fall back through, or auto
  std::string device;             // backend device selector
  // fp32, fp16 (mixed precision with dynamic loss scaling) or auto (fp16 where the backend's fp16 GEMMs are
  // faster: choose_precision). Not restored by --resume: a run may continue in another precision.
  std::string precision = "auto";
  // Recompute each block's activations in the backward (Model::set_activation_checkpointing): activation
  // memory of one block instead of all, for about a third more compute. Not restored by --resume.
  bool checkpoint_activations = false;
  float loss_scale = 65536.0f;          // fp16: the initial loss scale (a resumed run continues its own)
  int64_t loss_scale_interval = 2000;   // fp16: applied steps in a row before the scale doubles
  std::string init;               // start from this checkpoint's weights (new optimizer state)
  bool requantize = false;        // with init: new 4-bit scales/codes from its masters instead of its own
  // With init and qlora: continue this LoRA adapter (llama.cpp adapter GGUF or PEFT folder); its rank, alpha
  // and targets replace model.lora_*.
  std::string adapter;
  bool resume = false;            // continue out_dir/checkpoint.safetensors exactly
  ModelConfig model = ModelConfig::preset("mini");
  OptimConfig optim;
  int64_t batch = 16, seq = 128, accum = 1;  // seq 0: min(128, the model's max_seq)
  int64_t eval_every = 100, eval_batches = 8, checkpoint_every = 200, log_every = 10;
  uint64_t seed = 1;
  double val_fraction = 0.02;
  double time_limit_s = 0;        // stop early (with a checkpoint) when exceeded; 0 = none
  // A time budget (seconds; 0 = none) for a fresh run: the run measures its first steps (within the warmup,
  // whose learning rates do not depend on the total), then fixes optim.total_steps to the steps that fit in
  // the budget counted from the call of train() (evaluations and checkpoints included), at most the given
  // optim.total_steps; it says so, and every checkpoint records that total, so --resume goes on exactly.
  double time_budget_s = 0;
  bool skip_nan_steps = false;    // default: stop at the first NaN/Inf loss or gradient norm
  int64_t max_skipped_steps = 10; // with skip_nan_steps: stop with an error after this many skipped in a row
  std::string sample_prompt = "And God said";
  int64_t sample_tokens = 200;
  int threads = 0;
  bool progress = true;           // progress bar on a terminal, plain lines otherwise
  // When this holds a non-zero value (a signal handler stores the signal's number), the run stops after
  // the step under way: it writes the checkpoint (atomically), says how to --resume and returns with
  // TrainResult::stopped_by set. The CLI points it at its SIGINT/SIGTERM flag.
  const std::atomic<int>* stop = nullptr;
  // Data-parallel training (include/edgetrain/dist.h): every rank runs train() with the same options; each
  // takes batch / ranks of every micro-batch's sequences (the global batch and the learning rate stay what
  // was set), the gradients are summed across ranks before clipping and AdamW, and rank 0 alone writes
  // files. nullptr: one process.
  Communicator* comm = nullptr;
};

struct TrainResult {
  int64_t steps = 0;
  float last_train_loss = 0, last_val_loss = 0, first_val_loss = 0;
  double tokens_per_s = 0, seconds = 0;
  std::string checkpoint, metrics, curve, sample;
  int stopped_by = 0;  // the value TrainOptions::stop held when it stopped the run early, else 0
};

// Throws Error (one line naming the step, flag, file or backend) on every failure. Start-up — creating the
// backend, the model and its weights, the step-0 evaluation and the first step, which compile every kernel
// of the run — falls back to the next backend of opts.backend's list (or auto's) when the backend itself
// fails (backend_list_falls_back), with a notice on stderr.
TrainResult train(const TrainOptions& opts);

// Mean validation loss over `batches` fixed batches of the corpus's validation split.
struct EvalResult {
  double loss = 0, perplexity = 0;
  int64_t tokens = 0;  // labels evaluated (samples: the trained ones)
};
EvalResult evaluate_split(Model& model, const TokenStream& data, int64_t begin, int64_t end, int64_t batch,
                          int64_t seq, int64_t batches);

struct SampleOptions {
  float temperature = 0.8f;
  int64_t top_k = 40;
  float top_p = 0.95f;
  uint64_t seed = 1;
  int64_t max_tokens = 200;
  // Called with the logits (vocab floats) each new token is picked from, before the pick: for comparing a
  // model's numbers with another runtime's (generate --logits).
  std::function<void(const float* logits, int64_t vocab)> on_logits;
};
// Samples a continuation of prompt with the model's KV cache; returns only the new text.
std::string generate(Model& model, const Tokenizer& tok, const std::string& prompt, const SampleOptions& opts,
                     const std::function<void(const std::string&)>& on_text = {});

// Writes an SVG plot of train (every step) and validation (sparse) loss curves.
void write_loss_svg(const std::string& path, const std::vector<std::pair<int64_t, double>>& train,
                    const std::vector<std::pair<int64_t, double>>& val, const std::string& title);

}  // namespace edgetrain
