// The phases of a training run (train() in trainer.cpp strings them together): resolve the options
// (--resume, --init), open the data (tokenizer, corpus, split), start on the first backend that works,
// loop over the steps, finish. The phases that need no device are functions here, so tests call them alone.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "edgetrain/interop.h"
#include "edgetrain/tokenizer.h"
#include "edgetrain/trainer.h"
#include "train/samples.h"

namespace edgetrain::training {

// ---- resolve the options (run_options.cpp) ----

// Throws Error naming the flag of the first bad value (and the bad entry of a --backend list).
void validate_options(const TrainOptions& o);
// A duration: "4m", "90s", "1h30m", "2m30.5s" or a plain number of seconds ("240"). Throws Error naming
// the flag and the text when it is not one or is not > 0.
double parse_duration(const std::string& text, const std::string& flag);
// "4m00s", "1h02m", "12.5s": for messages.
std::string format_duration(double seconds);
// The options a checkpoint records (JSON text), and --resume's restoration of them.
std::string options_record(const TrainOptions& o);
void restore_options(TrainOptions& o, const std::string& record);
std::string checkpoint_path(const TrainOptions& o);  // out_dir/checkpoint.safetensors
// What the run will do. --resume: the model and options the checkpoint records (only the step budget may
// grow; a given total_steps of 0 keeps the checkpoint's; a time budget is an error: the checkpoint's
// schedule is fixed). --init: the model shape of that file with this run's mode, group size and LoRA settings. seq 0
// becomes min(128, the model's max_seq) (--data: left to open_samples). Reads files, writes nothing; validates the result.
TrainOptions resolve_options(const TrainOptions& given);

// ---- open the data (run_data.cpp) ----

struct RunData {
  std::unique_ptr<Tokenizer> tok;
  // A corpus (--corpus): its tokens and split.
  std::unique_ptr<TokenStream> tokens;
  int64_t size = 0;       // tokens in the corpus (samples: in the training samples)
  int64_t val_begin = 0;  // [0, val_begin) is trained on, [val_begin, size) validates
  int64_t val_len() const { return size - val_begin; }
  // Samples (--data): the chat template's name and the two splits' batchers (validation: file order).
  std::string chat_template;
  std::unique_ptr<SampleBatcher> train_set, val_set;
  std::vector<ChatMessage> sample_messages;  // the first validation sample before its last reply: the run's sample
  bool samples() const { return train_set != nullptr; }
};
// Creates the run folder; opens the tokenizer (sets o.tokenizer to the spec the checkpoint records, and on a
// fresh run o.model.vocab to its size), the token stream and the split — or the samples (open_samples) —
// checking that they fit the model; removes checkpoint temp files that writers killed mid save left behind.
RunData open_data(TrainOptions& o);
// --data: reads, tokenizes and splits the samples; sets o.chat_template to the resolved name and, when o.seq
// is 0, o.seq to min(the model's max_seq, the longest sample's tokens - 1). Prints what it found (samples,
// tokens, the split, truncation).
void open_samples(TrainOptions& o, RunData& d);

// The tokens and labels of micro-batch `micro` of `step`: windows first .. first + count - 1 of its o.batch
// windows of o.seq + 1 tokens, at positions drawn from a counter-based RNG keyed by (seed, step, micro,
// window), all inside the training split — so a resumed run sees exactly the batches an uninterrupted one
// would, and a data-parallel rank takes its share of the same global batch whatever the rank count
// (count < 0: all o.batch windows).
// Samples: micro-batch (step - 1) * accum + micro of the batcher, whose rows are a pure function of the
// seed too; `positions` (when given) gets each token's position within its sample.
void training_batch(const RunData& d, const TrainOptions& o, int64_t step, int64_t micro, std::vector<int32_t>& tokens,
                    std::vector<int32_t>& labels, int64_t first = 0, int64_t count = -1,
                    std::vector<int32_t>* positions = nullptr);
// The labels >= 0 of a whole step (all micro-batches, all ranks' rows): what its loss is the mean over.
int64_t trained_labels(const RunData& d, const TrainOptions& o, int64_t step);
// Mean loss over the trained labels of the first `batches` micro-batches of the validation samples (file
// order, one pass at most).
EvalResult evaluate_samples(Model& model, SampleBatcher& val, int64_t batch, int64_t seq, int64_t batches);

// When the loop evaluates, writes a checkpoint and prints a plain log line: every N steps and at the last.
// The total is that of the options when the cadence is made, or the one a time budget settles on.
struct Cadence {
  int64_t total_steps, eval_every, checkpoint_every, log_every;
  explicit Cadence(const TrainOptions& o)
      : total_steps(o.optim.total_steps), eval_every(o.eval_every), checkpoint_every(o.checkpoint_every),
        log_every(o.log_every) {}
  bool evaluates(int64_t step) const { return step % eval_every == 0 || step == total_steps; }
  bool checkpoints(int64_t step) const { return step % checkpoint_every == 0 || step == total_steps; }
  bool logs(int64_t step) const { return step % log_every == 0; }
};

// ---- a time budget (run_options.cpp) ----

// How many steps a run of budget_s seconds takes, decided after `step` steps at elapsed_s seconds since the
// budget's clock started: each further step costs step_s plus its share of the evaluations and checkpoints
// (eval_s every eval_every steps, save_s every checkpoint_every), the last step one of each, and the run's
// end (end_s: the sample) once, aiming 0.5% (at most 2 s) short of the budget. At least `step`, at most
// max_steps.
struct BudgetPlan {
  double budget_s, elapsed_s, step_s, eval_s, save_s;
  int64_t eval_every, checkpoint_every, max_steps;
  double end_s = 0;  // the run's end besides its last evaluation and checkpoint (the sample)
  int64_t total_steps(int64_t step) const;
};
// The steps whose times the plan waits for: the first 30, or all of the warmup when shorter (the learning
// rate of a warmup step does not depend on the total; it needs a warmup of at least one step).
int64_t budget_calibration_steps(const TrainOptions& o);

// ---- start from another model's weights (init_weights.cpp) ----

// --init: the weights of an edgetrain checkpoint, GGUF file or Hugging Face folder, by name (their optimizer
// state and LoRA adapters are not used); leaves steps_done and adam_steps at 0. The model's 4-bit linears
// keep the file's codes and scales as saved when it has them (an edgetrain checkpoint of qat or qlora at the
// same group size), unless `requantize`: then, as for files without them, scales and codes come from the
// masters. Prints one line saying which; a --requantize line gives the change of the 4-bit weights.
struct InitReport {
  int64_t linears = 0;    // 4-bit linears of the model
  bool kept = false;      // their codes and scales are the file's
  double rms_change = 0;  // --requantize: RMS of W_new - W_file over the 4-bit linears / RMS of W_file
  double max_change = 0;  //   and max |W_new - W_file| / RMS of W_file (W: dequantized weights)
  // A GGUF file or Hugging Face folder: the q4gsw weights against the file's (printed: one summary line and
  // the worst tensor).
  WeightError import_error;
};
InitReport init_weights_from(const std::string& path, Model& model, bool requantize = false);
// --adapter: the A and B matrices of a LoRA adapter file into the (qlora) model, after init_weights_from;
// prints one line.
void load_adapter_from(const std::string& path, Model& model);

}  // namespace edgetrain::training
