// The CLI's LoRA adapter round: a qlora fine-tune of a GGUF base, `convert --to lora-gguf` and `--to peft`,
// `generate`/`eval --adapter` on the base file giving exactly what the fine-tuned checkpoint gives, and
// `train --init BASE --mode qlora --adapter A` continuing from the adapter's A and B (rank, alpha and
// targets taken from it); misuse is one clear error with exit status 1.
#include <gtest/gtest.h>

#include <cmath>

#include "edgetrain/checkpoint.h"
#include "edgetrain/safetensors.h"
#include "harness/cli_child.h"

namespace edgetrain::test {
namespace {

using LoraAdapterCli = CliTest;

// The text after "loss " on the line of `eval`'s answer.
std::string eval_loss(const Outcome& o) {
  const size_t at = o.output.find("loss ");
  return at == std::string::npos ? "" : o.output.substr(at, o.output.find('\n', at) - at);
}

TEST_F(LoraAdapterCli, AdapterOutAndBackIn) {
  const std::string base = dir_ + "/base.gguf", ft = dir_ + "/ft/checkpoint.safetensors";
  const std::string lora = dir_ + "/ft-lora.gguf", peft = dir_ + "/ft-peft";
  Outcome o = run(tiny_train(dir_ + "/base", {"--steps", "3"}));
  ASSERT_EQ(o.code(), 0) << o.describe();
  o = run({"convert", dir_ + "/base/checkpoint.safetensors", base, "--to", "gguf-f32"});
  ASSERT_EQ(o.code(), 0) << o.describe();
  o = run(tiny_train(dir_ + "/ft", {"--init", base, "--mode", "qlora", "--lora-rank", "4", "--lora-alpha", "12",
                                     "--lora-targets", "q,v,down", "--steps", "4", "--lr", "3e-2", "--warmup", "0"}));
  ASSERT_EQ(o.code(), 0) << o.describe();
  o = run({"convert", ft, lora, "--to", "lora-gguf"});
  ASSERT_EQ(o.code(), 0) << o.describe();
  EXPECT_NE(o.output.find("rank 4, alpha 12, targets q,v,down"), std::string::npos) << o.output;
  o = run({"convert", ft, peft, "--to", "peft"});
  ASSERT_EQ(o.code(), 0) << o.describe();

  // The base file + either adapter is the fine-tuned model: the same greedy text and the same loss.
  const std::vector<std::string> gen = {"generate", "--backend", "cpu", "--threads", "1", "--tokenizer", "bytes",
                                        "--temperature", "0", "--max-tokens", "40", "--prompt", "And the"};
  const std::vector<std::string> ev = {"eval", "--backend", "cpu", "--threads", "1", "--tokenizer", "bytes",
                                       "--corpus", corpus_, "--batch", "2", "--seq", "16", "--batches", "2"};
  auto with = [](std::vector<std::string> a, std::vector<std::string> more) {
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  const Outcome g_ft = run(with(gen, {"--checkpoint", ft})), e_ft = run(with(ev, {"--checkpoint", ft}));
  const Outcome g_base = run(with(gen, {"--checkpoint", base})), g_lora = run(with(gen, {"--checkpoint", base, "--adapter", lora}));
  ASSERT_EQ(g_ft.code(), 0) << g_ft.describe();
  ASSERT_EQ(e_ft.code(), 0) << e_ft.describe();
  ASSERT_EQ(g_lora.code(), 0) << g_lora.describe();
  auto text = [](const Outcome& x) { return x.output.substr(x.output.find("And the")); };  // after stderr's lines
  EXPECT_EQ(text(g_lora), text(g_ft));
  for (const std::string& a : {lora, peft}) {
    SCOPED_TRACE(a);
    const Outcome e = run(with(ev, {"--checkpoint", base, "--adapter", a}));
    ASSERT_EQ(e.code(), 0) << e.describe();
    EXPECT_EQ(eval_loss(e), eval_loss(e_ft));
    EXPECT_NE(eval_loss(e), "");
  }
  EXPECT_EQ(text(run(with(gen, {"--checkpoint", base, "--adapter", peft}))), text(g_ft));
  // (Without the adapter the base says something else: the comparison above could fail.)
  ASSERT_EQ(g_base.code(), 0) << g_base.describe();
  EXPECT_NE(text(g_base), text(g_ft));

  // Training continues from the PEFT adapter: its settings replace --lora-*, and after one step of a tiny
  // learning rate the adapters are still the file's (a fresh adapter would have random A and zero B).
  o = run(tiny_train(dir_ + "/ft2", {"--init", base, "--mode", "qlora", "--adapter", peft, "--steps", "1", "--lr",
                                      "1e-7", "--warmup", "0"}));
  ASSERT_EQ(o.code(), 0) << o.describe();
  EXPECT_NE(o.output.find("rank 4, alpha 12, targets q,v,down"), std::string::npos) << o.output;
  const std::string ft2 = dir_ + "/ft2/checkpoint.safetensors";
  const ModelConfig c = read_checkpoint_config(ft2);
  EXPECT_EQ(c.lora_rank, 4);
  EXPECT_EQ(c.lora_alpha, 12.0f);
  EXPECT_EQ(c.lora_targets, "q,v,down");
  const auto was = safetensors::Reader::open(ft), now = safetensors::Reader::open(ft2);
  int compared = 0;
  for (const auto& t : was.tensors()) {
    if (!t.name.ends_with(".lora_a") && !t.name.ends_with(".lora_b")) continue;  // not their AdamW moments
    ASSERT_TRUE(now.contains(t.name)) << t.name;
    const auto a = was.to_f32(t.name), b = now.to_f32(t.name);
    ASSERT_EQ(a.size(), b.size()) << t.name;
    double worst = 0, size = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i])),
                                          size = std::max(size, std::fabs(static_cast<double>(a[i])));
    EXPECT_LT(worst, 1e-5) << t.name;
    EXPECT_GT(size, 1e-3) << t.name << " is ~0 in the fine-tune: the comparison would not see a fresh adapter";
    ++compared;
  }
  EXPECT_EQ(compared, 2 * 2 * 3);  // layers x {A, B} x targets

  // Misuse: one line, exit status 1.
  o = run(tiny_train(dir_ + "/bad", {"--init", base, "--mode", "qat", "--adapter", peft, "--steps", "1"}));
  EXPECT_EQ(o.code(), 1) << o.describe();
  EXPECT_NE(o.output.find("use --mode qlora"), std::string::npos) << o.output;
  o = run(tiny_train(dir_ + "/bad", {"--mode", "qlora", "--adapter", peft, "--steps", "1"}));
  EXPECT_EQ(o.code(), 1) << o.describe();
  EXPECT_NE(o.output.find("--adapter continues a LoRA adapter on the base model of --init"), std::string::npos) << o.output;
  o = run({"convert", dir_ + "/base/checkpoint.safetensors", dir_ + "/x.gguf", "--to", "lora-gguf"});
  EXPECT_EQ(o.code(), 1) << o.describe();
  EXPECT_NE(o.output.find("only a qlora model has LoRA adapters"), std::string::npos) << o.output;
  o = run(with(gen, {"--checkpoint", base, "--adapter", base}));
  EXPECT_EQ(o.code(), 1) << o.describe();
  EXPECT_NE(o.output.find("is not a LoRA adapter"), std::string::npos) << o.output;
  o = run(tiny_train(dir_ + "/bad", {"--init", lora, "--mode", "qlora", "--steps", "1"}));
  EXPECT_EQ(o.code(), 1) << o.describe();
  EXPECT_NE(o.output.find("is a LoRA adapter: give its base model with --init"), std::string::npos) << o.output;

  // `info` says what an adapter is and how it is used.
  for (const std::string& a : {lora, peft}) {
    o = run({"info", a});
    EXPECT_EQ(o.code(), 0) << o.describe();
    EXPECT_NE(o.output.find("LoRA adapter, " + std::string(a == lora ? "llama.cpp adapter GGUF" : "PEFT folder")),
              std::string::npos) << o.output;
    EXPECT_NE(o.output.find("for a 'llama' model: rank 4, alpha 12 (scale 3), targets q,v,down, 2 layers, 12 tensors"),
              std::string::npos) << o.output;
  }
}

}  // namespace
}  // namespace edgetrain::test
