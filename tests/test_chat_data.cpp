// Fine-tuning data: chat templates against hand-written renderings (tests/data/chat_templates/), their
// detection, special-token parsing, JSONL errors, the sample batcher's exact pad/pack output, and the loss
// masking on a tiny model (the loss and gradients count the reply tokens only).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "edgetrain/backends.h"
#include "edgetrain/error.h"
#include "edgetrain/model.h"
#include "edgetrain/tokenizer.h"
#include "harness/cli_child.h"
#include "harness/error_of.h"
#include "harness/gguf_vocab.h"
#include "harness/temp_files.h"
#include "text/chat_template.h"
#include "train/run.h"
#include "train/samples.h"

namespace {

using namespace edgetrain;
using namespace edgetrain::training;
using edgetrain::test::error_of;
using edgetrain::test::slurp;

const std::vector<ChatMessage> kConversation = {{"system", "You are terse."},
                                                {"user", "Hi there"},
                                                {"assistant", " Hello! "},
                                                {"user", "Name a book"},
                                                {"assistant", "Genesis"}};

TEST(ChatTemplate, RendersTheHandWrittenExpectations) {
  const auto expected =
      nlohmann::json::parse(slurp(std::string(EDGETRAIN_SOURCE_DIR) + "/tests/data/chat_templates/expected.json"));
  for (const std::string& name : chat_template_names()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(expected.contains(name)) << "no expected rendering for " << name;
    const auto& e = expected[name];
    EXPECT_EQ(render_chat_text(name, kConversation, false), e["full"].get<std::string>());
    EXPECT_EQ(render_chat_text(name, {kConversation[0], kConversation[1]}, true), e["prompt"].get<std::string>());
    std::string reply;
    for (const ChatPiece& p : render_chat(name, kConversation, false))
      if (p.reply) reply += p.text;
    EXPECT_EQ(reply, e["reply"].get<std::string>());
    // Every reply ends with the template's end of turn, which is where generation stops.
    EXPECT_NE(reply.find(chat_end_of_turn(name)), std::string::npos);
  }
  EXPECT_THROW(render_chat("chatml", {{"tool", "x"}}, false), Error);
  EXPECT_NE(error_of([] { render_chat("vicuna", kConversation, false); }).find("chatml, llama3"), std::string::npos);
}

TEST(ChatTemplate, DetectsFamiliesByMarkers) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n'}}{% endfor %}",
       "chatml"},
      {"{{'<|im_start|>' + m['role'] + '<|im_sep|>'}}", ""},  // phi4: llama.cpp's, not written here
      {"{{ bos_token }}{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' + m['content'] | trim + "
       "'<|eot_id|>' }}",
       "llama3"},
      {"{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}", "gemma"},
      {"{{'<|user|>\\n' + message['content'] + '<|end|>\\n' + '<|assistant|>\\n'}}", "phi3"},
      {"{{'<|user|>\\n' + message['content'] + eos_token}}{{ '<|assistant|>' }}", ""},  // glm-edge
      {"{{ '<|user|>\\n' + message['content'] + '<|endoftext|>' }}", ""},              // zephyr
      {"{% for m in messages %}{{ '[INST] ' + m['content'] + ' [/INST]' }}{% endfor %}", "llama2"},
      {"{{ '[INST] <<SYS>>\\n' + system + '\\n<</SYS>>\\n\\n' }}", "llama2-sys"},
      {"{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }} <<SYS>>", "llama2-sys-strip"},
      {"{% if loop.index0 > 0 %}{{ bos_token + '[INST] ' }}{% endif %}<<SYS>>", "llama2-sys-bos"},
      {"{{ ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}", "mistral-v1"},
      {"{{ '[AVAILABLE_TOOLS] ' }}{{ '[INST] ' + message['content'] + '[/INST]' }}", "mistral-v3"},
      {"{{ '[AVAILABLE_TOOLS]' }}{{ \"[INST]\" + message['content'] + \"[/INST]\" }}", "mistral-v3-tekken"},
      {"{{ '[SYSTEM_PROMPT]' + system + '[/SYSTEM_PROMPT]' }}{{ '[INST]' }}", "mistral-v7"},
      {"gemma", "gemma"},
      {"{{ messages | tojson }}", ""}};
  for (const auto& [tmpl, name] : cases) EXPECT_EQ(detect_chat_template(tmpl), name) << tmpl;
}

TEST(ChatTemplate, ResolvesFromFlagTokenizerAndFiles) {
  auto bytes = make_byte_tokenizer();
  EXPECT_EQ(resolve_chat_template("", *bytes), "plain");
  EXPECT_EQ(resolve_chat_template("llama3", *bytes), "llama3");
  const std::string msg = error_of([&] { resolve_chat_template("nonsense", *bytes); });
  EXPECT_NE(msg.find("unknown chat template 'nonsense'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("chatml, llama3, llama2"), std::string::npos) << msg;
  // A GGUF vocabulary carries its template; the tokenizer keeps it.
  GgufVocab v = test::spm_vocab_head();
  v.unk = 0, v.bos = 1, v.eos = 2;
  v.chat_template = "{{ '<start_of_turn>user\\n' }}";
  auto spm = make_gguf_tokenizer(v, "t");
  std::string why;
  EXPECT_EQ(resolve_chat_template("", *spm, "", &why), "gemma");
  EXPECT_NE(why.find("tokenizer.chat_template"), std::string::npos) << why;
  v.chat_template = "{{ messages | tojson }}";
  EXPECT_NE(error_of([&] { resolve_chat_template("", *make_gguf_tokenizer(v, "t")); }).find("none of the known"),
            std::string::npos);
  // A Hugging Face tokenizer_config.json, as a file or a folder, in both of its forms.
  test::TempDir dir("chat", "resolve");
  std::filesystem::create_directories(dir.path);
  std::ofstream(dir.path / "tokenizer_config.json")
      << R"({"chat_template": [{"name": "tool_use", "template": "<|im_start|>"}, {"name": "default", "template": "[INST]"}]})";
  EXPECT_EQ(resolve_chat_template(dir.path.string(), *bytes), "llama2");
  EXPECT_EQ(resolve_chat_template("", *bytes, dir.path.string()), "llama2");
  std::ofstream(dir.path / "t.json") << R"({"chat_template": "{{ '<|im_start|>' }}"})";
  EXPECT_EQ(resolve_chat_template((dir.path / "t.json").string(), *bytes), "chatml");
}

TEST(ChatTemplate, SpecialTokensAreSingleIds) {
  // GPT-2's files: "<|endoftext|>" is parsed only by encode_special.
  auto gpt2 = load_gpt2_tokenizer(default_gpt2_dir());
  std::vector<int32_t> want = gpt2->encode("Hi");
  want.push_back(50256);
  for (int32_t id : gpt2->encode(" there")) want.push_back(id);
  EXPECT_EQ(gpt2->encode_special("Hi<|endoftext|> there"), want);
  EXPECT_GT(gpt2->encode("<|endoftext|>").size(), 1u);
  EXPECT_TRUE(gpt2->is_special(50256));
  EXPECT_FALSE(gpt2->is_special(gpt2->encode("Hi")[0]));
  // SentencePiece: a control token is one id, and the text after it gets the space prefix (llama.cpp).
  const std::string mark = "\xE2\x96\x81";
  GgufVocab v = test::spm_vocab_head();
  auto add = [&](const std::string& t, int32_t type) {
    v.tokens.push_back(t);
    v.scores.push_back(-1);
    v.token_types.push_back(type);
    return static_cast<int32_t>(v.tokens.size() - 1);
  };
  const int32_t sp = add(mark, 1), a = add("a", 1), spa = add(mark + "a", 1), im = add("<|im_start|>", 3);
  v.unk = 0, v.bos = 1, v.eos = 2;
  auto tok = make_gguf_tokenizer(v, "t");
  EXPECT_EQ(tok->encode_special("a<|im_start|>a"), (std::vector<int32_t>{spa, im, spa}));
  EXPECT_EQ(tok->encode_special("a<|im_start|>a", true), (std::vector<int32_t>{a, im, spa}));
  EXPECT_EQ(tok->encode_special("</s>a"), (std::vector<int32_t>{2, spa}));  // control </s> is EOS
  EXPECT_NE(tok->encode("a<|im_start|>a"), tok->encode_special("a<|im_start|>a"));
  EXPECT_TRUE(tok->is_special(im));
  EXPECT_FALSE(tok->is_special(sp));
  EXPECT_TRUE(tokenizer_adds_bos(*tok));  // a "llama" vocabulary without add_bos_token: llama.cpp adds it
  v.add_bos = 0;
  EXPECT_FALSE(tokenizer_adds_bos(*make_gguf_tokenizer(v, "t")));
  EXPECT_FALSE(tokenizer_adds_bos(*make_byte_tokenizer()));
  // A chat rendering through it: the template's marker is the special id, the reply mask follows the pieces.
  const ChatTokens ct = tokenize_chat(*tok, {{"<|im_start|>a", false}, {"a</s>", true}}, true);
  EXPECT_EQ(ct.ids, (std::vector<int32_t>{1, im, spa, a, 2}));
  EXPECT_EQ(ct.trained, (std::vector<uint8_t>{0, 0, 0, 1, 1}));
}

TEST(ChatData, ReplyTokensAreTheTrainedOnes) {
  auto bytes = make_byte_tokenizer();
  ChatRecord r;
  r.messages = {{"user", "Which book?"}, {"assistant", "Genesis"}};
  const Sample s = make_sample(*bytes, "plain", false, r, TrainOn::completion, "x.jsonl");
  const std::string text = "User: Which book?\nAssistant: Genesis\n\n";
  ASSERT_EQ(bytes->decode(s.ids), text);
  const size_t reply = text.find(" Genesis");  // the reply piece: " Genesis\n\n"
  for (size_t i = 0; i < text.size(); ++i) EXPECT_EQ(s.trained[i], i >= reply ? 1 : 0) << i;
  const Sample all = make_sample(*bytes, "plain", false, r, TrainOn::all, "x.jsonl");
  EXPECT_EQ(std::count(all.trained.begin(), all.trained.end(), 1), static_cast<long>(text.size() - 1));
  r.messages = {{"user", "no reply"}};
  r.line = 7;
  const std::string msg = error_of([&] { make_sample(*bytes, "plain", false, r, TrainOn::completion, "x.jsonl"); });
  EXPECT_NE(msg.find("x.jsonl:7: no assistant message"), std::string::npos) << msg;
}

TEST(ChatData, JsonlLinesAreCheckedWithFileAndLine) {
  test::TempDir dir("chat", "jsonl");
  std::filesystem::create_directories(dir.path);
  const std::string path = (dir.path / "d.jsonl").string();
  auto with_line3 = [&](const std::string& bad) {
    std::ofstream(path) << R"({"prompt": "a", "completion": "b"})" << "\n\n" << bad << "\n";
    return error_of([&] { read_chat_jsonl(path); });
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"prompt\": ", "not JSON"},
      {"[1, 2]", "not a JSON object"},
      {R"({"prompt": "a"})", "\"completion\" is missing or not a string"},
      {R"({"prompt": "a", "completion": 3})", "\"completion\" is missing or not a string"},
      {R"({"messages": []})", "non-empty array"},
      {R"({"messages": [{"role": "tool", "content": "x"}]})", "role 'tool' is not system, user or assistant"},
      {R"({"messages": [{"role": "user"}]})", "messages[0] must be"},
      {R"({"messages": [], "prompt": "a", "completion": "b"})", "both"},
      {R"({"text": "a"})", "no \"messages\""}};
  for (const auto& [bad, why] : cases) {
    const std::string msg = with_line3(bad);
    EXPECT_NE(msg.find(path + ":3: "), std::string::npos) << bad << " -> " << msg;
    EXPECT_NE(msg.find(why), std::string::npos) << bad << " -> " << msg;
  }
  std::ofstream(path) << R"({"system": "s", "prompt": "p", "completion": "c"})" << "\n"
                      << R"({"messages": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "v"}]})";
  const auto recs = read_chat_jsonl(path);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].messages.size(), 3u);
  EXPECT_EQ(recs[0].messages[0].role, "system");
  EXPECT_EQ(recs[1].line, 2);
  std::ofstream(path) << "\n";
  EXPECT_NE(error_of([&] { read_chat_jsonl(path); }).find("holds no samples"), std::string::npos);
}

Sample sample(std::vector<int32_t> ids, std::vector<uint8_t> trained) { return {std::move(ids), std::move(trained)}; }

std::vector<Sample> three_samples() {
  return {sample({10, 11, 12, 13}, {0, 0, 1, 1}), sample({20, 21, 22}, {0, 1, 1}),
          sample({30, 31, 32, 33, 34, 35}, {0, 0, 0, 1, 1, 1})};
}

TEST(SampleBatcher, PadRowsAreOneSampleEach) {
  SampleBatcher b(three_samples(), 5, Batching::pad, 1, false, 99);
  MicroBatch mb;
  b.batch(0, 3, 0, 3, mb);
  EXPECT_EQ(mb.tokens, (std::vector<int32_t>{10, 11, 12, 99, 99, 20, 21, 99, 99, 99, 30, 31, 32, 33, 34}));
  EXPECT_EQ(mb.labels, (std::vector<int32_t>{-1, 12, 13, -1, -1, 21, 22, -1, -1, -1, -1, -1, 33, 34, 35}));
  EXPECT_EQ(mb.positions, (std::vector<int32_t>{0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4}));
  EXPECT_EQ(b.trained_in(0, 3), 7);
  EXPECT_EQ(b.truncated(), 0);
  b.batch(1, 3, 0, 1, mb);  // past the one unshuffled pass: padding only
  EXPECT_EQ(mb.labels, std::vector<int32_t>(5, -1));
}

TEST(SampleBatcher, PackRowsRestartPositionsPerSample) {
  SampleBatcher b(three_samples(), 5, Batching::pack, 1, false, 99);
  EXPECT_EQ(b.rows_per_epoch(), 2);
  MicroBatch mb;
  b.batch(0, 2, 0, 2, mb);
  EXPECT_EQ(mb.tokens, (std::vector<int32_t>{10, 11, 12, 20, 21, 30, 31, 32, 33, 34}));
  EXPECT_EQ(mb.labels, (std::vector<int32_t>{-1, 12, 13, 21, 22, -1, -1, 33, 34, 35}));
  EXPECT_EQ(mb.positions, (std::vector<int32_t>{0, 1, 2, 0, 1, 0, 1, 2, 3, 4}));
  EXPECT_EQ(b.trained_in(0, 2), 7);
  // A row with room left is padded after its last sample, positions counting on.
  SampleBatcher c({sample({1, 2, 3}, {0, 1, 1}), sample({4, 5, 6, 7, 8}, {0, 0, 1, 1, 1})}, 5, Batching::pack, 1,
                  false, 0);
  c.batch(0, 2, 0, 2, mb);
  EXPECT_EQ(mb.tokens, (std::vector<int32_t>{1, 2, 0, 0, 0, 4, 5, 6, 7, 0}));
  EXPECT_EQ(mb.labels, (std::vector<int32_t>{2, 3, -1, -1, -1, -1, 6, 7, 8, -1}));
  EXPECT_EQ(mb.positions, (std::vector<int32_t>{0, 1, 2, 3, 4, 0, 1, 2, 3, 4}));
}

TEST(SampleBatcher, TruncationKeepsTheStart) {
  SampleBatcher b({sample({1, 2, 3, 4, 5, 6, 7, 8}, {0, 0, 0, 0, 0, 1, 1, 1}), sample({1, 2}, {0, 1})}, 4,
                  Batching::pad, 1, false, 0);
  EXPECT_EQ(b.truncated(), 1);
  EXPECT_EQ(b.untrained(), 1);  // its reply starts at token 5, past seq + 1 = 5 tokens
  MicroBatch mb;
  b.batch(0, 1, 0, 1, mb);
  EXPECT_EQ(mb.tokens, (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(mb.labels, (std::vector<int32_t>{-1, -1, -1, -1}));
}

TEST(SampleBatcher, ShuffleIsSeededPerEpochAndSplitsLikeOneProcess) {
  std::vector<Sample> s;
  for (int i = 0; i < 20; ++i) s.push_back(sample({i, 100 + i, 200 + i}, {0, 1, 1}));
  for (Batching mode : {Batching::pad, Batching::pack}) {
    const int64_t seq = 3;  // one sample (2 places) per row in pack mode too
    SampleBatcher a(s, seq, mode, 7, true, 0), a2(s, seq, mode, 7, true, 0), other(s, seq, mode, 8, true, 0);
    MicroBatch x, y, z;
    std::vector<int> seen(20, 0);
    std::vector<int32_t> epoch0;
    for (int64_t i = 0; i < 20; ++i) {  // 20 rows per epoch
      a.batch(i, 1, 0, 1, x);
      ++seen[x.tokens[0]], epoch0.push_back(x.tokens[0]);
    }
    EXPECT_EQ(seen, std::vector<int>(20, 1));  // an epoch is a permutation
    std::vector<int32_t> epoch1;
    for (int64_t i = 20; i < 40; ++i) a.batch(i, 1, 0, 1, x), epoch1.push_back(x.tokens[0]);
    EXPECT_NE(epoch0, epoch1);
    // Same seed, any order of asking: the same rows; another seed: other rows.
    a.batch(3, 4, 0, 4, x), a2.batch(3, 4, 0, 4, y), other.batch(3, 4, 0, 4, z);
    EXPECT_EQ(x.tokens, y.tokens);
    EXPECT_NE(x.tokens, z.tokens);
    // A rank's share (rows 1..2 of the micro-batch) is those rows of the whole.
    a2.batch(3, 4, 1, 2, y);
    EXPECT_EQ(y.tokens, std::vector<int32_t>(x.tokens.begin() + seq, x.tokens.begin() + 3 * seq));
    EXPECT_EQ(y.labels, std::vector<int32_t>(x.labels.begin() + seq, x.labels.begin() + 3 * seq));
  }
}

// The loss of a masked batch is the mean cross-entropy of its reply positions alone, and its gradient is the
// mean of those positions' gradients: the prompt positions contribute exactly nothing.
TEST(ChatData, MaskedLossCountsOnlyReplyTokens) {
  auto backend = make_backend("cpu", {});
  ModelConfig cfg = ModelConfig::preset("tiny");
  cfg.vocab = 256;
  cfg.mode = TrainMode::fp32;
  Model m(*backend, cfg);
  m.init(3);
  auto bytes = make_byte_tokenizer();
  ChatRecord r;
  r.messages = {{"user", "Book?"}, {"assistant", "Ruth"}};
  const Sample s = make_sample(*bytes, "plain", false, r, TrainOn::completion, "t");
  const int64_t T = static_cast<int64_t>(s.ids.size()) - 1;
  ASSERT_LE(T, cfg.max_seq);
  SampleBatcher b({s}, T, Batching::pad, 1, false, 0);
  MicroBatch mb;
  b.batch(0, 1, 0, 1, mb);
  std::vector<int64_t> reply;
  for (int64_t t = 0; t < T; ++t)
    if (mb.labels[t] >= 0) reply.push_back(t);
  ASSERT_EQ(reply.size(), 7u);  // " Ruth\n\n"

  // Loss: against the per-position cross-entropy of the full forward's logits.
  m.reset_cache();
  const std::vector<float> logits = m.next_logits(mb.tokens);
  ASSERT_EQ(logits.size(), static_cast<size_t>(T * 256));
  double reply_sum = 0, all_sum = 0;
  for (int64_t t = 0; t < T; ++t) {
    const float* l = logits.data() + t * 256;
    double mx = l[0], z = 0;
    for (int v = 1; v < 256; ++v) mx = std::max<double>(mx, l[v]);
    for (int v = 0; v < 256; ++v) z += std::exp(l[v] - mx);
    const double ce = mx + std::log(z) - l[s.ids[t + 1]];
    all_sum += ce;
    if (mb.labels[t] >= 0) reply_sum += ce;
  }
  const double loss = m.evaluate(mb.tokens, mb.labels, 1, T);
  EXPECT_NEAR(loss, reply_sum / static_cast<double>(reply.size()), 1e-4);
  EXPECT_GT(std::fabs(loss - all_sum / static_cast<double>(T)), 1e-3);  // the prompt would change it

  // Gradients: n * grad(masked) == sum over reply positions i of grad(only i labelled).
  auto g = m.gradients(mb.tokens, mb.labels, 1, T);
  std::map<std::string, std::vector<double>> sum;
  for (int64_t i : reply) {
    std::vector<int32_t> one(mb.labels.size(), -1);
    one[i] = mb.labels[i];
    for (auto& [name, gi] : m.gradients(mb.tokens, one, 1, T)) {
      auto& acc = sum[name];
      acc.resize(gi.size());
      for (size_t k = 0; k < gi.size(); ++k) acc[k] += gi[k];
    }
  }
  const double n = static_cast<double>(reply.size());
  for (auto& [name, gm] : g) {
    double worst = 0, scale = 1e-6;
    for (size_t k = 0; k < gm.size(); ++k) {
      worst = std::max(worst, std::fabs(n * gm[k] - sum[name][k]));
      scale = std::max(scale, std::fabs(sum[name][k]));
    }
    EXPECT_LT(worst, 1e-4 * scale + 1e-6) << name;
  }

  // Finite differences of the masked loss along a random direction of the embedding: its gradient is that of
  // the reply-only loss. And a prompt position's label, which the pipeline masks, moves nothing.
  Param* emb = nullptr;
  for (Param& p : m.params())
    if (p.trainable && !emb) emb = &p;
  ASSERT_NE(emb, nullptr);
  const std::vector<float> w0 = backend->to_vector<float>(emb->value);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  std::vector<float> d(w0.size());
  double dot = 0;
  for (size_t k = 0; k < d.size(); ++k) d[k] = nd(rng), dot += static_cast<double>(d[k]) * g[emb->name][k];
  const float eps = 1e-3f;
  auto loss_at = [&](float step) {
    std::vector<float> w = w0;
    for (size_t k = 0; k < w.size(); ++k) w[k] += step * d[k];
    backend->upload(emb->value, w.data(), w.size() * sizeof(float));
    return static_cast<double>(m.evaluate(mb.tokens, mb.labels, 1, T));
  };
  const double fd = (loss_at(eps) - loss_at(-eps)) / (2 * eps);
  loss_at(0);
  EXPECT_NEAR(fd, dot, 1e-2 * std::fabs(dot) + 1e-3);
  ChatRecord other = r;
  other.messages[0].content = "Book!";  // a different prompt token at a masked label position...
  const Sample s2 = make_sample(*bytes, "plain", false, other, TrainOn::completion, "t");
  SampleBatcher b2({s2}, T, Batching::pad, 1, false, 0);
  MicroBatch mb2;
  b2.batch(0, 1, 0, 1, mb2);
  EXPECT_EQ(mb2.labels, mb.labels);  // ...the same labels: the '?' -> '!' change is no label
}

}  // namespace
