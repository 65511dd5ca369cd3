// The end of a training run (train_run.h): a time budget's plan, checkpoints, the summary, the loss curve and
// the sample, and a run stopped by a signal.
#include <unistd.h>

#include <algorithm>
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
namespace {

namespace fs = std::filesystem;

// The step of an existing checkpoint, for messages ("?" when unreadable).
std::string meta_step(const std::string& path) {
  try {
    auto m = read_checkpoint_metadata(path);
    return m.count("step") ? m["step"] : "?";
  } catch (const Error&) {
    return "?";
  }
}

// The median of a run of step times (0 for none).
double median_seconds(std::vector<double>::const_iterator begin, std::vector<double>::const_iterator end) {
  std::vector<double> t(begin, end);
  if (t.empty()) return 0;
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

}  // namespace

// A field of /proc/self/status in MiB (VmRSS, VmHWM).
double rss_mb(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field, 0) == 0) return std::stod(line.substr(std::strlen(field))) / 1024.0;
  return 0;
}

// A time budget's calibration: the plan is made once the calibration steps are measured, or earlier when
// even one more step would not fit.
void TrainRun::calibrate(int64_t step) {
  const double elapsed = seconds_since(t_budget_);
  if (step - start_step_ >= budget_calibration_steps(o_) || elapsed + step_times_.back() + eval0_s_ > o_.time_budget_s)
    plan(step, true);
}

// The plan's arithmetic at this moment, with steps of step_s and the costs measured so far (a checkpoint's
// save_s_ is 0 until the plan's own checkpoint times one).
BudgetPlan TrainRun::budget_plan(double step_s) const {
  return {o_.time_budget_s, seconds_since(t_budget_), step_s, eval0_s_, save_s_, o_.eval_every, o_.checkpoint_every,
          max_steps_, end_s_};
}

// Fixes the total from the measured times: the median of the steps after the first (which records the
// programs), or the first alone; the step-0 evaluation (which records the evaluation program: on the safe
// side); and, with write_checkpoint, a checkpoint written now, which times a save and holds the plan should
// the run stop early (written again if the save's time changes the total).
void TrainRun::plan(int64_t step, bool write_checkpoint) {
  planned_ = true;
  max_steps_ = o_.optim.total_steps;
  const double step_s =
      median_seconds(step_times_.size() > 1 ? step_times_.begin() + 1 : step_times_.begin(), step_times_.end());
  end_s_ = sample_seconds();
  BudgetPlan p = budget_plan(step_s);
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
  plan_step_ = step, save_s_ = p.save_s;
  end_progress_line();
  std::printf("  time budget %s: after %ld steps (%s), %.1f ms per step, %.0f ms per evaluation, %.0f ms per "
              "checkpoint, %.0f ms for the sample: %ld steps in all (warmup %ld, cosine to step %ld)\n",
              format_duration(o_.time_budget_s).c_str(), static_cast<long>(step), format_duration(p.elapsed_s).c_str(),
              step_s * 1e3, eval0_s_ * 1e3, p.save_s * 1e3, end_s_ * 1e3, static_cast<long>(total),
              static_cast<long>(std::min(o_.optim.warmup_steps, total)), static_cast<long>(total));
  std::fflush(stdout);
}

// The plan again every kReplanSteps steps, from the time now and the median of the last kWindow steps (the
// evaluations and checkpoints as at the plan; a window of several re-plans, so that a few slow steps do not
// swing the total): the first steps' times alone run long or short on a machine whose speed changes
// (measured on a 2-core Xeon: 98 ms per step planned from the first 30, 115 ms later, 4m41s for a 4m
// budget). The rest of the cosine is anchored at this step (OptimConfig::decay_from_step), so the learning
// rate stays continuous; checkpoints record the anchor, and --resume continues the last plan.
void TrainRun::replan(int64_t step) {
  constexpr int64_t kReplanSteps = 50, kWindow = 200;
  if (step - plan_step_ < kReplanSteps || (step - plan_step_) % kReplanSteps != 0 || step >= o_.optim.total_steps)
    return;
  const int64_t window = std::min<int64_t>({kWindow, step - plan_step_, static_cast<int64_t>(step_times_.size())});
  const double per_step = median_seconds(step_times_.end() - window, step_times_.end());
  const BudgetPlan p = budget_plan(per_step);
  const double elapsed = p.elapsed_s;
  const int64_t total = p.total_steps(step), old = o_.optim.total_steps;
  if (total == old) return;
  OptimConfig& opt = o_.optim;
  opt.decay_from_progress = step > opt.warmup_steps ? opt.decay_progress(step) : 0.0;
  opt.decay_from_step = step;
  opt.total_steps = total;
  cadence_.total_steps = total;
  if (std::abs(static_cast<double>(total - old)) >= 0.05 * static_cast<double>(old) || total == step) {
    end_progress_line();
    std::printf("  time budget %s: at step %ld (%s), %.1f ms per step lately: %ld steps in all (was %ld)\n",
                format_duration(o_.time_budget_s).c_str(), static_cast<long>(step), format_duration(elapsed).c_str(),
                per_step * 1e3, static_cast<long>(total), static_cast<long>(old));
    std::fflush(stdout);
  }
}

// A failed save (disk full, file size limit, I/O error) stops the run; the atomic writer has left the
// previous checkpoint as it was, and the message says so.
void TrainRun::save(int64_t at_step) {
  if (planning()) plan(at_step, false);  // every checkpoint holds a fixed total
  if (!root_) {  // rank 0 writes the checkpoint; every rank holds the same weights
    saved_step_ = model_->steps_done;
    return;
  }
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

// The run's sample of max_tokens: a reply to the first validation sample (chat data), else a continuation of
// the sample prompt; `prompt` gets the text it continues.
std::string TrainRun::sample(int64_t max_tokens, std::string& prompt) {
  SampleOptions so;
  so.max_tokens = max_tokens;
  so.seed = o_.seed;
  if (data_.samples()) {
    prompt = render_chat_text(data_.chat_template, data_.sample_messages, true);
    return generate_reply(*model_, *data_.tok, data_.chat_template, data_.sample_messages, so);
  }
  prompt = o_.sample_prompt;
  return generate(*model_, *data_.tok, o_.sample_prompt, so);
}

// What the run's end takes besides its last evaluation and checkpoint: the sample, timed on trials — one
// token twice (the first records the generation program), then 17 — and taken to sample_tokens, so that a
// budget holds the whole run. The trials change no weight and no data order.
double TrainRun::sample_seconds() {
  if (o_.sample_tokens <= 0 || !root_) return 0;
  std::string prompt;
  auto timed = [&](int64_t tokens) {
    const auto t0 = Clock::now();
    sample(tokens, prompt);
    return seconds_since(t0);
  };
  const double first = timed(1), one = timed(1), more = timed(17);
  return first + std::max(0.0, more - one) / 16.0 * static_cast<double>(o_.sample_tokens - 1);
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
  if (root_)
    write_loss_svg(res_.curve, train_curve_, val_curve_,
                 "edgetrain " + std::string(mode_name(o_.model.mode)) + ": loss on " +
                     fs::path(data_.samples() ? o_.data : o_.corpus).filename().string());
}

TrainResult TrainRun::finish() {
  if (const int sig = stop_request()) return finish_stopped(sig);
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
  if (o_.sample_tokens > 0 && root_) {
    std::string prompt;
    const std::string text = sample(o_.sample_tokens, prompt);
    res_.sample = o_.out_dir + "/sample.txt";
    std::ofstream(res_.sample) << prompt << text << "\n";
    if (data_.samples())
      std::printf("\nSample (the first validation sample's prompt, chat template %s):\n%s%s\n\n",
                  data_.chat_template.c_str(), prompt.c_str(), text.c_str());
    else
      std::printf("\nSample (prompt \"%s\"):\n%s%s\n\n", prompt.c_str(), prompt.c_str(), text.c_str());
  }
  std::printf("done: %ld steps in %s, %.0f tokens/s, final validation loss %.4f, peak memory %.0f MiB\n",
              static_cast<long>(res_.steps), format_duration(res_.seconds).c_str(), res_.tokens_per_s, res_.last_val_loss,
              rss_mb("VmHWM:"));
  if (comm_->size() > 1 && applied_ > 0)
    std::printf("  data parallel: %.1f ms per step summing the gradients across the ranks (download, all-reduce, "
                "upload) of %.1f ms per step\n", 1e3 * reduce_time_ / static_cast<double>(applied_),
                1e3 * window_time_ / std::max(1.0, window_tokens_ / static_cast<double>(tokens_per_step_)));
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
    if (o_.precision != "auto") resume += " --precision " + o_.precision;
    if (!o_.device.empty()) resume += " --device " + o_.device;
    std::printf("stopped by %s after step %ld of %ld: checkpoint %s holds step %ld. Continue with:\n  %s\n", name,
                static_cast<long>(last_step_), static_cast<long>(o_.optim.total_steps), ckpt_.c_str(),
                static_cast<long>(saved_step_), resume.c_str());
  }
  std::fflush(stdout);
  return res_;
}
}  // namespace edgetrain::training
