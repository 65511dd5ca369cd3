// Fine-tuning samples (samples.h): JSONL records, their tokens through the chat template with the trained
// mask, and the batcher that lays them into micro-batches (pad or pack), shuffled per epoch by the seed.
#include "train/samples.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "edgetrain/error.h"

namespace edgetrain::training {
namespace {

const char* kForms = "expected {\"prompt\": ..., \"completion\": ...} or {\"messages\": [{\"role\": ..., \"content\": ...}]}";

}  // namespace

std::vector<ChatRecord> read_chat_jsonl(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ET_CHECK(in.good(), "data file '", path, "' does not exist or cannot be read");
  std::vector<ChatRecord> out;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    auto bad = [&](const auto&... what) { fail(path, ":", n, ": ", what...); };
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      bad("not JSON (", e.what(), ")");
    }
    if (!j.is_object()) bad("not a JSON object; ", kForms);
    ChatRecord r;
    r.line = n;
    const bool pc = j.contains("prompt") || j.contains("completion"), msgs = j.contains("messages");
    if (pc && msgs) bad("has both \"messages\" and \"prompt\"/\"completion\"; ", kForms);
    if (pc) {
      for (const char* k : {"prompt", "completion"})
        if (!j.contains(k) || !j[k].is_string()) bad("\"", k, "\" is missing or not a string");
      if (j.contains("system")) {
        if (!j["system"].is_string()) bad("\"system\" is not a string");
        r.messages.push_back({"system", j["system"].get<std::string>()});
      }
      r.messages.push_back({"user", j["prompt"].get<std::string>()});
      r.messages.push_back({"assistant", j["completion"].get<std::string>()});
    } else if (msgs) {
      const auto& m = j["messages"];
      if (!m.is_array() || m.empty()) bad("\"messages\" must be a non-empty array");
      for (size_t i = 0; i < m.size(); ++i) {
        const auto& e = m[i];
        if (!e.is_object() || !e.contains("role") || !e["role"].is_string() || !e.contains("content") ||
            !e["content"].is_string())
          bad("messages[", i, "] must be {\"role\": string, \"content\": string}");
        const std::string role = e["role"].get<std::string>();
        if (role != "system" && role != "user" && role != "assistant")
          bad("messages[", i, "]: role '", role, "' is not system, user or assistant");
        r.messages.push_back({role, e["content"].get<std::string>()});
      }
    } else {
      bad("no \"messages\" or \"prompt\"/\"completion\"; ", kForms);
    }
    out.push_back(std::move(r));
  }
  ET_CHECK(!out.empty(), "data file '", path, "' holds no samples (", kForms, ", one per line)");
  return out;
}

TrainOn train_on_from_name(const std::string& name) {
  if (name == "completion") return TrainOn::completion;
  if (name == "all") return TrainOn::all;
  fail("--train-on '", name, "': expected completion (the assistant replies only) or all (every token)");
}

Batching batching_from_name(const std::string& name) {
  if (name == "pad") return Batching::pad;
  if (name == "pack") return Batching::pack;
  fail("--batching '", name, "': expected pad (one sample per row) or pack (samples packed into rows)");
}

Sample make_sample(const Tokenizer& tok, const std::string& chat_template, bool add_bos, const ChatRecord& r,
                   TrainOn on, const std::string& source) {
  const std::vector<ChatPiece> pieces = render_chat(chat_template, r.messages, false);
  ChatTokens t = tokenize_chat(tok, pieces, add_bos);
  Sample s;
  s.ids = std::move(t.ids);
  if (on == TrainOn::all) {
    s.trained.assign(s.ids.size(), 1);
    if (!s.trained.empty()) s.trained[0] = 0;  // the first token is never a label
  } else {
    s.trained = std::move(t.trained);
    ET_CHECK(std::find(s.trained.begin(), s.trained.end(), 1) != s.trained.end(), source, ":", r.line,
             ": no assistant message to train on (--train-on completion trains on the assistant replies; use "
             "--train-on all to train on every token)");
  }
  ET_CHECK(s.ids.size() >= 2, source, ":", r.line, ": the sample is ", s.ids.size(), " token long; it needs 2");
  return s;
}

SampleBatcher::SampleBatcher(std::vector<Sample> samples, int64_t seq, Batching mode, uint64_t seed, bool shuffle,
                             int32_t pad_id)
    : samples_(std::move(samples)), seq_(seq), mode_(mode), seed_(seed), shuffle_(shuffle), pad_id_(pad_id) {
  ET_CHECK(!samples_.empty(), "no samples to batch");
  for (const Sample& s : samples_) {
    const int64_t n = static_cast<int64_t>(s.ids.size());
    ET_CHECK(n >= 2 && s.trained.size() == s.ids.size(), "a sample needs >= 2 tokens and a mask of their count");
    longest_ = std::max(longest_, n);
    if (n > seq_ + 1) ++truncated_;
    int64_t t = 0;
    for (int64_t i = 1; i <= std::min(n - 1, seq_); ++i) t += s.trained[i];
    trained_.push_back(t);
    if (t == 0) ++untrained_;
  }
}

const std::vector<int32_t>& SampleBatcher::order(int64_t epoch) {
  if (epoch == order_epoch_) return order_;
  const int64_t n = samples();
  order_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order_[i] = static_cast<int32_t>(i);
  if (shuffle_) {  // Fisher-Yates from a counter-based RNG keyed by (seed, epoch, i)
    const uint64_t key = mix(seed_ ^ 0x5EEDull) ^ mix(static_cast<uint64_t>(epoch) + 1);
    for (int64_t i = n - 1; i > 0; --i) {
      const int64_t j = static_cast<int64_t>(mix(key + static_cast<uint64_t>(i)) % static_cast<uint64_t>(i + 1));
      std::swap(order_[i], order_[j]);
    }
  }
  order_epoch_ = epoch;
  return order_;
}

int64_t SampleBatcher::rows_in_epoch(int64_t epoch) {
  if (mode_ == Batching::pad) return samples();
  if (epoch == rows_epoch_) return static_cast<int64_t>(rows_.size());
  // Greedy packing in the epoch's order.
  const std::vector<int32_t>& o = order(epoch);
  rows_.clear();
  int64_t fill = seq_;  // "full": the first sample opens a row
  for (int32_t s : o) {
    if (fill + places(s) > seq_) {
      rows_.emplace_back();
      fill = 0;
    }
    rows_.back().push_back(s);
    fill += places(s);
  }
  rows_epoch_ = epoch;
  return static_cast<int64_t>(rows_.size());
}

const std::vector<int32_t>& SampleBatcher::row(int64_t g) {
  int64_t epoch = 0;
  if (mode_ == Batching::pad) {
    epoch = g / samples();
    if (!shuffle_ && epoch > 0) return none_;
    one_.assign(1, order(epoch)[g % samples()]);
    return one_;
  }
  // Rows per epoch vary with the permutation: walk the epochs (their counts are kept).
  for (;; ++epoch) {
    if (static_cast<int64_t>(epoch_rows_.size()) <= epoch) epoch_rows_.push_back(rows_in_epoch(epoch));
    if (g < epoch_rows_[epoch]) break;
    g -= epoch_rows_[epoch];
    if (!shuffle_) return none_;
  }
  rows_in_epoch(epoch);
  return rows_[g];
}

void SampleBatcher::batch(int64_t index, int64_t batch, int64_t first, int64_t count, MicroBatch& out) {
  const int64_t seq = seq_;
  out.tokens.assign(static_cast<size_t>(count * seq), pad_id_);
  out.labels.assign(out.tokens.size(), -1);
  out.positions.assign(out.tokens.size(), 0);
  for (int64_t b = 0; b < count; ++b) {
    int32_t* tok = out.tokens.data() + b * seq;
    int32_t* lab = out.labels.data() + b * seq;
    int32_t* pos = out.positions.data() + b * seq;
    int64_t at = 0, p = 0;
    for (int32_t si : row(index * batch + first + b)) {
      const Sample& s = samples_[si];
      const int64_t L = places(si);
      for (int64_t i = 0; i < L; ++i, ++at) {
        tok[at] = s.ids[i];
        lab[at] = s.trained[i + 1] ? s.ids[i + 1] : -1;
        pos[at] = static_cast<int32_t>(i);
      }
      p = L;
    }
    for (; at < seq; ++at, ++p) pos[at] = static_cast<int32_t>(p);  // padding: positions count on
  }
}

int64_t SampleBatcher::trained_in(int64_t index, int64_t batch) {
  int64_t n = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int32_t s : row(index * batch + b)) n += trained_[s];
  return n;
}

}  // namespace edgetrain::training
