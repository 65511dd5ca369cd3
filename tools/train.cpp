// `edgetrain train`: train or fine-tune a model; every TrainOptions field is a flag. Ctrl-C (SIGINT) and
// SIGTERM (a scheduler's preemption) stop the run after the step under way, with a checkpoint.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>

#include "edgetrain/dist.h"
#include "edgetrain/paths.h"
#include "edgetrain/trainer.h"
#include "tools/commands.h"
#include "train/run.h"

namespace edgetrain::cli {
namespace {

// The main job's time budget: on the 2-core machine of README.md it reaches a validation loss below 1.30.
constexpr double kMainJobSeconds = 240;

std::atomic<int> g_stop{0};  // the signal that asked the run to stop (TrainOptions::stop)
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free flag");

void default_action(int sig) {
  struct sigaction sa {};
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  ::sigaction(sig, &sa, nullptr);
}

// The first SIGINT or SIGTERM only sets the flag (the trainer checks it between steps) and says so; both
// signals get their default action back, so a second one ends the process at once — mid save too, where the
// atomic writer leaves the previous checkpoint whole. Only async-signal-safe calls here.
extern "C" void on_stop_signal(int sig) {
  g_stop.store(sig);
  default_action(SIGINT);
  default_action(SIGTERM);
  static const char kInt[] =
      "\nedgetrain: SIGINT: stopping after this step with a checkpoint (Ctrl-C again quits at once)\n";
  static const char kTerm[] =
      "\nedgetrain: SIGTERM: stopping after this step with a checkpoint (a second signal quits at once)\n";
  const char* msg = sig == SIGINT ? kInt : kTerm;
  const size_t len = sig == SIGINT ? sizeof kInt - 1 : sizeof kTerm - 1;
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, msg, len);
}

void catch_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // the file and device calls under way carry on
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace

Runner add_train(CLI::App& app) {
  auto* sub = app.add_subcommand("train",
      "Train a Llama-style model with 4-bit weights (default: the `mini` preset on the KJV Bible, byte-level,\n"
      "on the best backend present). Writes OUT/checkpoint.safetensors, OUT/metrics.jsonl, OUT/loss.svg and\n"
      "OUT/sample.txt. Examples:\n"
      "  edgetrain train                                   # the main job: mini preset, KJV, 4 minutes (--time 4m)\n"
      "  edgetrain train --time 10m --out runs/long        # the same model, the steps that fit in 10 minutes\n"
      "  edgetrain train --preset small --backend vulkan --steps 2000 --out runs/small\n"
      "  edgetrain train --backend vulkan,cpu              # Vulkan; the CPU if Vulkan fails to start\n"
      "  edgetrain train --resume --out runs/small --steps 4000   # continue exactly where it stopped\n"
      "  edgetrain train --init runs/small/checkpoint.safetensors --mode qlora --corpus my.txt --out runs/ft\n"
      "  edgetrain train --init base.gguf --mode qlora --adapter ft-lora.gguf --corpus my.txt --out runs/ft2\n"
      "Ctrl-C or SIGTERM stops after the current step, writes the checkpoint and prints the --resume command\n"
      "(exit status 130 or 143); a second one quits at once, leaving the previous checkpoint as it was.\n"
      "Data parallel over MPI: `mpirun -n 2 edgetrain train ...` (one process per device: the local rank picks\n"
      "it; --batch is the global batch, split over the ranks; rank 0 writes the files).");
  struct Flags {
    TrainOptions o;
    std::string preset = "mini", config, mode = "qat", time;
    int64_t steps = 1200, group_size = 32, lora_rank = 8;
    float lora_alpha = 16;
    std::string lora_targets = "q,k,v,o";
    bool tied = false, no_progress = false;
    double dist_timeout = 300;
  };
  auto f = std::make_shared<Flags>();
  TrainOptions& o = f->o;
  o.out_dir = "runs/mini";
  o.batch = 16;
  o.seq = 128;
  o.optim.lr = 3e-3f;
  o.optim.warmup_steps = 30;
  o.eval_every = 100;
  sub->add_option("--preset", f->preset, "Model size: tiny, mini (~1M), small (~15M), base (~110M)")->capture_default_str();
  sub->add_option("--config", f->config, "Model config JSON file (fields of ModelConfig; may name a \"preset\")");
  sub->add_option("--mode", f->mode, "qat (4-bit forward, fp32 masters), qlora (frozen 4-bit base + LoRA), fp32")->capture_default_str();
  sub->add_option("--group-size", f->group_size, "q4gsw group size: 32, 64 or 128")->capture_default_str();
  sub->add_option("--lora-rank", f->lora_rank, "LoRA rank (qlora)")->capture_default_str();
  sub->add_option("--lora-alpha", f->lora_alpha, "LoRA alpha (qlora)")->capture_default_str();
  sub->add_option("--lora-targets", f->lora_targets, "LoRA targets among q,k,v,o,gate,up,down")->capture_default_str();
  sub->add_flag("--tied-head", f->tied, "Share the output head with the token embedding");
  sub->add_option("--corpus", o.corpus, "Training text (default: the KJV Bible installed by scripts/setup.sh)");
  sub->add_option("--data", o.data,
                  "Fine-tune on chat / instruction samples instead of a corpus: a JSONL file of\n"
                  "{\"prompt\": ..., \"completion\": ...} or {\"messages\": [{\"role\": ..., \"content\": ...}]} lines");
  sub->add_option("--val-data", o.val_data, "Validation samples (JSONL) for --data (default: its last --val-fraction)");
  sub->add_option("--chat-template", o.chat_template,
                  "With --data: chatml, llama3, llama2[-sys[-bos|-strip]], mistral-v1/v3/v3-tekken/v7/v7-tekken, gemma,\n"
                  "phi3, plain, or a GGUF / tokenizer_config.json / Jinja file to detect it from (default: the\n"
                  "tokenizer's own template, else plain)");
  sub->add_option("--train-on", o.train_on, "With --data: completion (the assistant replies only) or all")
      ->capture_default_str();
  sub->add_option("--batching", o.batching,
                  "With --data: pad (one sample per row); pack (several per row, positions and attention restarting at each sample)")
      ->capture_default_str();
  sub->add_option("--tokenizer", o.tokenizer,
                  "auto (the --init file's own tokenizer, else bytes), bytes, gpt2, a folder with encoder.json +\n"
                  "vocab.bpe, a GGUF file (its tokenizer metadata), or gguf (the --init GGUF file's)")
      ->capture_default_str();
  sub->add_option("--backend", o.backend,
                  "cpu, vulkan or webgpu (that one only: a failure is the error), an ordered list to fall back\n"
                  "through when one fails to start (vulkan,cpu), or auto (the hardware GPUs, then the CPU)")
      ->capture_default_str();
  sub->add_option("--device", o.device, "Device index or name substring (vulkan/webgpu)");
  sub->add_option("--precision", o.precision,
                  "fp32, fp16 (mixed precision: fp16 GEMM operands, fp32 accumulation, fp32 masters and AdamW,\n"
                  "dynamic loss scaling) or auto (fp16 where the device's fp16 GEMMs are faster: tensor cores)")
      ->capture_default_str();
  sub->add_flag("--checkpoint-activations", o.checkpoint_activations,
                "Keep only each block's input in the forward and recompute its activations in the backward:\n"
                "activation memory of one block instead of all, for about one more forward of compute");
  sub->add_option("--loss-scale", o.loss_scale, "fp16: initial loss scale (--resume continues the saved one)")
      ->capture_default_str();
  sub->add_option("--loss-scale-interval", o.loss_scale_interval,
                  "fp16: applied steps in a row after which the loss scale doubles")
      ->capture_default_str();
  sub->add_option("--threads", o.threads, "CPU threads (0 = all cores)")->capture_default_str();
  sub->add_option("--out", o.out_dir, "Output folder")->capture_default_str();
  auto* steps_opt = sub->add_option("--steps", f->steps,
                                    "Total optimizer steps (default 1200; --resume: the checkpoint's; with --time: the\n"
                                    "most the plan may take)");
  auto* time_opt = sub->add_option("--time", f->time,
                                   "Train for this long (4m, 90s, 1h30m; a fresh run): the first steps are timed, then\n"
                                   "the total (and with it the cosine schedule) is set to the steps that fit, said and\n"
                                   "recorded in the checkpoint, and set again every 50 steps from the recent step times\n"
                                   "(the cosine continues where it is). Default for the main job (no --steps, --config,\n"
                                   "--corpus, --init or --resume; the mini preset): 4m");
  sub->add_option("--batch", o.batch, "Sequences per micro-batch")->capture_default_str();
  auto* seq_opt = sub->add_option("--seq", o.seq, "Tokens per sequence (default 128, at most the model's max_seq)");
  sub->add_option("--accum", o.accum, "Micro-batches accumulated per step")->capture_default_str();
  sub->add_option("--lr", o.optim.lr, "Peak learning rate")->capture_default_str();
  sub->add_option("--min-lr-ratio", o.optim.min_lr_ratio, "Cosine floor as a fraction of --lr")->capture_default_str();
  sub->add_option("--warmup", o.optim.warmup_steps, "Linear warmup steps")->capture_default_str();
  sub->add_option("--weight-decay", o.optim.weight_decay, "AdamW decoupled weight decay (2-D weights)")->capture_default_str();
  sub->add_option("--beta1", o.optim.beta1, "AdamW beta1")->capture_default_str();
  sub->add_option("--beta2", o.optim.beta2, "AdamW beta2")->capture_default_str();
  sub->add_option("--grad-clip", o.optim.grad_clip, "Max global gradient norm (0 = off)")->capture_default_str();
  sub->add_option("--seed", o.seed, "Seed for initialisation, batches and the sample")->capture_default_str();
  sub->add_option("--eval-every", o.eval_every, "Steps between validation evaluations")->capture_default_str();
  sub->add_option("--eval-batches", o.eval_batches, "Batches per validation evaluation")->capture_default_str();
  sub->add_option("--checkpoint-every", o.checkpoint_every, "Steps between checkpoints")->capture_default_str();
  sub->add_option("--log-every", o.log_every, "Steps between log lines (when not on a terminal)")->capture_default_str();
  sub->add_option("--val-fraction", o.val_fraction, "Fraction of the corpus (its end) held out")->capture_default_str();
  sub->add_option("--time-limit", o.time_limit_s,
                  "Stop (with a checkpoint) after this many seconds, the schedule unchanged; 0 = none");
  sub->add_flag("--resume", o.resume, "Continue OUT/checkpoint.safetensors exactly (same batches and schedule)");
  sub->add_option("--init", o.init,
                  "Start from the weights of this checkpoint, GGUF file or Hugging Face folder with a fresh optimizer;\n"
                  "a qat/qlora checkpoint's 4-bit codes and scales are kept as saved (the same model)");
  sub->add_option("--adapter", o.adapter,
                  "With --init and --mode qlora: continue training this LoRA adapter (llama.cpp adapter GGUF or PEFT\n"
                  "folder); its rank, alpha and targets replace --lora-rank/--lora-alpha/--lora-targets");
  sub->add_flag("--requantize", o.requantize,
                "With --init: derive new 4-bit scales and codes from the file's fp32 masters instead (prints how\n"
                "far the 4-bit weights moved); files without codes, or with another group size, always are");
  sub->add_flag("--skip-nan-steps", o.skip_nan_steps, "Skip steps with a NaN/Inf loss or gradient instead of stopping");
  sub->add_option("--max-skipped-steps", o.max_skipped_steps,
                  "With --skip-nan-steps: stop with an error after this many skipped steps in a row")
      ->capture_default_str();
  sub->add_option("--sample-prompt", o.sample_prompt, "Prompt of the sample written at the end")->capture_default_str();
  sub->add_option("--sample-tokens", o.sample_tokens, "Length of that sample (0 = none)")->capture_default_str();
  sub->add_flag("--no-progress", f->no_progress, "Plain log lines even on a terminal");
  sub->add_option("--dist-timeout", f->dist_timeout,
                  "Under mpirun: end the job with an error when the other ranks do not answer a collective within "
                  "this many seconds (a rank died or hangs); 0 = wait forever")
      ->capture_default_str();
  auto* config_opt = sub->get_option("--config");
  auto* corpus_opt = sub->get_option("--corpus");
  auto* data_opt = sub->get_option("--data");
  return [f, seq_opt, steps_opt, time_opt, config_opt, corpus_opt, data_opt] {
    ET_CHECK(f->dist_timeout >= 0, "train: --dist-timeout must be >= 0 (0 = wait forever), got ", f->dist_timeout);
    std::unique_ptr<Communicator> comm = make_communicator(f->dist_timeout);
    TrainOptions o = f->o;
    // The main job (`edgetrain train`, perhaps with --out, --backend or other settings of how it runs) trains
    // for a time; every other invocation for --steps.
    const bool main_job = steps_opt->count() == 0 && time_opt->count() == 0 && config_opt->count() == 0 &&
                          corpus_opt->count() == 0 && data_opt->count() == 0 && o.init.empty() && !o.resume &&
                          f->preset == "mini";
    // Under mpirun each rank would time its own steps and plan its own total, so a time budget needs one
    // process (the main job then trains for its --steps default).
    ET_CHECK(time_opt->count() == 0 || comm->size() == 1, "train: --time is not supported under mpirun (",
             comm->size(), " ranks would each plan their own total): give --steps");
    if (time_opt->count() > 0) o.time_budget_s = training::parse_duration(f->time, "--time");
    else if (main_job && comm->size() == 1) o.time_budget_s = kMainJobSeconds;
    if (!f->config.empty()) {
      std::ifstream in(f->config);
      ET_CHECK_KIND(ErrorKind::io, in.good(), "train: cannot read --config '", f->config, "'");
      std::stringstream ss;
      ss << in.rdbuf();
      o.model = ModelConfig::from_json(ss.str());
    } else {
      o.model = ModelConfig::preset(f->preset);
    }
    o.model.mode = mode_from_name(f->mode);
    o.model.group_size = f->group_size;
    o.model.lora_rank = f->lora_rank;
    o.model.lora_alpha = f->lora_alpha;
    o.model.lora_targets = f->lora_targets;
    if (f->tied) o.model.tied_head = true;
    // The trainer picks min(128, the model's max_seq); with --data, min(max_seq, the longest sample - 1).
    if (seq_opt->count() == 0) o.seq = 0;
    else ET_CHECK(o.seq >= 1, "train: --seq must be >= 1, got ", o.seq);
    if (steps_opt->count() > 0) o.optim.total_steps = f->steps;
    else if (o.resume) o.optim.total_steps = 0;  // the checkpoint's
    else if (o.time_budget_s > 0) o.optim.total_steps = std::numeric_limits<int32_t>::max();  // the plan decides
    else o.optim.total_steps = f->steps;
    o.progress = !f->no_progress;
    if (o.corpus.empty() && o.data.empty() && !o.resume) {
      o.corpus = deps_path("data/kjv.txt");
      std::printf("corpus: %s (default)\n", o.corpus.c_str());
    }
    // Past a file size limit (ulimit -f) the kernel's SIGXFSZ would kill us mid save without a word;
    // ignored, the write fails with EFBIG and the trainer reports it, keeping the previous checkpoint.
    std::signal(SIGXFSZ, SIG_IGN);
    if (comm->rank() != 0 && !std::freopen("/dev/null", "w", stdout))  // rank 0 alone prints the run's lines
      fail_kind(ErrorKind::io, "train: rank ", comm->rank(), ": cannot silence stdout");
    o.comm = comm.get();
    o.stop = &g_stop;
    g_stop.store(0);  // each run starts unstopped (the browser build calls main again in one process)
    catch_stop_signals();
    TrainResult r;
    try {
      r = train(o);
    } catch (const Error& e) {
      if (comm->size() == 1) throw;
      // One rank failing must not leave the others waiting in a collective: say why, end the whole job.
      std::fprintf(stderr, "edgetrain: error: rank %d of %d: %s\n", comm->rank(), comm->size(), e.what());
      comm->abort(exit_status(e.kind()));
    }
    default_action(SIGINT);
    default_action(SIGTERM);
    return r.stopped_by != 0 ? 128 + r.stopped_by : 0;  // the shell's convention for "ended by signal N"
  };
}

}  // namespace edgetrain::cli
