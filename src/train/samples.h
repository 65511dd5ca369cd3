// Fine-tuning data: chat / instruction samples read from JSONL, tokenized through a chat template with the
// tokens each one trains on, and the batcher that lays variable-length samples into micro-batches of
// [batch, seq] tokens, labels and positions (padded, one sample per row, or packed, several per row).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "edgetrain/tokenizer.h"
#include "edgetrain/trainer.h"
#include "text/chat_template.h"

namespace edgetrain::training {

// SplitMix64's finalizer: a counter-based random number, so a batch is a pure function of (seed, index).
inline uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// One JSONL line: {"prompt": P, "completion": C} (optionally "system": S) is [system S,] user P, assistant C;
// {"messages": [{"role": "system|user|assistant", "content": ...}, ...]} is those messages.
struct ChatRecord {
  std::vector<ChatMessage> messages;
  int64_t line = 0;  // 1-based line in its file
};
// Every non-blank line of `path`. Throws Error (misuse) naming path:line and the problem on the first bad
// line (not JSON, not an object, neither or both forms, a field that is not a string, an unknown role, no
// messages), and when the file holds no record.
std::vector<ChatRecord> read_chat_jsonl(const std::string& path);

// A tokenized sample: ids[i] is trained on (its label is kept where it is the next token) when trained[i].
struct Sample {
  std::vector<int32_t> ids;
  std::vector<uint8_t> trained;
};
// `all`: every token but the first is a label. `completion`: only the assistant replies and their
// end-of-turn markers (ChatPiece::reply); a record without an assistant message is an error naming
// source:line.
enum class TrainOn { completion, all };
TrainOn train_on_from_name(const std::string& name);  // "completion" | "all"; throws naming both
Sample make_sample(const Tokenizer& tok, const std::string& chat_template, bool add_bos, const ChatRecord& r,
                   TrainOn on, const std::string& source);

// One micro-batch, row-major [batch, seq]: tokens, labels (-1: not trained: prompt tokens, padding) and each
// token's position within its own sample.
struct MicroBatch {
  std::vector<int32_t> tokens, labels, positions;
};

// pad: one sample per row, its tokens from column 0, the rest of the row padding (token pad_id, label -1,
// positions counting on from the sample's). pack: samples one after the other in a row while they fit
// (a sample that does not fit starts the next row; the end of a row is padding as above), positions
// restarting at 0 where each sample starts.
enum class Batching { pad, pack };
Batching batching_from_name(const std::string& name);  // "pad" | "pack"; throws naming both

// The samples of a split laid into rows of seq tokens. A sample of n tokens fills n - 1 places (token i,
// label = token i + 1). Truncation: a sample longer than seq + 1 tokens keeps its first seq + 1 (the start:
// the prompt, and as much of the reply as fits); truncated() counts them. Row r of the data is a pure
// function of (seed, r): with `shuffle`, epoch e visits the samples in a permutation drawn from
// (seed, e), pack mode packing them in that order; without, every epoch is the file order (validation). So a
// resumed run, or a rank taking its share of a micro-batch, gets exactly the rows an uninterrupted single
// process would.
class SampleBatcher {
 public:
  SampleBatcher(std::vector<Sample> samples, int64_t seq, Batching mode, uint64_t seed, bool shuffle, int32_t pad_id);
  int64_t samples() const { return static_cast<int64_t>(samples_.size()); }
  int64_t truncated() const { return truncated_; }
  // Samples left without a trained label (all of their reply cut off by truncation).
  int64_t untrained() const { return untrained_; }
  int64_t longest() const { return longest_; }  // tokens of the longest sample before truncation
  Batching mode() const { return mode_; }
  // What the model takes as a micro-batch's positions: pack rows' own; none for pad rows, whose samples all
  // start at column 0 where the model's positions start (the plain, unmasked program).
  const std::vector<int32_t>& model_positions(const MicroBatch& mb) const {
    static const std::vector<int32_t> plain;
    return mode_ == Batching::pack ? mb.positions : plain;
  }
  // Rows of one pass over the samples (pad: the sample count; pack: the rows epoch 0 packs into).
  int64_t rows_per_epoch() { return rows_in_epoch(0); }
  // Rows [first, first + count) of micro-batch `index` (rows index * batch ..): out is [count, seq].
  void batch(int64_t index, int64_t batch, int64_t first, int64_t count, MicroBatch& out);
  // Trained labels of the whole micro-batch `index` of `batch` rows (for the step's loss normalization).
  int64_t trained_in(int64_t index, int64_t batch);

 private:
  struct Slot {  // the samples of one row
    std::vector<int32_t> samples;
  };
  const std::vector<int32_t>& order(int64_t epoch);
  int64_t rows_in_epoch(int64_t epoch);
  // The samples of global row g (empty past the end of an unshuffled pass: an all-padding row).
  const std::vector<int32_t>& row(int64_t g);
  int64_t places(int32_t s) const { return std::min<int64_t>(static_cast<int64_t>(samples_[s].ids.size()) - 1, seq_); }

  std::vector<Sample> samples_;
  std::vector<int64_t> trained_;  // trained labels of each sample after truncation
  int64_t seq_;
  Batching mode_;
  uint64_t seed_;
  bool shuffle_;
  int32_t pad_id_;
  int64_t truncated_ = 0, untrained_ = 0, longest_ = 0;
  // Caches: the permutation and (pack) the rows of the epoch last asked for; rows per epoch so far.
  int64_t order_epoch_ = -1, rows_epoch_ = -1;
  std::vector<int32_t> order_;
  std::vector<std::vector<int32_t>> rows_;
  std::vector<int64_t> epoch_rows_;
  std::vector<int32_t> one_, none_;
};

// The assistant's reply to `messages` (sample.cpp): the conversation rendered with the generation prompt,
// tokenized as training tokenizes it (BOS, special tokens), sampled until EOS, the template's end-of-turn
// token, or its end-of-turn text (plain: a blank line), none of which is part of the returned text.
std::string generate_reply(Model& model, const Tokenizer& tok, const std::string& chat_template,
                           const std::vector<ChatMessage>& messages, const SampleOptions& o,
                           const std::function<void(const std::string&)>& on_text = {});

}  // namespace edgetrain::training
