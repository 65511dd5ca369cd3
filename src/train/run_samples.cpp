// The data phase of a fine-tuning run on samples (--data JSONL): the chat template, the tokenized samples,
// their split and batchers; the trained-label count of a step; and the validation loss over samples.
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "edgetrain/interop.h"
#include "train/run.h"

namespace edgetrain::training {
namespace {

std::vector<Sample> tokenize_all(const std::vector<ChatRecord>& records, size_t begin, size_t end,
                                 const Tokenizer& tok, const std::string& tmpl, bool bos, TrainOn on,
                                 const std::string& source, int64_t vocab) {
  std::vector<Sample> out;
  out.reserve(end - begin);
  for (size_t i = begin; i < end; ++i) {
    out.push_back(make_sample(tok, tmpl, bos, records[i], on, source));
    for (int32_t id : out.back().ids)
      ET_CHECK(id >= 0 && id < vocab, source, ":", records[i].line, ": token ", id, " is outside the vocabulary");
  }
  return out;
}

int64_t token_count(const std::vector<Sample>& v) {
  int64_t n = 0;
  for (const Sample& s : v) n += static_cast<int64_t>(s.ids.size());
  return n;
}

}  // namespace

void open_samples(TrainOptions& o, RunData& d) {
  const TrainOn on = train_on_from_name(o.train_on);
  const Batching mode = batching_from_name(o.batching);
  std::string why;
  const std::string hf = !o.init.empty() && is_hf_folder(o.init) ? o.init : "";
  d.chat_template = resolve_chat_template(o.chat_template, *d.tok, hf, &why);
  o.chat_template = d.chat_template;  // what the checkpoint records: --resume, eval and chat use it
  const bool bos = tokenizer_adds_bos(*d.tok);
  const std::vector<ChatRecord> train = read_chat_jsonl(o.data);
  std::vector<ChatRecord> val_records;
  size_t train_end = train.size();
  std::string split;
  if (!o.val_data.empty()) {
    val_records = read_chat_jsonl(o.val_data);
    split = std::to_string(val_records.size()) + " validation samples from " + o.val_data;
  } else {
    const size_t n_val = std::max<size_t>(1, static_cast<size_t>(std::llround(o.val_fraction * train.size())));
    ET_CHECK(train.size() > n_val, "train: --data '", o.data, "' has ", train.size(), " samples: too few to hold out ",
             n_val, " for validation and train on the rest (give --val-data)");
    train_end = train.size() - n_val;
    split = "the last " + std::to_string(n_val) + " of them (--val-fraction " + std::to_string(o.val_fraction) +
            ") for validation";
  }
  {
    const ChatRecord& first = o.val_data.empty() ? train[train_end] : val_records[0];
    d.sample_messages = first.messages;
    while (!d.sample_messages.empty() && d.sample_messages.back().role == "assistant") d.sample_messages.pop_back();
  }
  const int64_t V = o.model.vocab;
  std::vector<Sample> tr = tokenize_all(train, 0, train_end, *d.tok, d.chat_template, bos, on, o.data, V);
  std::vector<Sample> va = o.val_data.empty()
                               ? tokenize_all(train, train_end, train.size(), *d.tok, d.chat_template, bos, on, o.data, V)
                               : tokenize_all(val_records, 0, val_records.size(), *d.tok, d.chat_template, bos, on,
                                              o.val_data, V);
  int64_t longest = 0;
  for (const auto* set : {&tr, &va})
    for (const Sample& s : *set) longest = std::max<int64_t>(longest, static_cast<int64_t>(s.ids.size()));
  if (o.seq == 0) o.seq = std::min<int64_t>(o.model.max_seq, longest - 1);
  const int32_t pad = d.tok->eot() >= 0 ? d.tok->eot() : 0;  // never a label: any id does
  const int64_t train_tokens = token_count(tr), n_train = static_cast<int64_t>(tr.size());
  d.train_set = std::make_unique<SampleBatcher>(std::move(tr), o.seq, mode, o.seed, true, pad);
  d.val_set = std::make_unique<SampleBatcher>(std::move(va), o.seq, mode, o.seed, false, pad);
  d.size = train_tokens;
  std::printf("  data %s: %ld training samples (%ld tokens, %s), %s; chat template %s (%s)%s; training on %s; "
              "batching %s, seq %ld\n",
              o.data.c_str(), static_cast<long>(n_train), static_cast<long>(train_tokens), d.tok->name().c_str(),
              split.c_str(), d.chat_template.c_str(), why.c_str(), bos ? ", BOS first" : "",
              on == TrainOn::completion ? "the assistant replies (--train-on completion)" : "every token (--train-on all)",
              o.batching.c_str(), static_cast<long>(o.seq));
  ET_CHECK(d.train_set->untrained() < d.train_set->samples(), "train: every training sample of '", o.data,
           "' is longer than seq + 1 = ", o.seq + 1, " tokens and loses its whole reply when cut to its start (the "
           "longest has ", d.train_set->longest(), " tokens): use a model with a longer max_seq, or shorter samples");
  for (const auto& [name, set] : {std::pair{"training", d.train_set.get()}, std::pair{"validation", d.val_set.get()}})
    if (set->truncated() > 0)
      std::printf("  %ld %s samples are longer than seq + 1 = %ld tokens (the longest: %ld) and are cut to their "
                  "first %ld tokens%s\n",
                  static_cast<long>(set->truncated()), name, static_cast<long>(o.seq + 1), static_cast<long>(set->longest()),
                  static_cast<long>(o.seq + 1),
                  set->untrained() > 0 ? (", leaving " + std::to_string(set->untrained()) +
                                          " of them without a trained token").c_str()
                                       : "");
}

int64_t trained_labels(const RunData& d, const TrainOptions& o, int64_t step) {
  if (!d.samples()) return o.batch * o.seq * o.accum;
  int64_t n = 0;
  for (int64_t a = 0; a < o.accum; ++a) n += d.train_set->trained_in((step - 1) * o.accum + a, o.batch);
  return n;
}

EvalResult evaluate_samples(Model& model, SampleBatcher& val, int64_t batch, int64_t seq, int64_t batches) {
  const int64_t rows = val.rows_per_epoch();
  const int64_t n = std::min<int64_t>(batches, (rows + batch - 1) / batch);
  double sum = 0;
  int64_t labels = 0;
  MicroBatch mb;
  for (int64_t i = 0; i < n; ++i) {
    val.batch(i, batch, 0, batch, mb);
    int64_t valid = 0;
    for (int32_t l : mb.labels) valid += l >= 0;
    if (valid == 0) continue;  // every reply cut off: nothing to measure
    sum += static_cast<double>(model.evaluate(mb.tokens, mb.labels, batch, seq, val.model_positions(mb))) *
           static_cast<double>(valid);
    labels += valid;
  }
  ET_CHECK(labels > 0, "evaluate: the validation samples have no trained token (all cut off by truncation?)");
  EvalResult r;
  r.loss = sum / static_cast<double>(labels);
  r.perplexity = std::exp(r.loss);
  r.tokens = labels;
  return r;
}

}  // namespace edgetrain::training
