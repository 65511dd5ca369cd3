// Bad input to the real `edgetrain` CLI in child processes: every numeric flag of `train` out of range,
// config files with bad fields, and bad corpora (binary, empty, unreadable). Each must end in one message
// naming the problem, the exit status of its error kind, and nothing written.
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "harness/checkpoint_files.h"
#include "harness/cli_child.h"

namespace edgetrain::test {
namespace {

namespace fs = std::filesystem;

using Reliability = CliTest;

// True when `text` names `flag` as a flag ("--group-size") or as its config field ("group_size").
bool names_flag(const std::string& text, const std::string& flag) {
  std::string field = flag.substr(2);
  for (char& c : field) c = c == '-' ? '_' : c;
  return text.find(flag) != std::string::npos || text.find(field) != std::string::npos;
}

// Every numeric flag of `train` with zero, negative, NaN/Inf and out-of-range values: a non-zero exit (no
// signal) and a message naming the flag, before anything is written.
TEST_F(Reliability, BadTrainFlagsAreRejectedNamingTheFlag) {
  const std::vector<std::vector<std::string>> table = {
      {"--batch", "0"},          {"--batch", "-1"},         {"--batch", "nan"},         {"--seq", "0"},
      {"--seq", "999"},          {"--accum", "0"},          {"--steps", "0"},           {"--steps", "-5"},
      {"--lr", "0"},             {"--lr", "-1"},            {"--lr", "nan"},            {"--lr", "inf"},
      {"--min-lr-ratio", "-0.1"}, {"--min-lr-ratio", "2"},  {"--min-lr-ratio", "nan"},  {"--warmup", "-1"},
      {"--weight-decay", "-1"},  {"--weight-decay", "nan"}, {"--beta1", "1"},           {"--beta1", "nan"},
      {"--beta2", "-0.5"},       {"--grad-clip", "-1"},     {"--grad-clip", "nan"},     {"--eval-every", "0"},
      {"--eval-batches", "0"},   {"--checkpoint-every", "0"}, {"--log-every", "-2"},    {"--val-fraction", "0"},
      {"--val-fraction", "0.6"}, {"--val-fraction", "nan"}, {"--time-limit", "-1"},     {"--time-limit", "nan"},
      {"--threads", "-1"},       {"--sample-tokens", "-1"}, {"--group-size", "0"},      {"--group-size", "48"},
      {"--lora-rank", "0"},      {"--lora-alpha", "-1"},    {"--lora-alpha", "nan"},    {"--mode", "int3"},
      {"--preset", "huge"},      {"--backend", "tpu"},      {"--lora-targets", "q,x"},  {"--steps", "ten"},
      {"--backend", "vulkan,tpu"}, {"--backend", "cpu,cpu"}, {"--backend", "auto,cpu"}, {"--backend", "cpu,"},
      {"--max-skipped-steps", "0"}, {"--time", "0"},      {"--time", "-1m"},          {"--time", "4x"},
      {"--time", "nan"},         {"--time", "4m30"},        {"--time-limit", "5", "--time", "1m"},
      {"--warmup", "0", "--time", "1m"}, {"--time", "1m", "--resume"},
  };
  int rejected = 0;
  for (const auto& row : table) {
    const std::string out = dir_ + "/bad";
    std::vector<std::string> args = {"train", "--preset", "tiny", "--corpus", corpus_, "--out", out, "--no-progress",
                                     "--sample-tokens", "0", "--backend", "cpu", "--seq", "16"};
    // Flags given in the base line are replaced, not repeated.
    for (size_t i = 0; i + 1 < args.size(); ++i)
      if (args[i] == row[0]) args.erase(args.begin() + static_cast<long>(i), args.begin() + static_cast<long>(i) + 2);
    args.insert(args.end(), row.begin(), row.end());
    if (row[0].rfind("--lora", 0) == 0) args.insert(args.end(), {"--mode", "qlora"});
    Outcome r = run(args, 30);
    SCOPED_TRACE(row[0] + " " + row[1]);
    ASSERT_TRUE(r.exited()) << r.describe();
    EXPECT_NE(r.code(), 0) << r.describe();
    // Values CLI11 itself rejects keep its exit codes (100 and up); the rest are edgetrain's misuse errors.
    if (r.output.find("edgetrain: error:") != std::string::npos) {
      EXPECT_EQ(r.code(), kExitMisuse) << r.describe();
    }
    EXPECT_TRUE(names_flag(r.output, row[0])) << "the message does not name " << row[0] << ":\n" << r.output;
    EXPECT_FALSE(fs::exists(out + "/checkpoint.safetensors"));
    rejected += r.code() != 0;
  }
  std::printf("[reliability] %d of %zu bad flag values rejected\n", rejected, table.size());
}

// Model config files: unknown fields, wrong types and bad values are rejected naming the field.
TEST_F(Reliability, BadConfigJsonIsRejectedNamingTheField) {
  const std::vector<std::pair<std::string, std::string>> table = {
      {R"({"preset": "tiny", "bogus": 1})", "bogus"},        {R"({"preset": "tiny", "dim": "32"})", "dim"},
      {R"({"preset": "tiny", "dim": -32})", "dim"},          {R"({"preset": "tiny", "dim": 32.5})", "dim"},
      {R"({"preset": "tiny", "n_heads": 3})", "n_heads"},    {R"({"preset": "tiny", "tied_head": 1})", "tied_head"},
      {R"({"preset": "tiny", "rope_theta": 0.5})", "rope_theta"}, {R"({"preset": "tiny", "norm_eps": -1})", "norm_eps"},
      {R"({"preset": "tiny", "max_seq": 0})", "max_seq"},    {R"({"preset": 7})", "preset"},
      {R"({"preset": "tiny", "n_layers": 1e40})", "n_layers"}, {R"({"preset": "tiny",)", "not valid JSON"},
      {R"([1, 2])", "JSON object"},
  };
  for (size_t i = 0; i < table.size(); ++i) {
    const std::string cfg = dir_ + "/config" + std::to_string(i) + ".json";
    std::ofstream(cfg) << table[i].first;
    Outcome r = run({"train", "--config", cfg, "--corpus", corpus_, "--out", dir_ + "/bad", "--backend", "cpu",
                     "--no-progress"}, 30);
    SCOPED_TRACE(table[i].first);
    ASSERT_TRUE(r.exited()) << r.describe();
    EXPECT_EQ(r.code(), kExitMisuse) << r.describe();
    EXPECT_NE(r.output.find(table[i].second), std::string::npos) << r.output;
  }
  Outcome r = run({"train", "--config", dir_ + "/missing.json", "--corpus", corpus_, "--out", dir_ + "/bad"}, 30);
  EXPECT_EQ(r.code(), kExitIo) << r.describe();
  EXPECT_NE(r.output.find("--config"), std::string::npos) << r.output;
}

// Corpora: missing, a directory, empty, shorter than one training + validation window: clear messages.
// Random bytes are valid input for the byte tokenizer: they must train.
TEST_F(Reliability, BadCorporaGiveClearMessagesAndBinaryTrains) {
  const std::string empty = dir_ + "/empty.txt", small = dir_ + "/small.txt", binary = dir_ + "/random.bin";
  std::ofstream(empty).flush();
  std::ofstream(small) << "too short";
  {
    std::mt19937 rng(7);
    std::ofstream b(binary, std::ios::binary);
    for (int i = 0; i < 8192; ++i) b.put(static_cast<char>(rng() & 0xff));
  }
  const std::vector<std::pair<std::string, std::string>> table = {
      {dir_ + "/missing.txt", "does not exist"}, {dir_, "not a file"}, {empty, "too small"}, {small, "too small"}};
  for (const auto& [corpus, want] : table) {
    Outcome r = run({"train", "--preset", "tiny", "--corpus", corpus, "--seq", "16", "--out", dir_ + "/bad",
                     "--backend", "cpu", "--no-progress"}, 30);
    SCOPED_TRACE(corpus);
    ASSERT_TRUE(r.exited()) << r.describe();
    EXPECT_NE(r.code(), 0) << r.describe();
    EXPECT_NE(r.output.find(want), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(corpus), std::string::npos) << "the message should name the corpus:\n" << r.output;
  }
  const std::string out = dir_ + "/bin";
  std::vector<std::string> args = tiny_train(out, {"--steps", "3", "--eval-every", "1000"});
  for (auto& a : args)
    if (a == corpus_) a = binary;
  Outcome r = run(args);
  ASSERT_EQ(r.code(), 0) << r.describe();
  load_ok(out + "/checkpoint.safetensors");
  expect_all_finite(out + "/checkpoint.safetensors");
}

}  // namespace
}  // namespace edgetrain::test
