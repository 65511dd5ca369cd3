// train(): one run object whose phases read top to bottom — resolve the options, open the data, start on
// the first backend that works, loop over the steps (gradient accumulation, the recorded step and optimizer
// programs, evaluation, checkpoints, metrics), finish (loss curve, sample, summary). The phases that need no
// device live in run_options.cpp, run_data.cpp and init_weights.cpp (declared in run.h).
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

#include "edgetrain/backends.h"
#include "edgetrain/checkpoint.h"
#include "train/run.h"

namespace edgetrain::training {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double rss_mb(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field, 0) == 0) return std::stod(line.substr(std::strlen(field))) / 1024.0;
  return 0;
}

std::string fmt_duration(double s) {
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s / 3600), static_cast<int>(s / 60) % 60);
  else std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s / 60), static_cast<int>(s) % 60);
  return buf;
}

// The step of an existing checkpoint, for messages ("?" when unreadable).
std::string meta_step(const std::string& path) {
  try {
    auto m = read_checkpoint_metadata(path);
    return m.count("step") ? m["step"] : "?";
  } catch (const Error&) {
    return "?";
  }
}

// One training step: its loss (summed over the micro-batches), gradient norm and wall time.
struct StepOutcome {
  double loss = 0;
  float norm = 0;
  double seconds = 0;
  bool finite() const { return std::isfinite(loss) && std::isfinite(norm); }
};

// TEST-ONLY fault injection: EDGETRAIN_TRAIN_FAULT=nan_loss@3,4 makes the loss of steps 3 and 4 NaN once
// their gradients are computed, as an overflowing forward pass would, so tests reach the skipped-step
// paths at chosen steps while the other steps train normally.
std::set<int64_t> injected_nan_steps() {
  const char* v = std::getenv("EDGETRAIN_TRAIN_FAULT");
  std::set<int64_t> steps;
  if (v == nullptr || *v == '\0') return steps;
  const std::string s = v, prefix = "nan_loss@";
  ET_CHECK(s.rfind(prefix, 0) == 0, "EDGETRAIN_TRAIN_FAULT='", s, "': expected nan_loss@STEP[,STEP...]");
  for (size_t at = prefix.size(); at <= s.size();) {
    const size_t comma = std::min(s.find(',', at), s.size());
    int64_t step = 0;
    const auto r = std::from_chars(s.data() + at, s.data() + comma, step);
    ET_CHECK(r.ec == std::errc() && r.ptr == s.data() + comma && step >= 1, "EDGETRAIN_TRAIN_FAULT='", s,
             "': expected nan_loss@STEP[,STEP...] with steps >= 1");
    steps.insert(step);
    at = comma + 1;
  }
  return steps;
}

class TrainRun {
 public:
  explicit TrainRun(const TrainOptions& given)
      : o_(resolve_options(given)), cadence_(o_), nan_steps_(injected_nan_steps()) {}

  TrainResult run() {  // the options were resolved by the constructor
    t_budget_ = Clock::now();
    data_ = open_data(o_);
    start();
    open_metrics();
    loop();
    return finish();
  }

 private:
  StepOutcome train_step(int64_t step);
  void start();
  void start_on(const BackendCandidate& c);
  void open_metrics();
  void loop();
  void skip(int64_t step, const StepOutcome& s);
  int stop_signal() const { return o_.stop != nullptr ? o_.stop->load() : 0; }
  bool record(int64_t step, const StepOutcome& s);
  void save(int64_t at_step);
  bool planning() const { return o_.time_budget_s > 0 && !planned_; }
  void calibrate(int64_t step);
  void plan(int64_t step, bool write_checkpoint);
  void save_if_behind();
  std::string last_good() const;
  void end_progress_line() const {
    if (tty_) std::fprintf(stderr, "\n");
  }
  void close_result();
  TrainResult finish();
  TrainResult finish_stopped(int signal);

  TrainOptions o_;  // resolved
  Cadence cadence_;
  const std::set<int64_t> nan_steps_;  // EDGETRAIN_TRAIN_FAULT
  std::string ckpt_, metrics_path_;
  RunData data_;
  int64_t tokens_per_step_ = 0;
  std::vector<int32_t> tokens_, labels_;

  // Start-up (on the backend that worked).
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  int64_t start_step_ = 0;
  std::optional<EvalResult> eval0_;   // the step-0 evaluation (fresh runs)
  std::optional<StepOutcome> first_;  // the first step, run during start-up
  Clock::time_point t_start_;
  // A time budget (TrainOptions::time_budget_s): its clock, the step-0 evaluation's time, the times of the
  // steps measured so far, and whether the total is fixed.
  Clock::time_point t_budget_;
  double eval0_s_ = 0;
  std::vector<double> step_times_;
  bool planned_ = false;
  double budget_used_s_ = 0;

  // The loop.
  std::ofstream metrics_;
  std::vector<std::pair<int64_t, double>> train_curve_, val_curve_;
  bool tty_ = false;
  TrainResult res_;
  double window_tokens_ = 0, window_time_ = 0, tok_s_ = 0;
  int64_t last_step_ = 0;   // the last step taken
  int64_t saved_step_ = -1;  // the step the run's checkpoint holds (-1: none; on --resume, the one it started at)
  // With --skip-nan-steps: the current run of consecutive skipped steps, and how many steps of this
  // invocation were applied.
  int64_t skipped_in_a_row_ = 0, applied_ = 0;
};

// The micro-batches' gradients, then the update (which writes nothing when the gradient norm is NaN/Inf).
StepOutcome TrainRun::train_step(int64_t step) {
  const auto t0 = Clock::now();
  StepOutcome s;
  for (int64_t a = 0; a < o_.accum; ++a) {
    training_batch(data_, o_, step, a, tokens_, labels_);
    s.loss += model_->accumulate(tokens_, labels_, o_.batch, o_.seq, tokens_per_step_);
  }
  if (nan_steps_.count(step)) s.loss = std::nan("");
  // A NaN/Inf loss never reaches the weights, even when the gradient norm happens to be finite.
  s.norm = model_->update(o_.optim, step, std::isfinite(s.loss));
  s.seconds = seconds_since(t0);
  return s;
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
  model_ = std::make_unique<Model>(*backend_, o_.model);
  Model& m = *model_;
  m.init(o_.seed);
  if (o_.resume) load_checkpoint(ckpt_, m, nullptr);
  else if (!o_.init.empty()) init_weights_from(o_.init, m, o_.requantize);
  start_step_ = m.steps_done;
  saved_step_ = o_.resume ? start_step_ : -1;
  std::printf("edgetrain train: %.2fM parameters, mode %s, group %ld, on %s (%s)\n", o_.model.parameter_count() / 1e6,
              mode_name(o_.model.mode), static_cast<long>(o_.model.group_size), backend_->name().c_str(),
              backend_->device_name().c_str());
  if (!c.why.empty()) std::printf("  %s\n", c.why.c_str());
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
    eval0_ = evaluate_split(m, *data_.tokens, data_.val_begin, data_.size, o_.batch, o_.seq, o_.eval_batches);
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
  {
    std::ofstream out(metrics_path_, std::ios::trunc);
    for (auto& l : kept) out << l << "\n";
  }
  metrics_.open(metrics_path_, std::ios::app);
  tty_ = o_.progress && ::isatty(STDERR_FILENO);
  if (eval0_) {
    res_.first_val_loss = static_cast<float>(eval0_->loss);
    val_curve_.push_back({0, eval0_->loss});
    metrics_ << nlohmann::json{{"step", 0}, {"val_loss", eval0_->loss}, {"val_ppl", eval0_->perplexity}}.dump() << "\n";
  }
}

// Steps until the budget, the time limit or a stop request (TrainOptions::stop, checked between steps: the
// step under way always finishes, so what is saved is a whole step).
void TrainRun::loop() {
  last_step_ = start_step_;
  for (int64_t step = start_step_ + 1; step <= o_.optim.total_steps; ++step) {
    if (step > start_step_ + 1 && stop_signal()) break;  // the first step ran at start-up: record it first
    const StepOutcome s = step == start_step_ + 1 && first_ ? *first_ : train_step(step);
    last_step_ = step;
    if (planning()) step_times_.push_back(s.seconds);
    if (!s.finite()) {
      skip(step, s);
      continue;
    }
    skipped_in_a_row_ = 0;
    ++applied_;
    if (planning()) calibrate(step);  // before record(): the cadence needs the total
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
  window_time_ += s.seconds;
  train_curve_.push_back({step, s.loss});
  res_.last_train_loss = static_cast<float>(s.loss);
  const double lr = o_.optim.lr_at(step);
  nlohmann::json line = {{"step", step},
                         {"loss", s.loss},
                         {"lr", lr},
                         {"grad_norm", s.norm},
                         {"step_s", s.seconds},
                         {"tokens", step * tokens_per_step_},
                         {"elapsed_s", seconds_since(t_start_)},
                         {"rss_mb", rss_mb("VmRSS:")}};
  const bool do_eval = cadence_.evaluates(step);
  const bool out_of_time = o_.time_limit_s > 0 && seconds_since(t_start_) > o_.time_limit_s;
  if (do_eval || out_of_time) {
    EvalResult e = evaluate_split(*model_, *data_.tokens, data_.val_begin, data_.size, o_.batch, o_.seq, o_.eval_batches);
    line["val_loss"] = e.loss;
    line["val_ppl"] = e.perplexity;
    val_curve_.push_back({step, e.loss});
    res_.last_val_loss = static_cast<float>(e.loss);
  }
  if (window_time_ > 0) tok_s_ = window_tokens_ / window_time_;
  line["tokens_per_s"] = tok_s_;
  metrics_ << line.dump() << "\n";
  metrics_.flush();
  const double elapsed = seconds_since(t_start_);
  const long total = static_cast<long>(o_.optim.total_steps);
  const double eta =
      tok_s_ > 0 ? static_cast<double>((o_.optim.total_steps - step) * tokens_per_step_) / tok_s_ : 0;
  if (tty_ && planning()) {
    std::fprintf(stderr, "\r  step %ld  loss %.3f  lr %.2e  %.0f tok/s  (measuring the step time)   ", static_cast<long>(step),
                 s.loss, lr, tok_s_);
  } else if (tty_) {
    const int width = 24, fill = static_cast<int>(width * step / o_.optim.total_steps);
    std::fprintf(stderr, "\r  [%s%s] step %ld/%ld  loss %.3f  lr %.2e  %.0f tok/s  eta %s   ",
                 std::string(static_cast<size_t>(fill), '#').c_str(),
                 std::string(static_cast<size_t>(width - fill), '.').c_str(), static_cast<long>(step), total, s.loss,
                 lr, tok_s_, fmt_duration(eta).c_str());
  }
  if (!tty_ && (cadence_.logs(step) || do_eval))
    std::printf("  step %ld/%ld  loss %.4f  lr %.2e  grad norm %.3f  %.0f tok/s  %s elapsed\n", static_cast<long>(step),
                total, s.loss, lr, s.norm, tok_s_, fmt_duration(elapsed).c_str());
  if (line.contains("val_loss")) {
    end_progress_line();
    std::printf("  step %ld: validation loss %.4f (perplexity %.2f)\n", static_cast<long>(step),
                line["val_loss"].get<double>(), line["val_ppl"].get<double>());
  }
  std::fflush(stdout);
  return out_of_time;
}

// A time budget's calibration: the plan is made once the calibration steps are measured, or earlier when
// even one more step would not fit.
void TrainRun::calibrate(int64_t step) {
  const double elapsed = seconds_since(t_budget_);
  if (step - start_step_ >= budget_calibration_steps(o_) || elapsed + step_times_.back() + eval0_s_ > o_.time_budget_s)
    plan(step, true);
}

// Fixes the total from the measured times: the median of the steps after the first (which records the
// programs), or the first alone; the step-0 evaluation (which records the evaluation program: on the safe
// side); and, with write_checkpoint, a checkpoint written now, which times a save and holds the plan should
// the run stop early (written again if the save's time changes the total).
void TrainRun::plan(int64_t step, bool write_checkpoint) {
  planned_ = true;
  std::vector<double> t(step_times_.size() > 1 ? step_times_.begin() + 1 : step_times_.begin(), step_times_.end());
  std::sort(t.begin(), t.end());
  const double step_s = t.empty() ? 0 : t[t.size() / 2];
  BudgetPlan p{o_.time_budget_s, seconds_since(t_budget_), step_s, eval0_s_, 0, o_.eval_every, o_.checkpoint_every,
               o_.optim.total_steps};
  int64_t total = p.total_steps(step);
  o_.optim.total_steps = total;  // what checkpoints record
  if (write_checkpoint && total > step) {  // the last step saves anyway
    const auto t_save = Clock::now();
    save(step);
    p.save_s = seconds_since(t_save);
    p.elapsed_s = seconds_since(t_budget_);
    total = p.total_steps(step);
    if (total != o_.optim.total_steps) {
      o_.optim.total_steps = total;
      save(step);
    }
  }
  cadence_.total_steps = total;
  end_progress_line();
  std::printf("  time budget %s: after %ld steps (%s), %.1f ms per step, %.0f ms per evaluation, %.0f ms per "
              "checkpoint: %ld steps in all (warmup %ld, cosine to step %ld)\n",
              format_duration(o_.time_budget_s).c_str(), static_cast<long>(step), format_duration(p.elapsed_s).c_str(),
              step_s * 1e3, eval0_s_ * 1e3, p.save_s * 1e3, static_cast<long>(total),
              static_cast<long>(std::min(o_.optim.warmup_steps, total)), static_cast<long>(total));
  std::fflush(stdout);
}

// A failed save (disk full, file size limit, I/O error) stops the run; the atomic writer has left the
// previous checkpoint as it was, and the message says so.
void TrainRun::save(int64_t at_step) {
  if (planning()) plan(at_step, false);  // every checkpoint holds a fixed total
  const bool had = fs::exists(ckpt_);
  try {
    save_checkpoint(ckpt_, *model_, {{"train_options", options_record(o_)}, {"tokenizer", o_.tokenizer}});
    saved_step_ = model_->steps_done;
  } catch (const Error& e) {
    end_progress_line();
    fail_kind(e.kind(), "train: step ", at_step, ": writing the checkpoint failed (", e.what(), "). ",
         had ? "The previous checkpoint '" + ckpt_ + "' is intact (step " + meta_step(ckpt_) + ")"
             : std::string("No checkpoint had been written yet"),
         "; free space, then continue with --resume");
  }
}

// After skipped steps: a checkpoint holding the last step taken, when there is something to keep — trained
// weights, or a checkpoint that would otherwise make --resume repeat the skipped steps.
void TrainRun::save_if_behind() {
  if (model_->steps_done > saved_step_ && (applied_ > 0 || saved_step_ >= 0)) save(model_->steps_done);
}

std::string TrainRun::last_good() const {
  return fs::exists(ckpt_) ? "the last good checkpoint is '" + ckpt_ + "' (step " + meta_step(ckpt_) + ")"
                           : std::string("no checkpoint has been written");
}

// The result's figures and files, and the loss curve: whichever way the run ends.
void TrainRun::close_result() {
  budget_used_s_ = seconds_since(t_budget_);
  res_.steps = last_step_;
  res_.seconds = seconds_since(t_start_);
  res_.tokens_per_s = tok_s_;
  res_.checkpoint = ckpt_;
  res_.metrics = metrics_path_;
  res_.curve = o_.out_dir + "/loss.svg";
  write_loss_svg(res_.curve, train_curve_, val_curve_,
                 "edgetrain " + std::string(mode_name(o_.model.mode)) + ": loss on " +
                     fs::path(o_.corpus).filename().string());
}

TrainResult TrainRun::finish() {
  if (const int sig = stop_signal()) return finish_stopped(sig);
  if (skipped_in_a_row_ > 0) {  // the run ended on skipped steps
    save_if_behind();
    if (applied_ == 0)
      fail_kind(ErrorKind::numeric, "train: every step of this run (", start_step_ + 1, "..", last_step_,
           ") had a non-finite loss or gradient norm and was skipped: nothing was trained; ", last_good(),
           ". Lower --lr, set --grad-clip, or check the corpus");
    std::printf("  warning: the last %ld steps were skipped (non-finite loss or gradient norm); the checkpoint holds "
                "step %ld (skipped steps change no weight; --resume continues after them)\n",
                static_cast<long>(skipped_in_a_row_), static_cast<long>(model_->steps_done));
  }
  close_result();
  if (o_.sample_tokens > 0) {
    SampleOptions so;
    so.max_tokens = o_.sample_tokens;
    so.seed = o_.seed;
    std::string text = generate(*model_, *data_.tok, o_.sample_prompt, so);
    res_.sample = o_.out_dir + "/sample.txt";
    std::ofstream(res_.sample) << o_.sample_prompt << text << "\n";
    std::printf("\nSample (prompt \"%s\"):\n%s%s\n\n", o_.sample_prompt.c_str(), o_.sample_prompt.c_str(), text.c_str());
  }
  std::printf("done: %ld steps in %s, %.0f tokens/s, final validation loss %.4f, peak memory %.0f MiB\n",
              static_cast<long>(res_.steps), fmt_duration(res_.seconds).c_str(), res_.tokens_per_s, res_.last_val_loss,
              rss_mb("VmHWM:"));
  if (o_.time_budget_s > 0)
    std::printf("  time budget %s; the run took %s from its start to its last checkpoint\n",
                format_duration(o_.time_budget_s).c_str(), format_duration(budget_used_s_).c_str());
  std::printf("  checkpoint %s\n  metrics    %s\n  curve      %s\n", ckpt_.c_str(), metrics_path_.c_str(),
              res_.curve.c_str());
  if (!res_.sample.empty()) std::printf("  sample     %s\n", res_.sample.c_str());
  return res_;
}

// Stopped by a signal between steps: the checkpoint holds the last step taken (written atomically: a second
// signal during the save, which ends the process, leaves the previous file whole), the curve is written, the
// sample is not; the message says how to continue.
TrainResult TrainRun::finish_stopped(int signal) {
  save_if_behind();
  res_.stopped_by = signal;
  close_result();
  const char* name = signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "a stop request";
  if (saved_step_ < 0) {
    std::printf("stopped by %s after step %ld: nothing trained to save (no checkpoint written)\n", name,
                static_cast<long>(last_step_));
  } else if (last_step_ >= o_.optim.total_steps) {  // during the last evaluation or the sample
    std::printf("stopped by %s after the last step (%ld): checkpoint %s holds it; no sample written\n", name,
                static_cast<long>(last_step_), ckpt_.c_str());
  } else {
    // --steps too: without it the CLI's default budget would apply when larger than the run's.
    std::string resume = "edgetrain train --resume --out " + o_.out_dir + " --steps " +
                         std::to_string(o_.optim.total_steps);
    if (o_.backend != "auto") resume += " --backend " + o_.backend;
    if (!o_.device.empty()) resume += " --device " + o_.device;
    std::printf("stopped by %s after step %ld of %ld: checkpoint %s holds step %ld. Continue with:\n  %s\n", name,
                static_cast<long>(last_step_), static_cast<long>(o_.optim.total_steps), ckpt_.c_str(),
                static_cast<long>(saved_step_), resume.c_str());
  }
  std::fflush(stdout);
  return res_;
}

}  // namespace
}  // namespace edgetrain::training

namespace edgetrain {

TrainResult train(const TrainOptions& opts) { return training::TrainRun(opts).run(); }

}  // namespace edgetrain
