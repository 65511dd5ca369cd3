// train(): resolve the options, open the data, start on the first backend that works, loop over the steps
// (gradient accumulation, the recorded step and optimizer programs, evaluation, metrics); the time budget,
// checkpoints and the end of the run are in trainer_end.cpp. The phases that need no device live in
// run_options.cpp, run_data.cpp and init_weights.cpp (declared in run.h).
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "edgetrain/backends.h"
#include "edgetrain/checkpoint.h"
#include "edgetrain/dist.h"
#include "train/data_parallel.h"
#include "train/run.h"
#include "train/train_run.h"

namespace edgetrain::training {

namespace fs = std::filesystem;

Faults injected_faults() {
  const char* v = std::getenv("EDGETRAIN_TRAIN_FAULT");
  Faults f;
  if (v == nullptr || *v == '\0') return f;
  const std::string s = v;
  const char* usage = "': expected nan_loss@STEP[,STEP...], overflow@STEP[,STEP...] or slow@STEP with steps >= 1";
  const size_t atsign = s.find('@');
  const std::string kind = s.substr(0, atsign);
  ET_CHECK(atsign != std::string::npos && (kind == "nan_loss" || kind == "overflow" || kind == "slow"),
           "EDGETRAIN_TRAIN_FAULT='", s, usage);
  std::set<int64_t>& steps = kind == "nan_loss" ? f.nan_loss : kind == "overflow" ? f.overflow : f.slow;
  for (size_t at = atsign + 1; at <= s.size();) {
    const size_t comma = std::min(s.find(',', at), s.size());
    int64_t step = 0;
    const auto r = std::from_chars(s.data() + at, s.data() + comma, step);
    ET_CHECK(r.ec == std::errc() && r.ptr == s.data() + comma && step >= 1, "EDGETRAIN_TRAIN_FAULT='", s, usage);
    steps.insert(step);
    at = comma + 1;
  }
  return f;
}

// overflow@: +inf in the first element of the first trainable gradient.
static void inject_overflow(Model& m) {
  for (Param& p : m.params()) {
    if (!p.trainable) continue;
    std::vector<float> g = m.backend().to_vector<float>(p.grad);
    g[0] = INFINITY;
    m.backend().upload(p.grad, g.data(), p.grad.nbytes());
    return;
  }
}

// The micro-batches' gradients, then the update (which writes nothing when the gradient norm is NaN/Inf).
StepOutcome TrainRun::train_step(int64_t step) {
  const auto t0 = Clock::now();
  StepOutcome s;
  s.loss_scale = model_->scaler.scale;
  // The loss is the mean over the step's trained labels (all ranks' rows): samples count theirs.
  s.trained = trained_labels(data_, o_, step);
  for (int64_t a = 0; a < o_.accum; ++a) {
    training_batch(data_, o_, step, a, tokens_, labels_, rank_first_, rank_batch_, &positions_);
    // positions_ (each token's position within its sample) matter for packed rows only; pad rows start every
    // sample at column 0, where the model's positions start, and take the plain program.
    static const std::vector<int32_t> plain;
    const bool packed = data_.samples() && data_.train_set->mode() == Batching::pack;
    s.loss += model_->accumulate(tokens_, labels_, rank_batch_, o_.seq, std::max<int64_t>(1, s.trained),
                                 packed ? positions_ : plain);
  }
  if (faults_.nan_loss.count(step)) s.loss = std::nan("");
  if (!faults_.slow.empty() && step >= *faults_.slow.begin()) std::this_thread::sleep_for(std::chrono::milliseconds(30));
  // Each rank's loss and gradients are its share of the global batch's mean (divided by the global token
  // count): their sums over the ranks are the step's. The same sum carries the stop decisions.
  double control[3] = {s.loss, static_cast<double>(stop_signal()),
                       root_ && o_.time_limit_s > 0 && seconds_since(t_start_) > o_.time_limit_s ? 1.0 : 0.0};
  if (comm_->size() > 1) {
    comm_->sum(control, 3, "loss all-reduce");
    const auto r0 = Clock::now();
    sum_gradients(*model_, *comm_);
    s.reduce_seconds = seconds_since(r0);
  }
  s.loss = control[0];
  s.stop = control[1] > 0 ? (stop_signal() ? stop_signal() : SIGTERM) : 0;
  s.out_of_time = control[2] > 0;
  agreed_stop_ = s.stop;
  if (faults_.overflow.count(step)) inject_overflow(*model_);
  // A NaN/Inf loss never reaches the weights, even when the gradient norm happens to be finite.
  s.norm = model_->update(o_.optim, step, std::isfinite(s.loss));
  s.seconds = seconds_since(t0);
  return s;
}

// The memory the run will take (estimate_training_memory), checked before the model is built: a run that
// cannot fit stops at once with the figures, instead of failing midway in an allocation (or swapping);
// unsupported, so a --backend list moves on to a device that may hold it.
static MemoryEstimate check_memory(Backend& b, const ModelConfig& cfg, int64_t batch, int64_t seq, Precision p,
                                   bool checkpoint) {
  const TargetDevice device = target_device(b);
  const MemoryEstimate e = estimate_training_memory(cfg, batch, seq, p, checkpoint, device);
  const uint64_t have = b.memory_capacity();
  if (have != 0 && e.total > have) {
    // What would fit instead: recomputed activations first (same batch, same results), then qlora.
    std::string hint = "lower --batch or --seq (--accum keeps the tokens per step)";
    if (!checkpoint) {
      const uint64_t with = estimate_training_memory(cfg, batch, seq, p, true, device).total;
      hint = "--checkpoint-activations (" + format_bytes(with) + (with <= have ? ", fits" : ", still too much") +
             "), or " + hint;
    }
    if (cfg.mode != TrainMode::qlora) hint += ", or train --mode qlora";
    fail_kind(ErrorKind::unsupported, "training needs ~", format_bytes(e.total), " (weights ", format_bytes(e.weights),
                ", gradients and AdamW ", format_bytes(e.optimizer), ", activations of batch ", batch, " x seq ", seq,
                ": ", format_bytes(e.step + e.evaluation), ") but ", b.name(), " has ", format_bytes(have), "; ", hint);
  }
  // The vocabulary's tensors are taken in parts that fit (model vocab.cpp); any other tensor is bound whole.
  const uint64_t host = b.host_storage().memory_capacity();
  ET_CHECK_KIND(ErrorKind::unsupported, e.host == 0 || host == 0 || e.host <= host, "training keeps ",
                format_bytes(e.host), " of frozen fp32 masters in host memory but the host has ", format_bytes(host),
                " available");
  const uint64_t bind = device.max_binding_bytes;
  ET_CHECK_KIND(ErrorKind::unsupported, bind == 0 || e.largest_binding <= bind, "training binds a tensor of ",
                format_bytes(e.largest_binding), " (", e.largest_binding_name, ") but ", b.name(),
                " binds at most ", format_bytes(bind), " to a kernel",
                e.largest_binding_is_weight ? "" : "; lower --batch or --seq");
  return e;
}

static void print_memory(const MemoryEstimate& e, const Backend& b, bool checkpoint) {
  const uint64_t have = b.memory_capacity();
  std::printf("  memory: %s (weights %s, gradients and AdamW %s, activations %s%s)", format_bytes(e.total).c_str(),
              format_bytes(e.weights).c_str(), format_bytes(e.optimizer).c_str(),
              format_bytes(e.step + e.evaluation).c_str(), checkpoint ? ", recomputed per block" : "");
  if (have) std::printf(" of %s's %s", b.name().c_str(), format_bytes(have).c_str());
  std::printf("\n");
  if (e.host) std::printf("  frozen fp32 masters in host memory: %s (the steps read their 4-bit codes)\n", format_bytes(e.host).c_str());
  if (e.vocab_parts > 1)
    std::printf("  vocabulary in %ld parts: %s binds at most %s to a kernel\n", static_cast<long>(e.vocab_parts),
                b.name().c_str(), format_bytes(b.max_binding_bytes()).c_str());
}


// Start-up on the first backend of the plan that works: the device, the model and its weights, the step-0
// evaluation and the first step, which together allocate every buffer and compile every kernel of the run.
// A failure of the backend itself (no device, out of device memory, a kernel the driver cannot compile)
// moves on to the next backend of a list (--backend vulkan,cpu) or of auto, with a one-line notice; with
// one backend, or when it is the input that is wrong (a bad checkpoint), it is the error.
void TrainRun::start() {
  ckpt_ = checkpoint_path(o_);
  tokens_per_step_ = o_.batch * o_.seq * o_.accum;
  BackendOptions bo;
  bo.threads = o_.threads;
  bo.device = o_.device;
  if (comm_->size() > 1) {  // one process per device: the local rank picks it (--device still wins)
    if (bo.device.empty()) bo.device = std::to_string(comm_->local_rank());
    if (bo.threads == 0)  // the CPU's cores shared by this machine's ranks
      bo.threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / comm_->local_size());
  }
  const std::vector<BackendCandidate> plan = backend_plan(o_.backend, bo);
  try {
    first_that_starts(plan, [this](const BackendCandidate& c) { start_on(c); }, " at start-up");
  } catch (const Error& e) {
    if (plan.size() == 1 && plan[0].backend != "cpu" && backend_list_falls_back(e))
      fail_kind(e.kind(), e.what(), "; to fall back to another backend instead, list them in order: --backend ",
                plan[0].backend, ",cpu");
    throw;
  }
}

void TrainRun::start_on(const BackendCandidate& c) {
  model_.reset();  // what a failed candidate left (the model before its backend)
  backend_.reset();
  eval0_.reset();
  first_.reset();
  backend_ = make_backend(c.backend, c.options);
  const PrecisionChoice precision = choose_precision(o_.precision, *backend_);
  const MemoryEstimate need =
      check_memory(*backend_, o_.model, rank_batch_, o_.seq, precision.precision, o_.checkpoint_activations);
  model_ = std::make_unique<Model>(*backend_, o_.model);
  Model& m = *model_;
  m.set_precision(precision.precision);
  m.set_activation_checkpointing(o_.checkpoint_activations);
  m.scaler.scale = o_.loss_scale;  // a checkpoint's own scale replaces it on --resume
  m.scaler.growth_interval = o_.loss_scale_interval;
  m.init(o_.seed);
  if (o_.resume) load_checkpoint(ckpt_, m, nullptr);
  else if (!o_.init.empty()) init_weights_from(o_.init, m, o_.requantize);
  if (!o_.adapter.empty()) load_adapter_from(o_.adapter, m);
  start_step_ = m.steps_done;
  saved_step_ = o_.resume ? start_step_ : -1;
  std::printf("edgetrain train: %.2fM parameters, mode %s, group %ld, on %s (%s)\n", o_.model.parameter_count() / 1e6,
              mode_name(o_.model.mode), static_cast<long>(o_.model.group_size), backend_->name().c_str(),
              backend_->device_name().c_str());
  if (!c.why.empty()) std::printf("  %s\n", c.why.c_str());
  std::printf("  %s\n", precision.why.c_str());
  print_memory(need, *backend_, o_.checkpoint_activations);
  if (precision.precision == Precision::fp16)
    std::printf("  loss scale %g (x%g after %ld applied steps in a row, x%g on an overflow, which skips the step)\n",
                m.scaler.scale, m.scaler.growth, static_cast<long>(m.scaler.growth_interval), m.scaler.backoff);
  if (comm_->size() > 1) {
    const ReduceSize r = reduce_size(m);
    std::printf("  data parallel: %s; %ld sequences per rank of the global batch %ld; all-reduce of %.1f MB per "
                "step (%ld gradient tensors in %ld buckets of <= %zu MiB, host-staged)\n",
                comm_->name().c_str(), static_cast<long>(rank_batch_), static_cast<long>(o_.batch), r.bytes / 1e6,
                static_cast<long>(r.tensors), static_cast<long>(r.buckets), kBucketBytes >> 20);
  }
  if (data_.samples())
    std::printf("  %ld tokens per step (batch x seq x accum), the trained ones counted per step; ",
                static_cast<long>(tokens_per_step_));
  else
    std::printf("  corpus %s: %ld tokens (%s), %ld for validation; %ld tokens per step; ", o_.corpus.c_str(),
                static_cast<long>(data_.size), data_.tok->name().c_str(), static_cast<long>(data_.val_len()),
                static_cast<long>(tokens_per_step_));
  if (o_.time_budget_s > 0)
    std::printf("time budget %s: the steps that fit, planned after the first %ld\n",
                format_duration(o_.time_budget_s).c_str(), static_cast<long>(budget_calibration_steps(o_)));
  else
    std::printf("steps %ld..%ld\n", static_cast<long>(start_step_ + 1), static_cast<long>(o_.optim.total_steps));
  std::fflush(stdout);
  t_start_ = Clock::now();
  if (start_step_ == 0) {
    const auto t_eval = Clock::now();
    eval0_ = evaluate();
    eval0_s_ = seconds_since(t_eval);
    std::printf("  step 0: validation loss %.4f (perplexity %.2f)\n", eval0_->loss, eval0_->perplexity);
    std::fflush(stdout);
  }
  if (start_step_ < o_.optim.total_steps) first_ = train_step(start_step_ + 1);
}

// Metrics: on resume keep the lines up to the checkpoint's step, so the file reads as one run.
void TrainRun::open_metrics() {
  metrics_path_ = o_.out_dir + "/metrics.jsonl";
  std::vector<std::string> kept;
  if (o_.resume && fs::exists(metrics_path_)) {
    std::ifstream in(metrics_path_);
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.contains("step") || j["step"].get<int64_t>() > start_step_) continue;
      kept.push_back(line);
      if (j.contains("loss")) train_curve_.push_back({j["step"], j["loss"].get<double>()});
      if (j.contains("val_loss")) val_curve_.push_back({j["step"], j["val_loss"].get<double>()});
    }
  }
  tty_ = root_ && o_.progress && ::isatty(STDERR_FILENO);
  if (root_) {  // rank 0 alone writes files
    {
      std::ofstream out(metrics_path_, std::ios::trunc);
      for (auto& l : kept) out << l << "\n";
    }
    metrics_.open(metrics_path_, std::ios::app);
  }
  if (eval0_) {
    res_.first_val_loss = static_cast<float>(eval0_->loss);
    val_curve_.push_back({0, eval0_->loss});
    if (root_)
      metrics_ << nlohmann::json{{"step", 0}, {"val_loss", eval0_->loss}, {"val_ppl", eval0_->perplexity}}.dump()
               << "\n";
  }
}

// Steps until the budget, the time limit or a stop request (TrainOptions::stop, checked between steps: the
// step under way always finishes, so what is saved is a whole step).
void TrainRun::loop() {
  last_step_ = start_step_;
  for (int64_t step = start_step_ + 1; step <= o_.optim.total_steps; ++step) {
    if (step > start_step_ + 1 && stop_request()) break;  // the first step ran at start-up: record it first
    StepOutcome s;
    try {
      s = step == start_step_ + 1 && first_ ? *first_ : train_step(step);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::numeric || !model_->scaler.last_overflowed) throw;
      // The loss scaler gave up (every step overflowed down to its floor); the skipped steps wrote nothing.
      // Every rank sees the same summed gradients, so all of them end here together.
      save_if_behind();
      end_progress_line();
      fail_kind(ErrorKind::numeric, "train: ", e.what(), "; ", last_good());
    }
    last_step_ = step;
    if (o_.time_budget_s > 0) step_times_.push_back(s.seconds);
    if (!s.finite()) {
      skip(step, s);
      continue;
    }
    skipped_in_a_row_ = 0;
    ++applied_;
    reduce_time_ += s.reduce_seconds;
    if (planning()) calibrate(step);  // before record(): the cadence needs the total
    else if (o_.time_budget_s > 0) replan(step);
    const bool out_of_time = record(step, s);
    if (cadence_.checkpoints(step) || out_of_time) save(step);
    if (out_of_time) {
      std::printf("  time limit of %.0f s reached at step %ld: checkpoint written; continue with --resume\n",
                  o_.time_limit_s, static_cast<long>(step));
      break;
    }
  }
  end_progress_line();
}

// A step with a NaN/Inf loss or gradient norm: an error, or with --skip-nan-steps a notice — until too many
// come in a row. A skipped step is a step taken (Model::update: steps_done advances, adam_steps does not):
// it consumed its batch, so a checkpoint written after it holds its number and --resume continues after
// it, with the weights and moments as they were before it.
void TrainRun::skip(int64_t step, const StepOutcome& s) {
  const bool loss_bad = !std::isfinite(s.loss);
  if (!loss_bad && model_->precision() == Precision::fp16 && model_->scaler.last_overflowed) {
    // fp16 loss scaling at work, not an error: the scaled gradients overflowed, the scale backed off.
    std::printf("  step %ld: fp16 gradient overflow at loss scale %g: step skipped (weights unchanged), scale now %g\n",
                static_cast<long>(step), s.loss_scale, model_->scaler.scale);
    std::fflush(stdout);
    if (cadence_.checkpoints(step)) save(step);
    return;
  }
  if (!o_.skip_nan_steps) {
    end_progress_line();
    fail_kind(ErrorKind::numeric, "train: step ", step, ": ", loss_bad ? "loss" : "gradient norm", " is ",
         loss_bad ? s.loss : s.norm, "; stopped without updating the weights. The last good checkpoint is ",
         fs::exists(ckpt_) ? "'" + ckpt_ + "'" : std::string("(none written yet)"),
         " (use --skip-nan-steps to skip such steps instead)");
  }
  std::printf("  step %ld: non-finite %s, step skipped (weights unchanged)\n", static_cast<long>(step),
              loss_bad ? "loss" : "gradient norm");
  std::fflush(stdout);
  if (++skipped_in_a_row_ < o_.max_skipped_steps) return;
  save_if_behind();  // skipped steps wrote no weight: what is saved is finite
  end_progress_line();
  fail_kind(ErrorKind::numeric, "train: step ", step, ": ", skipped_in_a_row_, " steps in a row (", step - skipped_in_a_row_ + 1, "..", step,
       ") had a non-finite loss or gradient norm and were skipped; stopped at --max-skipped-steps ",
       o_.max_skipped_steps, ". No NaN/Inf reached the weights; ", last_good(),
       ". Lower --lr, set --grad-clip, or check the corpus");
}

// An applied step: its metrics line, the evaluation when due, the progress bar or log line. Returns whether
// --time-limit has run out.
bool TrainRun::record(int64_t step, const StepOutcome& s) {
  window_tokens_ += static_cast<double>(tokens_per_step_);
  window_trained_ += static_cast<double>(s.trained);
  window_time_ += s.seconds;
  train_curve_.push_back({step, s.loss});
  res_.last_train_loss = static_cast<float>(s.loss);
  const double lr = o_.optim.lr_at(step);
  nlohmann::json line = {{"step", step},
                         {"loss", s.loss},
                         {"lr", lr},
                         {"grad_norm", s.norm},
                         {"step_s", s.seconds},
                         {"reduce_s", s.reduce_seconds},
                         {"tokens", step * tokens_per_step_},
                         {"elapsed_s", seconds_since(t_start_)},
                         {"rss_mb", rss_mb("VmRSS:")}};
  if (model_->precision() == Precision::fp16) {
    line["loss_scale"] = s.loss_scale;  // the scale this step ran at
    line["overflow_steps"] = model_->scaler.overflows;
  }
  const bool do_eval = cadence_.evaluates(step);
  const bool out_of_time = s.out_of_time;  // decided at the end of the step, by every rank alike
  if (do_eval || out_of_time) {
    EvalResult e = evaluate();
    line["val_loss"] = e.loss;
    line["val_ppl"] = e.perplexity;
    val_curve_.push_back({step, e.loss});
    res_.last_val_loss = static_cast<float>(e.loss);
  }
  if (window_time_ > 0) tok_s_ = window_tokens_ / window_time_, trained_s_ = window_trained_ / window_time_;
  line["tokens_per_s"] = tok_s_;
  line["trained_tokens"] = s.trained;  // labels >= 0 of this step (a corpus: every token)
  line["trained_tokens_per_s"] = trained_s_;
  if (root_) {
    metrics_ << line.dump() << "\n";
    metrics_.flush();
  }
  const double elapsed = seconds_since(t_start_);
  const long total = static_cast<long>(o_.optim.total_steps);
  const double eta =
      tok_s_ > 0 ? static_cast<double>((o_.optim.total_steps - step) * tokens_per_step_) / tok_s_ : 0;
  // Samples: the trained tokens of the step, and the rate of those beside the rate of all tokens.
  char trained[64] = "";
  if (data_.samples())
    std::snprintf(trained, sizeof trained, "  trained %ld (%.0f tok/s)", static_cast<long>(s.trained), trained_s_);
  if (tty_ && planning()) {
    std::fprintf(stderr, "\r  step %ld  loss %.3f  lr %.2e  %.0f tok/s  (measuring the step time)   ", static_cast<long>(step),
                 s.loss, lr, tok_s_);
  } else if (tty_) {
    const int width = 24, fill = static_cast<int>(width * step / o_.optim.total_steps);
    std::fprintf(stderr, "\r  [%s%s] step %ld/%ld  loss %.3f  lr %.2e  %.0f tok/s%s  eta %s   ",
                 std::string(static_cast<size_t>(fill), '#').c_str(),
                 std::string(static_cast<size_t>(width - fill), '.').c_str(), static_cast<long>(step), total, s.loss,
                 lr, tok_s_, trained, format_duration(eta).c_str());
  }
  if (!tty_ && (cadence_.logs(step) || do_eval))
    std::printf("  step %ld/%ld  loss %.4f  lr %.2e  grad norm %.3f  %.0f tok/s%s  %s elapsed\n", static_cast<long>(step),
                total, s.loss, lr, s.norm, tok_s_, trained, format_duration(elapsed).c_str());
  if (line.contains("val_loss")) {
    end_progress_line();
    std::printf("  step %ld: validation loss %.4f (perplexity %.2f)\n", static_cast<long>(step),
                line["val_loss"].get<double>(), line["val_ppl"].get<double>());
  }
  std::fflush(stdout);
  return out_of_time;
}

// The validation loss: fixed windows of the corpus's held-out end, or the validation samples.
EvalResult TrainRun::evaluate() {
  if (data_.samples()) return evaluate_samples(*model_, *data_.val_set, o_.batch, o_.seq, o_.eval_batches);
  return evaluate_split(*model_, *data_.tokens, data_.val_begin, data_.size, o_.batch, o_.seq, o_.eval_batches);
}
}  // namespace edgetrain::training

namespace edgetrain {

TrainResult train(const TrainOptions& opts) { return training::TrainRun(opts).run(); }

}  // namespace edgetrain
