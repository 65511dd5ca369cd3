// The second phase of a training run: its folder, tokenizer, corpus and training/validation split; and the
// windows read from them — the training batches of each step and the fixed validation windows.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "edgetrain/checkpoint.h"
#include "edgetrain/interop.h"
#include "io/atomic_file.h"
#include "train/run.h"

namespace edgetrain::training {
namespace {

// The tokenizer of the run; sets o.tokenizer to the spec the checkpoint records. "auto": the --init file's
// own (a GGUF file's tokenizer metadata when it has some, the tokenizer an edgetrain checkpoint records),
// otherwise bytes; "gguf": the --init GGUF file's. A GGUF tokenizer is copied into the run folder as
// tokenizer.gguf, and that copy is what gets recorded: generate, eval and --resume need neither the --init
// file nor (checkpoint_tokenizer_spec) the folder staying where it was.
std::unique_ptr<Tokenizer> open_tokenizer(TrainOptions& o) {
  namespace fs = std::filesystem;
  std::string spec = o.tokenizer;
  std::optional<GgufVocab> vocab;  // of `spec`, when already read
  if (o.resume) {
    o.tokenizer = checkpoint_tokenizer_spec(spec, checkpoint_path(o));
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
  if (!vocab && !is_gguf_file(spec)) {
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

RunData open_data(TrainOptions& o) {
  std::filesystem::create_directories(o.out_dir);
  RunData d;
  d.tok = open_tokenizer(o);
  if (o.model.vocab != d.tok->vocab_size()) {
    ET_CHECK(!o.resume && o.init.empty(), "train: ",
             o.resume ? std::string("the checkpoint's model") : "the model of --init '" + o.init + "'", " has ",
             o.model.vocab, " token embedding rows but tokenizer '", o.tokenizer, "' (", d.tok->name(), ") has ",
             d.tok->vocab_size(), " tokens; they must match (--tokenizer auto takes the --init file's own tokenizer)");
    o.model.vocab = d.tok->vocab_size();
  }
  ET_CHECK(o.seq <= o.model.max_seq, "train: --seq ", o.seq, " exceeds the model's max_seq ", o.model.max_seq);
  o.model.validate();
  if (!o.data.empty()) {
    open_samples(o, d);
    for (const std::string& stale : remove_stale_atomic_temps(checkpoint_path(o)))
      std::printf("  removed %s (left by an interrupted checkpoint save)\n", stale.c_str());
    return d;
  }

  d.tokens = TokenStream::open(o.corpus, *d.tok, o.out_dir + "/cache");
  const int64_t N = d.size = d.tokens->size();
  const int64_t val_len = std::max<int64_t>(o.seq + 2, static_cast<int64_t>(static_cast<double>(N) * o.val_fraction));
  d.val_begin = N - val_len;
  ET_CHECK(d.val_begin > o.seq + 1, "train: corpus '", o.corpus, "' has ", N, " tokens: too small for --seq ", o.seq,
           " (need at least ", 2 * (o.seq + 2) + 1, " tokens for a training and a validation window)");
  for (int64_t i = 0; i < std::min<int64_t>(N, 1 << 16); ++i)
    ET_CHECK(d.tokens->at(i) >= 0 && d.tokens->at(i) < o.model.vocab, "train: corpus token ", d.tokens->at(i), " at ",
             i, " is outside the vocabulary");
  // A save killed mid write leaves checkpoint.safetensors.tmp.<pid>; remove those whose writer is gone.
  for (const std::string& stale : remove_stale_atomic_temps(checkpoint_path(o)))
    std::printf("  removed %s (left by an interrupted checkpoint save)\n", stale.c_str());
  return d;
}

void training_batch(const RunData& d, const TrainOptions& o, int64_t step, int64_t micro, std::vector<int32_t>& tokens,
                    std::vector<int32_t>& labels, int64_t first, int64_t count, std::vector<int32_t>* positions) {
  const int64_t batch = count < 0 ? o.batch : count, seq = o.seq;
  if (d.samples()) {
    MicroBatch mb;
    d.train_set->batch((step - 1) * o.accum + micro, o.batch, first, batch, mb);
    tokens = std::move(mb.tokens);
    labels = std::move(mb.labels);
    if (positions) *positions = std::move(mb.positions);
    return;
  }
  const uint64_t key = mix(o.seed) ^ static_cast<uint64_t>(step * o.accum + micro);
  tokens.resize(static_cast<size_t>(batch * seq));
  labels.resize(tokens.size());
  const uint64_t span = static_cast<uint64_t>(d.val_begin - seq);  // >= 2: open_data checked val_begin > seq + 1
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t start = static_cast<int64_t>(mix(key * 1000003u + static_cast<uint64_t>(first + b)) % span);
    for (int64_t t = 0; t < seq; ++t) {
      tokens[b * seq + t] = d.tokens->at(start + t);
      labels[b * seq + t] = d.tokens->at(start + t + 1);
    }
  }
}

}  // namespace edgetrain::training

namespace edgetrain {

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

}  // namespace edgetrain
