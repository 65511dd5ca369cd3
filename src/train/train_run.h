// The training run behind train(): one object whose phases read top to bottom. trainer.cpp holds the
// start-up and the step loop; trainer_end.cpp the time budget's plan, the checkpoints and the end of the run.
// Internal to src/train (the public entry point is edgetrain/trainer.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "edgetrain/backends.h"
#include "edgetrain/dist.h"
#include "train/run.h"

namespace edgetrain::training {

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
double rss_mb(const char* field);  // a field of /proc/self/status ("VmRSS:", "VmHWM:") in MiB

// One training step: its loss (summed over the micro-batches and ranks), gradient norm, the loss scale it ran
// at (fp16) and wall time, and what every rank agreed on at its end: a stop request (the signal's number) and
// whether --time-limit ran out (rank 0's clock), so all ranks leave the loop after the same step.
struct StepOutcome {
  double loss = 0;
  float norm = 0;
  float loss_scale = 1;
  double seconds = 0;
  double reduce_seconds = 0;  // of `seconds`: the gradient sum across ranks (download, all-reduce, upload)
  int64_t trained = 0;        // labels >= 0 of the step, all ranks (a corpus: every token)
  int stop = 0;
  bool out_of_time = false;
  bool finite() const { return std::isfinite(loss) && std::isfinite(norm); }
};
// TEST-ONLY fault injection, EDGETRAIN_TRAIN_FAULT=KIND@STEP[,STEP...]:
//   nan_loss@3,4  the loss of steps 3 and 4 becomes NaN once their gradients are computed, as an overflowing
//                 forward pass would, so tests reach the skipped-step paths at chosen steps;
//   overflow@3,4  one gradient element of steps 3 and 4 becomes +inf before the update, as an fp16 overflow
//                 of the scaled gradients would, so tests reach the loss scaler's skip and back-off.
// The other steps train normally.
struct Faults {
  std::set<int64_t> nan_loss, overflow;
  std::set<int64_t> slow;  // from its first step on, every step takes 30 ms longer (a machine that slows down)
};
Faults injected_faults();

class TrainRun {
 public:
  explicit TrainRun(const TrainOptions& given)
      : o_(resolve_options(given)), cadence_(o_), faults_(injected_faults()) {
    if (o_.comm == nullptr) own_comm_ = one_process();
    comm_ = o_.comm != nullptr ? o_.comm : own_comm_.get();
    root_ = comm_->rank() == 0;
    const int64_t ranks = comm_->size();
    ET_CHECK(o_.batch % ranks == 0, "train: --batch ", o_.batch, " cannot be split over ", ranks,
             " ranks: use a multiple of ", ranks, " (the batch is the global one; each rank takes batch / ranks "
             "sequences of every micro-batch)");
    ET_CHECK(o_.time_budget_s <= 0 || ranks == 1, "train: a time budget (--time) is not supported with ", ranks,
             " ranks: each would plan its own total; give --steps");
    rank_batch_ = o_.batch / ranks;
    rank_first_ = rank_batch_ * comm_->rank();
  }

  TrainResult run() {  // the options were resolved by the constructor
    t_budget_ = Clock::now();
    // Rank 0 opens the data first (it may write the token cache and the tokenizer copy), then the others.
    if (!root_) comm_->barrier("start-up");
    data_ = open_data(o_);
    if (root_) comm_->barrier("start-up");
    check_same_job(*comm_, o_, data_);
    start();
    open_metrics();
    loop();
    return finish();
  }

 private:
  StepOutcome train_step(int64_t step);
  EvalResult evaluate();
  void start();
  void start_on(const BackendCandidate& c);
  void open_metrics();
  void loop();
  void skip(int64_t step, const StepOutcome& s);
  int stop_signal() const { return o_.stop != nullptr ? o_.stop->load() : 0; }
  // The stop request every rank acts on: this process's signal, or with several ranks the one they agreed on
  // at the end of the last step (a rank leaving the loop alone would leave the others waiting).
  int stop_request() const { return comm_->size() == 1 ? stop_signal() : agreed_stop_; }
  bool record(int64_t step, const StepOutcome& s);
  void save(int64_t at_step);
  bool planning() const { return o_.time_budget_s > 0 && !planned_; }
  void calibrate(int64_t step);
  void plan(int64_t step, bool write_checkpoint);
  void replan(int64_t step);
  BudgetPlan budget_plan(double step_s) const;
  std::string sample(int64_t max_tokens, std::string& prompt);
  double sample_seconds();
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
  std::unique_ptr<Communicator> own_comm_;  // one process, when the options bring none
  Communicator* comm_ = nullptr;
  bool root_ = true;                        // rank 0: writes the files and prints
  int64_t rank_batch_ = 0, rank_first_ = 0; // this rank's windows of each micro-batch
  int agreed_stop_ = 0;
  double reduce_time_ = 0;  // seconds spent summing gradients across ranks, over the applied steps
  const Faults faults_;  // EDGETRAIN_TRAIN_FAULT
  std::string ckpt_, metrics_path_;
  RunData data_;
  int64_t tokens_per_step_ = 0;
  std::vector<int32_t> tokens_, labels_, positions_;

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
  // The plan's own measurements, for replan: its step, a checkpoint's time, the most steps allowed.
  int64_t plan_step_ = 0, max_steps_ = 0;
  double save_s_ = 0, end_s_ = 0;

  // The loop.
  std::ofstream metrics_;
  std::vector<std::pair<int64_t, double>> train_curve_, val_curve_;
  bool tty_ = false;
  TrainResult res_;
  double window_tokens_ = 0, window_trained_ = 0, window_time_ = 0, tok_s_ = 0, trained_s_ = 0;
  int64_t last_step_ = 0;   // the last step taken
  int64_t saved_step_ = -1;  // the step the run's checkpoint holds (-1: none; on --resume, the one it started at)
  // With --skip-nan-steps: the current run of consecutive skipped steps, and how many steps of this
  // invocation were applied.
  int64_t skipped_in_a_row_ = 0, applied_ = 0;
};

}  // namespace edgetrain::training
