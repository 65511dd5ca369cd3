// Sampling a continuation with the model's KV cache: temperature, top-k and top-p (nucleus) filtering,
// seeded so that the same checkpoint, prompt and options always give the same text; and a chat reply
// through a chat template, which stops at the template's end of turn.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "edgetrain/tokenizer.h"
#include "edgetrain/trainer.h"
#include "train/samples.h"

namespace edgetrain {

namespace {

int32_t pick(const float* logits, int64_t V, const SampleOptions& o, std::mt19937_64& rng) {
  if (o.temperature <= 0.0f) return static_cast<int32_t>(std::max_element(logits, logits + V) - logits);
  std::vector<int32_t> idx(static_cast<size_t>(V));
  std::iota(idx.begin(), idx.end(), 0);
  int64_t k = o.top_k > 0 ? std::min<int64_t>(o.top_k, V) : V;
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  idx.resize(static_cast<size_t>(k));
  std::vector<double> p(idx.size());
  double mx = logits[idx[0]], sum = 0;
  for (size_t i = 0; i < idx.size(); ++i) sum += p[i] = std::exp((logits[idx[i]] - mx) / o.temperature);
  double cum = 0;
  size_t keep = idx.size();
  for (size_t i = 0; i < idx.size(); ++i) {
    cum += p[i] / sum;
    if (cum >= o.top_p) {
      keep = i + 1;
      break;
    }
  }
  double total = std::accumulate(p.begin(), p.begin() + static_cast<long>(keep), 0.0);
  double r = std::uniform_real_distribution<double>(0.0, total)(rng);
  for (size_t i = 0; i < keep; ++i) {
    r -= p[i];
    if (r <= 0) return idx[i];
  }
  return idx[keep - 1];
}

// Length of the longest prefix of s that is complete UTF-8 (so partial characters are not printed).
size_t complete_utf8(const std::string& s) {
  size_t n = s.size(), i = n;
  for (size_t back = 0; back < 4 && i > 0; ++back) {
    unsigned char c = static_cast<unsigned char>(s[i - 1]);
    if ((c & 0xC0) != 0x80) {  // a lead byte (or ASCII) at i-1
      size_t need = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
      return n - (i - 1) >= need ? n : i - 1;
    }
    --i;
  }
  return n;
}

// The sampling loop behind generate() and generate_reply(): continues `prompt_ids`, stopping at a token of
// `stop_ids` or where the new text contains `stop_text` (neither is part of the result; text that may be the
// start of stop_text is held back from on_text until it is known not to be).
std::string generate_ids(Model& model, const Tokenizer& tok, const std::vector<int32_t>& prompt_ids,
                         const SampleOptions& o, const std::vector<int32_t>& stop_ids, const std::string& stop_text,
                         const std::function<void(const std::string&)>& on_text) {
  ET_CHECK(o.temperature >= 0.0f && std::isfinite(o.temperature), "generate: temperature must be >= 0, got ", o.temperature);
  ET_CHECK(o.top_p > 0.0f && o.top_p <= 1.0f, "generate: top_p must be in (0, 1], got ", o.top_p);
  ET_CHECK(o.top_k >= 0, "generate: top_k must be >= 0 (0 = no limit), got ", o.top_k);
  ET_CHECK(o.max_tokens >= 0, "generate: max_tokens must be >= 0, got ", o.max_tokens);
  const int64_t V = model.config().vocab, ctx = model.config().max_seq;
  std::vector<int32_t> history = prompt_ids;
  if (history.empty())
    history.push_back(tok.bos() >= 0 ? tok.bos() : tok.eot() >= 0 ? tok.eot() : static_cast<int32_t>('\n'));
  if (static_cast<int64_t>(history.size()) > ctx - 1) history.erase(history.begin(), history.end() - (ctx - 1));
  std::mt19937_64 rng(o.seed);
  model.reset_cache();
  std::vector<float> logits = model.next_logits(history);
  std::vector<int32_t> out;
  std::string printed;
  // The new text is decoded after the prompt's ids and the prompt's text cut off: a SentencePiece tokenizer
  // drops the leading space of a text's first token, which a continuation keeps.
  const std::string prompt_text = tok.decode(prompt_ids);
  auto decode_new = [&] {
    std::vector<int32_t> all = prompt_ids;
    all.insert(all.end(), out.begin(), out.end());
    return tok.decode(all).substr(prompt_text.size());
  };
  // How much of `text` can be shown: complete UTF-8, and short of a possible start of stop_text at its end.
  auto showable = [&](const std::string& text) {
    size_t upto = complete_utf8(text);
    for (size_t k = std::min(stop_text.size() - (stop_text.empty() ? 0 : 1), upto); k > 0; --k)
      if (text.compare(upto - k, k, stop_text, 0, k) == 0) return upto - k;
    return upto;
  };
  bool stopped = false;
  for (int64_t i = 0; i < o.max_tokens; ++i) {
    int64_t rows = static_cast<int64_t>(logits.size()) / V;
    if (o.on_logits) o.on_logits(logits.data() + (rows - 1) * V, V);
    int32_t next = pick(logits.data() + (rows - 1) * V, V, o, rng);
    if (std::find(stop_ids.begin(), stop_ids.end(), next) != stop_ids.end()) break;
    out.push_back(next);
    history.push_back(next);
    if (on_text || !stop_text.empty()) {
      std::string text = decode_new();
      if (!stop_text.empty() && text.find(stop_text) != std::string::npos) {
        stopped = true;
        break;
      }
      size_t upto = showable(text);
      if (on_text && upto > printed.size()) {
        on_text(text.substr(printed.size(), upto - printed.size()));
        printed = text.substr(0, upto);
      }
    }
    if (static_cast<int64_t>(history.size()) >= ctx) {  // context full: keep the last half, rebuild the cache
      history.erase(history.begin(), history.end() - ctx / 2);
      model.reset_cache();
      logits = model.next_logits(history);
    } else {
      logits = model.next_logits({next});
    }
  }
  std::string text = decode_new();
  if (stopped) text.erase(text.find(stop_text));
  if (on_text && text.size() > printed.size()) on_text(text.substr(printed.size()));
  return text;
}

}  // namespace

std::string generate(Model& model, const Tokenizer& tok, const std::string& prompt, const SampleOptions& o,
                     const std::function<void(const std::string&)>& on_text) {
  std::vector<int32_t> stops;
  if (tok.eot() >= 0) stops.push_back(tok.eot());
  return generate_ids(model, tok, tok.encode(prompt), o, stops, "", on_text);
}

namespace training {

std::string generate_reply(Model& model, const Tokenizer& tok, const std::string& chat_template,
                           const std::vector<ChatMessage>& messages, const SampleOptions& o,
                           const std::function<void(const std::string&)>& on_text) {
  const std::vector<ChatPiece> pieces = render_chat(chat_template, messages, true);
  const std::vector<int32_t> ids = tokenize_chat(tok, pieces, tokenizer_adds_bos(tok)).ids;
  const std::string end = chat_end_of_turn(chat_template);
  std::vector<int32_t> stops;
  if (tok.eot() >= 0) stops.push_back(tok.eot());
  const std::vector<int32_t> end_ids = tok.encode_special(end, true);
  if (end_ids.size() == 1 && tok.is_special(end_ids[0])) stops.push_back(end_ids[0]);
  return generate_ids(model, tok, ids, o, stops, end, on_text);
}

}  // namespace training
}  // namespace edgetrain
