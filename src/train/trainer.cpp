// The training loop: batches from a token stream (positions drawn from a counter-based RNG keyed by
// seed and step, so a resumed run sees exactly the batches an uninterrupted one would), gradient
// accumulation, the recorded step and optimizer programs, evaluation, checkpoints, metrics and plots.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "edgetrain/backends.h"
#include "edgetrain/checkpoint.h"
#include "edgetrain/interop.h"
#include "edgetrain/safetensors.h"
#include "edgetrain/tokenizer.h"
#include "edgetrain/trainer.h"
#include "io/atomic_file.h"

namespace edgetrain {
namespace {

uint64_t mix(uint64_t x) {  // SplitMix64 finalizer: a counter-based random number
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// tokens/labels of `batch` windows of seq+1 tokens starting at random positions in [begin, end).
void sample_batch(const TokenStream& data, int64_t begin, int64_t end, int64_t batch, int64_t seq, uint64_t key,
                  std::vector<int32_t>& tokens, std::vector<int32_t>& labels) {
  tokens.resize(static_cast<size_t>(batch * seq));
  labels.resize(tokens.size());
  const uint64_t span = static_cast<uint64_t>(end - begin - seq);  // >= 1 checked by the caller
  for (int64_t b = 0; b < batch; ++b) {
    int64_t start = begin + static_cast<int64_t>(mix(key * 1000003u + static_cast<uint64_t>(b)) % span);
    for (int64_t t = 0; t < seq; ++t) {
      tokens[b * seq + t] = data.at(start + t);
      labels[b * seq + t] = data.at(start + t + 1);
    }
  }
}

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

void validate(const TrainOptions& o) {
  ET_CHECK(!o.corpus.empty(), "train: --corpus is required");
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
  ET_CHECK(o.threads >= 0, "train: --threads must be >= 0 (0 = all cores), got ", o.threads);
  ET_CHECK(o.sample_tokens >= 0, "train: --sample-tokens must be >= 0 (0 = none), got ", o.sample_tokens);
  ET_CHECK(o.optim.min_lr_ratio >= 0 && o.optim.min_lr_ratio <= 1, "train: --min-lr-ratio must be in [0, 1]");
  ET_CHECK(o.eval_every >= 1 && o.eval_batches >= 1 && o.checkpoint_every >= 1 && o.log_every >= 1,
           "train: --eval-every, --eval-batches, --checkpoint-every and --log-every must be >= 1");
  ET_CHECK(o.val_fraction > 0 && o.val_fraction < 0.5, "train: --val-fraction must be in (0, 0.5), got ", o.val_fraction);
  ET_CHECK(!(o.resume && !o.init.empty()), "train: --resume and --init cannot be combined");
  ET_CHECK(o.max_skipped_steps >= 1, "train: --max-skipped-steps must be >= 1, got ", o.max_skipped_steps);
  parse_backend_spec(o.backend);  // names the bad entry before any file or device is touched
}

nlohmann::json options_json(const TrainOptions& o) {
  return {{"corpus", o.corpus},           {"tokenizer", o.tokenizer},   {"batch", o.batch},
          {"seq", o.seq},                 {"accum", o.accum},           {"seed", o.seed},
          {"val_fraction", o.val_fraction}, {"lr", o.optim.lr},         {"min_lr_ratio", o.optim.min_lr_ratio},
          {"warmup_steps", o.optim.warmup_steps}, {"total_steps", o.optim.total_steps},
          {"beta1", o.optim.beta1},       {"beta2", o.optim.beta2},     {"eps", o.optim.eps},
          {"weight_decay", o.optim.weight_decay}, {"grad_clip", o.optim.grad_clip}};
}

// A resumed run continues with the options it was started with (only the step budget may grow).
void restore_options(TrainOptions& o, const nlohmann::json& j) {
  o.corpus = j.at("corpus").get<std::string>();
  o.tokenizer = j.at("tokenizer").get<std::string>();
  o.batch = j.at("batch"), o.seq = j.at("seq"), o.accum = j.at("accum"), o.seed = j.at("seed");
  o.val_fraction = j.at("val_fraction");
  o.optim.lr = j.at("lr"), o.optim.min_lr_ratio = j.at("min_lr_ratio"), o.optim.warmup_steps = j.at("warmup_steps");
  o.optim.total_steps = j.at("total_steps"), o.optim.beta1 = j.at("beta1"), o.optim.beta2 = j.at("beta2");
  o.optim.eps = j.at("eps"), o.optim.weight_decay = j.at("weight_decay"), o.optim.grad_clip = j.at("grad_clip");
}

// --init: the fp32 weights of a checkpoint by name (its optimizer state, codes and LoRA adapters are not
// used), then fresh scales and codes from them. So a run may change mode, e.g. fp32 -> qat or qat -> qlora.
void init_weights_from(const std::string& path, Model& model) {
  // A GGUF file or Hugging Face folder is converted to our names first; otherwise a safetensors file.
  const bool foreign = is_gguf_file(path) || is_hf_folder(path);
  std::map<std::string, std::vector<float>> imported;
  if (foreign) imported = import_masters(path);
  std::optional<safetensors::Reader> r;
  if (!foreign) r.emplace(safetensors::Reader::open(path));
  int loaded = 0;
  for (Param& p : model.params()) {
    if (p.name.find(".lora_") != std::string::npos) continue;  // adapters start fresh
    ET_CHECK(foreign ? imported.count(p.name) > 0 : r->contains(p.name), "train: --init: '", path,
             "' has no tensor '", p.name, "'");
    std::vector<float> v = foreign ? std::move(imported[p.name]) : r->to_f32(p.name);
    ET_CHECK(static_cast<int64_t>(v.size()) == p.value.numel(), "train: --init: tensor '", p.name, "' in '", path,
             "' has ", v.size(), " elements, the model needs ", p.value.numel());
    for (size_t i = 0; i < v.size(); ++i)
      ET_CHECK_KIND(ErrorKind::numeric, std::isfinite(v[i]), "train: --init: tensor '", p.name, "' in '", path,
                    "' holds ", v[i], " at index ", i, "; weights must not contain NaN/Inf");
    model.backend().upload(p.value, v.data(), v.size() * sizeof(float));
    ++loaded;
  }
  model.quantize_from_masters();
  model.steps_done = 0;
  std::printf("  initialised %d tensors from %s\n", loaded, path.c_str());
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

// The tokenizer of the run; sets o.tokenizer to the spec the checkpoint records. "auto": the --init file's
// own (a GGUF file's tokenizer metadata when it has some, the tokenizer an edgetrain checkpoint records),
// otherwise bytes; "gguf": the --init GGUF file's. A GGUF tokenizer is copied into the run folder as
// tokenizer.gguf, and that copy is what gets recorded: generate, eval and --resume need neither the --init
// file nor (checkpoint_tokenizer_spec) the folder staying where it was.
std::unique_ptr<Tokenizer> open_tokenizer(TrainOptions& o, const std::string& ckpt) {
  namespace fs = std::filesystem;
  std::string spec = o.tokenizer;
  std::optional<GgufVocab> vocab;  // of `spec`, when already read
  if (o.resume) {
    o.tokenizer = checkpoint_tokenizer_spec(spec, ckpt);
    return make_tokenizer(o.tokenizer);
  }
  if (spec == "auto") {
    spec = "bytes";
    if (!o.init.empty() && is_gguf_file(o.init)) {
      GgufVocab v = read_gguf_vocab(o.init);
      if (!v.model.empty()) spec = o.init, vocab = std::move(v);
    } else if (!o.init.empty() && !is_hf_folder(o.init)) {
      const auto meta = read_checkpoint_metadata(o.init);
      const auto it = meta.find("tokenizer");
      spec = checkpoint_tokenizer_spec(it == meta.end() ? "" : it->second, o.init);
    }
  } else if (spec == "gguf") {
    ET_CHECK(!o.init.empty() && is_gguf_file(o.init), "train: --tokenizer gguf is the tokenizer of the --init GGUF "
             "file, but ", o.init.empty() ? std::string("there is no --init") : "--init '" + o.init + "' is not one");
    spec = o.init;
  }
  if (!vocab && !is_gguf_path(spec)) {
    o.tokenizer = spec;
    return make_tokenizer(spec);
  }
  if (!vocab) vocab = read_gguf_vocab(spec);
  std::vector<std::string> warnings;
  auto tok = make_gguf_tokenizer(*vocab, spec, &warnings);
  for (const std::string& w : warnings) std::printf("  warning: %s\n", w.c_str());
  const std::string copy = fs::absolute(fs::path(o.out_dir) / "tokenizer.gguf").string();
  save_gguf_tokenizer(copy, tok->gguf_vocab());
  std::printf("  tokenizer of %s: %s, %ld tokens (copied to %s)\n", spec.c_str(), tok->name().c_str(),
              static_cast<long>(tok->vocab_size()), copy.c_str());
  o.tokenizer = copy;
  return tok;
}

}  // namespace

EvalResult evaluate_split(Model& model, const TokenStream& data, int64_t begin, int64_t end, int64_t batch, int64_t seq,
                          int64_t batches) {
  ET_CHECK(end - begin > seq, "evaluate: the split has ", end - begin, " tokens, fewer than seq+1 = ", seq + 1);
  std::vector<int32_t> tokens(static_cast<size_t>(batch * seq)), labels(tokens.size());
  double sum = 0;
  int64_t n = 0;
  // Evenly spaced, fixed windows: every evaluation of a run sees the same tokens.
  const int64_t windows = batch * batches, span = end - begin - seq;
  for (int64_t i = 0; i < batches; ++i) {
    for (int64_t b = 0; b < batch; ++b) {
      int64_t start = begin + ((i * batch + b) * span) / std::max<int64_t>(windows, 1);
      for (int64_t t = 0; t < seq; ++t) {
        tokens[b * seq + t] = data.at(start + t);
        labels[b * seq + t] = data.at(start + t + 1);
      }
    }
    sum += model.evaluate(tokens, labels, batch, seq);
    ++n;
  }
  EvalResult r;
  r.loss = sum / static_cast<double>(n);
  r.perplexity = std::exp(r.loss);
  r.tokens = n * batch * seq;
  return r;
}

TrainResult train(const TrainOptions& opts_in) {
  TrainOptions o = opts_in;
  namespace fs = std::filesystem;
  fs::create_directories(o.out_dir);
  const std::string ckpt = o.out_dir + "/checkpoint.safetensors", metrics_path = o.out_dir + "/metrics.jsonl";
  std::map<std::string, std::string> meta;
  if (o.resume) {
    ET_CHECK(fs::exists(ckpt), "train: --resume: no checkpoint at '", ckpt, "'");
    o.model = read_checkpoint_config(ckpt);
    meta = read_checkpoint_metadata(ckpt);
    ET_CHECK(meta.count("train_options"), "train: --resume: checkpoint '", ckpt, "' has no training options");
    restore_options(o, nlohmann::json::parse(meta["train_options"]));
    o.optim.total_steps = std::max(o.optim.total_steps, opts_in.optim.total_steps);
  } else if (!o.init.empty()) {
    ModelConfig c = is_gguf_file(o.init)   ? read_gguf_config(o.init, o.model.mode, o.model.group_size)
                    : is_hf_folder(o.init) ? read_hf_config(o.init, o.model.mode, o.model.group_size)
                                           : read_checkpoint_config(o.init);
    c.mode = o.model.mode;  // the mode may change (e.g. fp32 -> qat, qat -> qlora)
    c.group_size = o.model.group_size;
    c.lora_rank = o.model.lora_rank, c.lora_alpha = o.model.lora_alpha, c.lora_targets = o.model.lora_targets;
    o.model = c;
  }
  if (o.seq == 0) o.seq = std::min<int64_t>(128, o.model.max_seq);
  validate(o);
  auto tok = open_tokenizer(o, ckpt);  // sets o.tokenizer to the spec the checkpoint records
  if (o.model.vocab != tok->vocab_size()) {
    ET_CHECK(!o.resume && o.init.empty(), "train: ",
             o.resume ? std::string("the checkpoint's model") : "the model of --init '" + o.init + "'", " has ",
             o.model.vocab, " token embedding rows but tokenizer '", o.tokenizer, "' (", tok->name(), ") has ",
             tok->vocab_size(), " tokens; they must match (--tokenizer auto takes the --init file's own tokenizer)");
    o.model.vocab = tok->vocab_size();
  }
  ET_CHECK(o.seq <= o.model.max_seq, "train: --seq ", o.seq, " exceeds the model's max_seq ", o.model.max_seq);
  o.model.validate();

  auto data = TokenStream::open(o.corpus, *tok, o.out_dir + "/cache");
  const int64_t N = data->size();
  const int64_t val_len = std::max<int64_t>(o.seq + 2, static_cast<int64_t>(static_cast<double>(N) * o.val_fraction));
  const int64_t val_begin = N - val_len;
  ET_CHECK(val_begin > o.seq + 1, "train: corpus '", o.corpus, "' has ", N, " tokens: too small for --seq ", o.seq,
           " (need at least ", 2 * (o.seq + 2) + 1, " tokens for a training and a validation window)");
  for (int64_t i = 0; i < std::min<int64_t>(N, 1 << 16); ++i)
    ET_CHECK(data->at(i) >= 0 && data->at(i) < o.model.vocab, "train: corpus token ", data->at(i), " at ", i,
             " is outside the vocabulary");
  // A save killed mid write leaves checkpoint.safetensors.tmp.<pid>; remove those whose writer is gone.
  for (const std::string& stale : remove_stale_atomic_temps(ckpt))
    std::printf("  removed %s (left by an interrupted checkpoint save)\n", stale.c_str());

  // One training step: the micro-batches' gradients, then the update (which writes nothing when the
  // gradient norm is NaN/Inf). Returns the loss and the norm.
  const int64_t tokens_per_step = o.batch * o.seq * o.accum;
  std::vector<int32_t> tokens, labels;
  auto train_step = [&](Model& m, int64_t at) {
    double loss = 0;
    for (int64_t a = 0; a < o.accum; ++a) {
      sample_batch(*data, 0, val_begin, o.batch, o.seq, mix(o.seed) ^ static_cast<uint64_t>(at * o.accum + a), tokens,
                   labels);
      loss += m.accumulate(tokens, labels, o.batch, o.seq, tokens_per_step);
    }
    // A NaN/Inf loss never reaches the weights, even when the gradient norm happens to be finite.
    return std::make_pair(loss, m.update(o.optim, at, std::isfinite(loss)));
  };

  // Start-up on the first backend of the plan that works: the device, the model and its weights, the step-0
  // evaluation and the first step, which together allocate every buffer and compile every kernel of the run.
  // A failure of the backend itself (no device, out of device memory, a kernel the driver cannot compile)
  // moves on to the next backend of a list (--backend vulkan,cpu) or of auto, with a one-line notice; with
  // one backend, or when it is the input that is wrong (a bad checkpoint), it is the error.
  BackendOptions bo;
  bo.threads = o.threads;
  bo.device = o.device;
  const std::vector<BackendCandidate> plan = backend_plan(o.backend, bo);
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model_ptr;
  int64_t start_step = 0;
  EvalResult eval0;                               // the step-0 evaluation (fresh runs)
  bool have_eval0 = false;
  std::optional<std::pair<double, float>> first;  // the first step's loss and norm
  double first_dt = 0;
  auto t_start = std::chrono::steady_clock::now();
  auto seconds_since = [](auto t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  auto start = [&](const BackendCandidate& c) {
    model_ptr.reset();  // what a failed candidate left (the model before its backend)
    backend.reset();
    have_eval0 = false;
    first.reset();
    backend = make_backend(c.backend, c.options);
    model_ptr = std::make_unique<Model>(*backend, o.model);
    Model& m = *model_ptr;
    m.init(o.seed);
    if (o.resume) load_checkpoint(ckpt, m, nullptr);
    else if (!o.init.empty()) init_weights_from(o.init, m);
    start_step = m.steps_done;
    std::printf("edgetrain train: %.2fM parameters, mode %s, group %ld, on %s (%s)\n",
                o.model.parameter_count() / 1e6, mode_name(o.model.mode), static_cast<long>(o.model.group_size),
                backend->name().c_str(), backend->device_name().c_str());
    if (!c.why.empty()) std::printf("  %s\n", c.why.c_str());
    std::printf("  corpus %s: %ld tokens (%s), %ld for validation; %ld tokens per step; steps %ld..%ld\n",
                o.corpus.c_str(), static_cast<long>(N), tok->name().c_str(), static_cast<long>(val_len),
                static_cast<long>(tokens_per_step), static_cast<long>(start_step + 1),
                static_cast<long>(o.optim.total_steps));
    std::fflush(stdout);
    t_start = std::chrono::steady_clock::now();
    if (start_step == 0) {
      eval0 = evaluate_split(m, *data, val_begin, N, o.batch, o.seq, o.eval_batches);
      have_eval0 = true;
      std::printf("  step 0: validation loss %.4f (perplexity %.2f)\n", eval0.loss, eval0.perplexity);
      std::fflush(stdout);
    }
    if (start_step < o.optim.total_steps) {
      auto t0 = std::chrono::steady_clock::now();
      first = train_step(m, start_step + 1);
      first_dt = seconds_since(t0);
    }
  };
  try {
    first_that_starts(plan, start, " at start-up");
  } catch (const Error& e) {
    if (plan.size() == 1 && plan[0].backend != "cpu" && backend_list_falls_back(e))
      fail_kind(e.kind(), e.what(), "; to fall back to another backend instead, list them in order: --backend ",
                plan[0].backend, ",cpu");
    throw;
  }
  Model& model = *model_ptr;

  // Metrics: on resume keep the lines up to the checkpoint's step, so the file reads as one run.
  std::vector<std::pair<int64_t, double>> train_curve, val_curve;
  {
    std::vector<std::string> kept;
    if (o.resume && fs::exists(metrics_path)) {
      std::ifstream in(metrics_path);
      std::string line;
      while (std::getline(in, line)) {
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.contains("step") || j["step"].get<int64_t>() > start_step) continue;
        kept.push_back(line);
        if (j.contains("loss")) train_curve.push_back({j["step"], j["loss"].get<double>()});
        if (j.contains("val_loss")) val_curve.push_back({j["step"], j["val_loss"].get<double>()});
      }
    }
    std::ofstream out(metrics_path, std::ios::trunc);
    for (auto& l : kept) out << l << "\n";
  }
  std::ofstream metrics(metrics_path, std::ios::app);

  const bool tty = o.progress && ::isatty(STDERR_FILENO);

  TrainResult res;
  // A failed save (disk full, file size limit, I/O error) stops the run; the atomic writer has left the
  // previous checkpoint as it was, and the message says so.
  auto save = [&](int64_t at_step) {
    const bool had = fs::exists(ckpt);
    try {
      save_checkpoint(ckpt, model, {{"train_options", options_json(o).dump()}, {"tokenizer", o.tokenizer}});
    } catch (const Error& e) {
      if (tty) std::fprintf(stderr, "\n");
      fail_kind(e.kind(), "train: step ", at_step, ": writing the checkpoint failed (", e.what(), "). ",
                had ? "The previous checkpoint '" + ckpt + "' is intact (step " + meta_step(ckpt) + ")"
                    : std::string("No checkpoint had been written yet"),
                "; free space, then continue with --resume");
    }
  };
  if (have_eval0) {
    const EvalResult& e = eval0;
    res.first_val_loss = static_cast<float>(e.loss);
    val_curve.push_back({0, e.loss});
    metrics << nlohmann::json{{"step", 0}, {"val_loss", e.loss}, {"val_ppl", e.perplexity}}.dump() << "\n";
  }
  double window_tokens = 0, window_time = 0, tok_s = 0;
  int64_t step = start_step;
  // With --skip-nan-steps: the current run of consecutive skipped steps, and whether any step of this
  // invocation was applied; `unsaved`: steps applied since the last checkpoint.
  int64_t skipped_in_a_row = 0, applied = 0;
  bool unsaved = false;
  auto last_good = [&] {
    return fs::exists(ckpt) ? "the last good checkpoint is '" + ckpt + "' (step " + meta_step(ckpt) + ")"
                            : std::string("no checkpoint has been written");
  };
  for (step = start_step + 1; step <= o.optim.total_steps; ++step) {
    auto t0 = std::chrono::steady_clock::now();
    const bool have_first = step == start_step + 1 && first.has_value();
    const auto [loss, norm] = have_first ? *first : train_step(model, step);
    bool bad = !std::isfinite(loss) || !std::isfinite(norm);
    if (bad && !o.skip_nan_steps) {
      if (tty) std::fprintf(stderr, "\n");
      fail_kind(ErrorKind::numeric, "train: step ", step, ": ", !std::isfinite(loss) ? "loss" : "gradient norm",
                " is ", !std::isfinite(loss) ? loss : norm,
                "; stopped without updating the weights. The last good checkpoint is ",
                fs::exists(ckpt) ? "'" + ckpt + "'" : std::string("(none written yet)"),
                " (use --skip-nan-steps to skip such steps instead)");
    }
    if (bad) {
      std::printf("  step %ld: non-finite %s, step skipped (weights unchanged)\n", static_cast<long>(step),
                  !std::isfinite(loss) ? "loss" : "gradient norm");
      std::fflush(stdout);
      if (++skipped_in_a_row >= o.max_skipped_steps) {
        if (unsaved) save(model.steps_done);  // keep the good steps before the streak (finite weights)
        if (tty) std::fprintf(stderr, "\n");
        fail_kind(ErrorKind::numeric, "train: step ", step, ": ", skipped_in_a_row, " steps in a row (",
                  step - skipped_in_a_row + 1, "..", step,
                  ") had a non-finite loss or gradient norm and were skipped; stopped at --max-skipped-steps ",
                  o.max_skipped_steps, ". No NaN/Inf reached the weights; ", last_good(),
                  ". Lower --lr, set --grad-clip, or check the corpus");
      }
      continue;
    }
    skipped_in_a_row = 0;
    ++applied;
    unsaved = true;
    double dt = have_first ? first_dt : seconds_since(t0);
    window_tokens += static_cast<double>(tokens_per_step);
    window_time += dt;
    train_curve.push_back({step, loss});
    res.last_train_loss = static_cast<float>(loss);
    nlohmann::json line = {{"step", step},
                           {"loss", loss},
                           {"lr", o.optim.lr_at(step)},
                           {"grad_norm", norm},
                           {"step_s", dt},
                           {"tokens", step * tokens_per_step},
                           {"elapsed_s", seconds_since(t_start)},
                           {"rss_mb", rss_mb("VmRSS:")}};
    bool do_eval = step % o.eval_every == 0 || step == o.optim.total_steps;
    bool out_of_time = o.time_limit_s > 0 && seconds_since(t_start) > o.time_limit_s;
    if (do_eval || out_of_time) {
      EvalResult e = evaluate_split(model, *data, val_begin, N, o.batch, o.seq, o.eval_batches);
      line["val_loss"] = e.loss;
      line["val_ppl"] = e.perplexity;
      val_curve.push_back({step, e.loss});
      res.last_val_loss = static_cast<float>(e.loss);
    }
    if (window_time > 0) tok_s = window_tokens / window_time;
    line["tokens_per_s"] = tok_s;
    metrics << line.dump() << "\n";
    metrics.flush();
    double elapsed = seconds_since(t_start);
    double eta = tok_s > 0 ? static_cast<double>((o.optim.total_steps - step) * tokens_per_step) / tok_s : 0;
    if (tty) {
      int width = 24, fill = static_cast<int>(width * step / o.optim.total_steps);
      std::fprintf(stderr, "\r  [%s%s] step %ld/%ld  loss %.3f  lr %.2e  %.0f tok/s  eta %s   ",
                   std::string(static_cast<size_t>(fill), '#').c_str(), std::string(static_cast<size_t>(width - fill), '.').c_str(),
                   static_cast<long>(step), static_cast<long>(o.optim.total_steps), loss, o.optim.lr_at(step), tok_s,
                   fmt_duration(eta).c_str());
    }
    if (!tty && (step % o.log_every == 0 || do_eval))
      std::printf("  step %ld/%ld  loss %.4f  lr %.2e  grad norm %.3f  %.0f tok/s  %s elapsed\n", static_cast<long>(step),
                  static_cast<long>(o.optim.total_steps), loss, o.optim.lr_at(step), norm, tok_s, fmt_duration(elapsed).c_str());
    if (line.contains("val_loss")) {
      if (tty) std::fprintf(stderr, "\n");
      std::printf("  step %ld: validation loss %.4f (perplexity %.2f)\n", static_cast<long>(step),
                  line["val_loss"].get<double>(), line["val_ppl"].get<double>());
    }
    std::fflush(stdout);
    if (step % o.checkpoint_every == 0 || step == o.optim.total_steps || out_of_time) {
      save(step);
      unsaved = false;
    }
    if (out_of_time) {
      std::printf("  time limit of %.0f s reached at step %ld: checkpoint written; continue with --resume\n",
                  o.time_limit_s, static_cast<long>(step));
      ++step;
      break;
    }
  }
  if (tty) std::fprintf(stderr, "\n");
  if (skipped_in_a_row > 0) {  // the run ended on skipped steps
    if (unsaved) save(model.steps_done);
    if (applied == 0)
      fail_kind(ErrorKind::numeric, "train: every step of this run (", start_step + 1, "..", step - 1,
                ") had a non-finite loss or gradient norm and was skipped: nothing was trained; ", last_good(),
                ". Lower --lr, set --grad-clip, or check the corpus");
    std::printf("  warning: the last %ld steps were skipped (non-finite loss or gradient norm); the checkpoint holds "
                "step %ld\n", static_cast<long>(skipped_in_a_row), static_cast<long>(model.steps_done));
  }
  res.steps = step - 1;
  res.seconds = seconds_since(t_start);
  res.tokens_per_s = tok_s;
  res.checkpoint = ckpt;
  res.metrics = metrics_path;
  res.curve = o.out_dir + "/loss.svg";
  write_loss_svg(res.curve, train_curve, val_curve,
                 "edgetrain " + std::string(mode_name(o.model.mode)) + ": loss on " + fs::path(o.corpus).filename().string());
  if (o.sample_tokens > 0) {
    SampleOptions so;
    so.max_tokens = o.sample_tokens;
    so.seed = o.seed;
    std::string text = generate(model, *tok, o.sample_prompt, so);
    res.sample = o.out_dir + "/sample.txt";
    std::ofstream(res.sample) << o.sample_prompt << text << "\n";
    std::printf("\nSample (prompt \"%s\"):\n%s%s\n\n", o.sample_prompt.c_str(), o.sample_prompt.c_str(), text.c_str());
  }
  std::printf("done: %ld steps in %s, %.0f tokens/s, final validation loss %.4f, peak memory %.0f MiB\n",
              static_cast<long>(res.steps), fmt_duration(res.seconds).c_str(), res.tokens_per_s, res.last_val_loss,
              rss_mb("VmHWM:"));
  std::printf("  checkpoint %s\n  metrics    %s\n  curve      %s\n", ckpt.c_str(), metrics_path.c_str(), res.curve.c_str());
  if (!res.sample.empty()) std::printf("  sample     %s\n", res.sample.c_str());
  return res;
}

}  // namespace edgetrain
