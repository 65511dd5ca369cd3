// `edgetrain eval --data`: a fine-tune measured on chat / instruction samples — the loss on the reply tokens
// (what --train-on completion trains), and for datasets of short replies the exact-match accuracy of greedy
// replies generated through the chat template.
#include <cctype>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "text/chat_template.h"
#include "tools/commands.h"
#include "train/run.h"

namespace edgetrain::cli {
namespace {

std::string trimmed(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

}  // namespace

int eval_data(Loaded& l, const EvalDataOptions& o) {
  using namespace training;
  ET_CHECK(o.batch >= 1, "eval: --batch must be >= 1");
  ET_CHECK(o.max_reply_tokens >= 1, "eval: --max-reply-tokens must be >= 1");
  std::string why;
  const std::string tmpl = checkpoint_chat_template(o.checkpoint, *l.tok, o.chat_template, &why);
  const std::vector<ChatRecord> records = read_chat_jsonl(o.data);
  const bool bos = tokenizer_adds_bos(*l.tok);
  std::vector<Sample> samples;
  int64_t longest = 0;
  for (const ChatRecord& r : records) {
    samples.push_back(make_sample(*l.tok, tmpl, bos, r, TrainOn::completion, o.data));
    longest = std::max<int64_t>(longest, static_cast<int64_t>(samples.back().ids.size()));
  }
  const int64_t max_seq = l.model->config().max_seq;
  const int64_t seq = o.seq > 0 ? o.seq : std::min<int64_t>(max_seq, longest - 1);
  ET_CHECK(seq <= max_seq, "eval: --seq ", seq, " exceeds the model's max_seq ", max_seq);
  SampleBatcher val(samples, seq, Batching::pad, 0, false, l.tok->eot() >= 0 ? l.tok->eot() : 0);
  const EvalResult r = evaluate_samples(*l.model, val, o.batch, seq, (val.rows_per_epoch() + o.batch - 1) / o.batch);

  // Exact match: the samples that end in a reply, when every such reply is short.
  int64_t longest_reply = 0;
  std::vector<size_t> ending_in_reply;
  for (size_t i = 0; i < records.size(); ++i) {
    const ChatMessage& last = records[i].messages.back();
    if (last.role != "assistant") continue;
    ending_in_reply.push_back(i);
    longest_reply = std::max<int64_t>(longest_reply, static_cast<int64_t>(l.tok->encode_special(last.content, true).size()));
  }
  const bool short_replies = !ending_in_reply.empty() && longest_reply <= o.max_reply_tokens;
  const size_t n_em = !short_replies || o.exact_match == 0 ? 0
                      : o.exact_match < 0 ? ending_in_reply.size()
                                          : std::min<size_t>(ending_in_reply.size(), static_cast<size_t>(o.exact_match));
  SampleOptions so;
  so.temperature = 0;  // greedy
  so.max_tokens = longest_reply + 8;
  int64_t correct = 0;
  std::vector<nlohmann::json> misses;
  for (size_t k = 0; k < n_em; ++k) {
    const ChatRecord& rec = records[ending_in_reply[k]];
    std::vector<ChatMessage> prompt(rec.messages.begin(), rec.messages.end() - 1);
    const std::string reply = trimmed(generate_reply(*l.model, *l.tok, tmpl, prompt, so));
    const std::string ref = trimmed(rec.messages.back().content);
    if (reply == ref) ++correct;
    else if (misses.size() < 3) misses.push_back({{"line", rec.line}, {"reference", ref}, {"reply", reply}});
  }
  const double acc = n_em > 0 ? static_cast<double>(correct) / static_cast<double>(n_em) : 0;
  if (o.json) {
    nlohmann::json j = {{"checkpoint", o.checkpoint}, {"data", o.data},   {"chat_template", tmpl},
                        {"samples", records.size()},  {"seq", seq},       {"truncated", val.truncated()},
                        {"tokens", r.tokens},         {"loss", r.loss},   {"perplexity", r.perplexity}};
    if (n_em > 0) j["exact_match"] = {{"correct", correct}, {"total", n_em}, {"accuracy", acc}, {"misses", misses}};
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("%s on %s (%zu samples, chat template %s: %s): loss %.4f nats/token on %ld reply tokens, perplexity "
              "%.3f\n",
              o.checkpoint.c_str(), o.data.c_str(), records.size(), tmpl.c_str(), why.c_str(), r.loss,
              static_cast<long>(r.tokens), r.perplexity);
  if (val.truncated() > 0)
    std::printf("  %ld samples longer than seq + 1 = %ld tokens were cut to their start\n",
                static_cast<long>(val.truncated()), static_cast<long>(seq + 1));
  if (n_em > 0) {
    std::printf("  exact match: %ld of %zu greedy replies equal the reference (trimmed): %.1f%%\n",
                static_cast<long>(correct), n_em, 100 * acc);
    for (const auto& m : misses)
      std::printf("    line %ld: expected \"%s\", got \"%s\"\n", m["line"].get<long>(),
                  m["reference"].get<std::string>().c_str(), m["reply"].get<std::string>().c_str());
  } else if (!short_replies) {
    std::printf("  no exact match: %s\n", ending_in_reply.empty()
                                              ? "no sample ends in an assistant reply"
                                              : ("the longest reference reply has " + std::to_string(longest_reply) +
                                                 " tokens, more than --max-reply-tokens " +
                                                 std::to_string(o.max_reply_tokens)).c_str());
  }
  return 0;
}

}  // namespace edgetrain::cli
