// The first phase of a training run: the options it will actually use — checked, restored from the
// checkpoint on --resume, the model shape taken from the file on --init.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "edgetrain/backends.h"
#include "edgetrain/checkpoint.h"
#include "edgetrain/interop.h"
#include "train/run.h"

namespace edgetrain::training {

void validate_options(const TrainOptions& o) {
  ET_CHECK(!o.corpus.empty() || !o.data.empty(), "train: --corpus (a text) or --data (JSONL samples) is required");
  ET_CHECK(o.corpus.empty() || o.data.empty(), "train: --corpus and --data cannot be combined: train on a text or "
           "on samples");
  if (o.data.empty()) {
    ET_CHECK(o.val_data.empty(), "train: --val-data needs --data");
    ET_CHECK(o.chat_template.empty(), "train: --chat-template applies to --data samples");
  }
  train_on_from_name(o.train_on);  // name the bad value before any file is read
  batching_from_name(o.batching);
  ET_CHECK(o.batch >= 1, "train: --batch must be >= 1, got ", o.batch);
  ET_CHECK(o.seq >= 0, "train: --seq must be >= 1, got ", o.seq);
  ET_CHECK(o.accum >= 1, "train: --accum must be >= 1, got ", o.accum);
  ET_CHECK(o.optim.total_steps >= 1, "train: --steps must be >= 1, got ", o.optim.total_steps);
  ET_CHECK(o.optim.lr > 0 && std::isfinite(o.optim.lr), "train: --lr must be > 0, got ", o.optim.lr);
  ET_CHECK(o.optim.warmup_steps >= 0, "train: --warmup must be >= 0, got ", o.optim.warmup_steps);
  ET_CHECK(o.optim.grad_clip >= 0, "train: --grad-clip must be >= 0 (0 disables), got ", o.optim.grad_clip);
  ET_CHECK(o.optim.weight_decay >= 0, "train: --weight-decay must be >= 0, got ", o.optim.weight_decay);
  ET_CHECK(o.optim.beta1 >= 0 && o.optim.beta1 < 1, "train: --beta1 must be in [0, 1), got ", o.optim.beta1);
  ET_CHECK(o.optim.beta2 >= 0 && o.optim.beta2 < 1, "train: --beta2 must be in [0, 1), got ", o.optim.beta2);
  ET_CHECK(o.optim.eps > 0 && std::isfinite(o.optim.eps), "train: AdamW eps must be > 0, got ", o.optim.eps);
  ET_CHECK(o.time_limit_s >= 0 && std::isfinite(o.time_limit_s), "train: --time-limit must be >= 0 (0 = none), got ",
           o.time_limit_s);
  ET_CHECK(o.time_budget_s >= 0 && std::isfinite(o.time_budget_s), "train: --time must be > 0, got ", o.time_budget_s);
  if (o.time_budget_s > 0) {
    ET_CHECK(o.time_limit_s == 0, "train: --time and --time-limit cannot be combined: --time fits the schedule to the "
             "time, --time-limit cuts a fixed schedule short");
    ET_CHECK(o.optim.warmup_steps >= 1, "train: --time needs --warmup >= 1: the total is fixed after the first steps, "
             "and their learning rates must not depend on it");
  }
  ET_CHECK(o.threads >= 0, "train: --threads must be >= 0 (0 = all cores), got ", o.threads);
  ET_CHECK(o.sample_tokens >= 0, "train: --sample-tokens must be >= 0 (0 = none), got ", o.sample_tokens);
  ET_CHECK(o.optim.min_lr_ratio >= 0 && o.optim.min_lr_ratio <= 1, "train: --min-lr-ratio must be in [0, 1]");
  ET_CHECK(o.eval_every >= 1 && o.eval_batches >= 1 && o.checkpoint_every >= 1 && o.log_every >= 1,
           "train: --eval-every, --eval-batches, --checkpoint-every and --log-every must be >= 1");
  ET_CHECK(o.val_fraction > 0 && o.val_fraction < 0.5, "train: --val-fraction must be in (0, 0.5), got ", o.val_fraction);
  ET_CHECK(!(o.resume && !o.init.empty()), "train: --resume and --init cannot be combined");
  ET_CHECK(o.max_skipped_steps >= 1, "train: --max-skipped-steps must be >= 1, got ", o.max_skipped_steps);
  ET_CHECK(!o.requantize || !o.init.empty(), "train: --requantize applies to the 4-bit weights of --init's file, "
           "and there is no --init");
  ET_CHECK(!o.requantize || o.model.mode != TrainMode::fp32, "train: --requantize: mode fp32 has no 4-bit weights");
  ET_CHECK(o.adapter.empty() || (!o.init.empty() && !o.resume), "train: --adapter continues a LoRA adapter on the "
           "base model of --init (--resume continues the checkpoint's own adapters)");
  ET_CHECK(o.adapter.empty() || o.model.mode == TrainMode::qlora, "train: --adapter trains a LoRA adapter: use "
           "--mode qlora, not ", mode_name(o.model.mode));
  check_precision_flag(o.precision);
  ET_CHECK(o.loss_scale > 0 && std::isfinite(o.loss_scale), "train: --loss-scale must be > 0, got ", o.loss_scale);
  ET_CHECK(o.loss_scale_interval >= 1, "train: --loss-scale-interval must be >= 1, got ", o.loss_scale_interval);
  parse_backend_spec(o.backend);  // names the bad entry before any file or device is touched
}

std::string options_record(const TrainOptions& o) {
  const nlohmann::json j = {
      {"corpus", o.corpus},           {"tokenizer", o.tokenizer},   {"batch", o.batch},
      {"seq", o.seq},                 {"accum", o.accum},           {"seed", o.seed},
      {"val_fraction", o.val_fraction}, {"lr", o.optim.lr},         {"min_lr_ratio", o.optim.min_lr_ratio},
      {"warmup_steps", o.optim.warmup_steps}, {"total_steps", o.optim.total_steps},
      {"decay_from_step", o.optim.decay_from_step}, {"decay_from_progress", o.optim.decay_from_progress},
      {"beta1", o.optim.beta1},       {"beta2", o.optim.beta2},     {"eps", o.optim.eps},
      {"weight_decay", o.optim.weight_decay}, {"grad_clip", o.optim.grad_clip},
      {"time_budget_s", o.time_budget_s},  // what planned total_steps (0: none); --resume does not plan again
      {"data", o.data},               {"val_data", o.val_data},     {"chat_template", o.chat_template},
      {"train_on", o.train_on},       {"batching", o.batching}};
  return j.dump();
}

void restore_options(TrainOptions& o, const std::string& record) {
  const nlohmann::json j = nlohmann::json::parse(record);
  o.corpus = j.at("corpus").get<std::string>();
  o.tokenizer = j.at("tokenizer").get<std::string>();
  o.batch = j.at("batch"), o.seq = j.at("seq"), o.accum = j.at("accum"), o.seed = j.at("seed");
  o.val_fraction = j.at("val_fraction");
  o.optim.lr = j.at("lr"), o.optim.min_lr_ratio = j.at("min_lr_ratio"), o.optim.warmup_steps = j.at("warmup_steps");
  o.optim.total_steps = j.at("total_steps"), o.optim.beta1 = j.at("beta1"), o.optim.beta2 = j.at("beta2");
  o.optim.eps = j.at("eps"), o.optim.weight_decay = j.at("weight_decay"), o.optim.grad_clip = j.at("grad_clip");
  // A time budget's last re-plan (absent before re-planning existed: the plain cosine).
  o.optim.decay_from_step = j.value("decay_from_step", int64_t{0});
  o.optim.decay_from_progress = j.value("decay_from_progress", 0.0);
  // Checkpoints from before --data have none of these: a corpus run.
  o.data = j.value("data", ""), o.val_data = j.value("val_data", ""), o.chat_template = j.value("chat_template", "");
  o.train_on = j.value("train_on", "completion"), o.batching = j.value("batching", "pad");
}

std::string checkpoint_path(const TrainOptions& o) { return o.out_dir + "/checkpoint.safetensors"; }

double parse_duration(const std::string& text, const std::string& flag) {
  auto bad = [&]() {
    fail("train: ", flag, " '", text, "': expected a duration like 4m, 90s, 1h30m or 2m30s, or a number of seconds");
  };
  double total = 0;
  size_t at = 0;
  bool any = false;
  while (at < text.size()) {
    size_t used = 0;
    double v = 0;
    try {
      if (!std::isdigit(static_cast<unsigned char>(text[at])) && text[at] != '.') bad();
      v = std::stod(text.substr(at), &used);
    } catch (const std::logic_error&) {
      bad();
    }
    at += used;
    double unit = 1;
    if (at < text.size()) {
      const char u = text[at++];
      unit = u == 'h' ? 3600 : u == 'm' ? 60 : u == 's' ? 1 : 0;
      if (unit == 0) bad();
    } else if (any) {
      bad();  // "4m30": the last number needs its unit too
    }
    total += v * unit;
    any = true;
  }
  if (!any || !std::isfinite(total)) bad();
  ET_CHECK(total > 0, "train: ", flag, " must be > 0, got '", text, "'");
  return total;
}

std::string format_duration(double s) {
  char buf[32];
  if (s < 60) std::snprintf(buf, sizeof buf, "%.1fs", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s / 60), static_cast<int>(s) % 60);
  else std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s / 3600), static_cast<int>(s / 60) % 60);
  return buf;
}

int64_t BudgetPlan::total_steps(int64_t step) const {
  const double per_step = step_s + eval_s / static_cast<double>(eval_every) +
                          save_s / static_cast<double>(checkpoint_every);
  // The last step evaluates and saves; a margin of 0.5% (at most 2 s) keeps the noise of the last steps'
  // times and the process's own start and exit inside the budget.
  const double margin = std::min(2.0, 0.005 * budget_s);
  const double left = budget_s - margin - elapsed_s - eval_s - save_s - end_s;
  const double fit = per_step > 0 ? std::floor(left / per_step) : 0;
  const int64_t more = fit > 0 ? static_cast<int64_t>(std::min(fit, 1e15)) : 0;
  return std::max(step, std::min(max_steps, step + more));
}

int64_t budget_calibration_steps(const TrainOptions& o) { return std::min<int64_t>(30, o.optim.warmup_steps); }

TrainOptions resolve_options(const TrainOptions& given) {
  TrainOptions o = given;
  // Before either file is read: the error is the combination, not what --resume finds.
  ET_CHECK(!(o.resume && !o.init.empty()), "train: --resume and --init cannot be combined");
  ET_CHECK(!(o.resume && !o.adapter.empty()), "train: --resume and --adapter cannot be combined (the checkpoint holds "
           "its adapters)");
  const std::string ckpt = checkpoint_path(o);
  if (o.resume) {
    ET_CHECK(o.time_budget_s == 0, "train: --time plans the schedule of a fresh run; --resume continues the "
             "checkpoint's (use --steps to extend it)");
    ET_CHECK(std::filesystem::exists(ckpt), "train: --resume: no checkpoint at '", ckpt, "'");
    o.model = read_checkpoint_config(ckpt);
    std::map<std::string, std::string> meta = read_checkpoint_metadata(ckpt);
    ET_CHECK(meta.count("train_options"), "train: --resume: checkpoint '", ckpt, "' has no training options");
    restore_options(o, meta["train_options"]);
    o.optim.total_steps = std::max(o.optim.total_steps, given.optim.total_steps);
  } else if (!o.init.empty()) {
    ET_CHECK(!is_lora_adapter(o.init), "train: --init '", o.init, "' is a LoRA adapter: give its base model with --init "
             "and the adapter with --adapter (and --mode qlora)");
    ModelConfig c = is_gguf_file(o.init)   ? read_gguf_config(o.init, o.model.mode, o.model.group_size)
                    : is_hf_folder(o.init) ? read_hf_config(o.init, o.model.mode, o.model.group_size)
                                           : read_checkpoint_config(o.init);
    c.mode = o.model.mode;  // the mode may change (e.g. fp32 -> qat, qat -> qlora)
    c.group_size = o.model.group_size;
    c.lora_rank = o.model.lora_rank, c.lora_alpha = o.model.lora_alpha, c.lora_targets = o.model.lora_targets;
    // --adapter: the adapter's rank, alpha and targets (checked against --mode by validate_options below).
    if (!o.adapter.empty() && o.model.mode == TrainMode::qlora) c = with_lora_adapter(c, read_lora_adapter(o.adapter));
    o.model = c;
  }
  // --data: seq 0 stays until the samples are read (open_samples fits it to the longest one).
  if (o.seq == 0 && o.data.empty()) o.seq = std::min<int64_t>(128, o.model.max_seq);
  validate_options(o);
  return o;
}

}  // namespace edgetrain::training
