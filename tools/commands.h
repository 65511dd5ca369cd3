// The edgetrain CLI's subcommands: each adds itself to the app and runs when chosen.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>

#include "edgetrain/backend.h"
#include "edgetrain/error.h"
#include "edgetrain/model.h"
#include "edgetrain/tokenizer.h"
#include "edgetrain/trainer.h"

namespace edgetrain::cli {

// The exit status says what kind of error ended the run, so a script can tell bad input from a device or
// file-system failure without reading the message (README, "What happens when things go wrong"). CLI11's
// own parse errors keep its codes (100 and up).
inline int exit_status(ErrorKind k) {
  switch (k) {
    case ErrorKind::misuse: return 1;
    case ErrorKind::unsupported: return 2;
    case ErrorKind::device: return 3;
    case ErrorKind::io: return 4;
    case ErrorKind::numeric: return 5;
  }
  return 1;
}

// A model ready to use (generate.cpp): a checkpoint, GGUF file or Hugging Face folder (with `adapter`, a LoRA
// adapter on top), its model on a backend, and its tokenizer (the file's own, or tokenizer_override), checked
// to fit each other.
struct Loaded {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
};
Loaded load(const std::string& path, const std::string& adapter, const std::string& backend, const std::string& device,
            int threads, const std::string& tokenizer_override);
// The chat template to use with a checkpoint (chat.cpp): `requested` (--chat-template) when given, else the one
// its fine-tune recorded, else the tokenizer's own (resolve_chat_template), else plain.
std::string checkpoint_chat_template(const std::string& checkpoint, const Tokenizer& tok, const std::string& requested,
                                     std::string* why = nullptr);

// eval --data (eval_data.cpp): the loss on the reply tokens of JSONL samples, and the exact-match accuracy of
// greedy replies. Returns the exit status.
struct EvalDataOptions {
  std::string checkpoint, data, chat_template;
  int64_t batch = 8, seq = 0;        // seq 0: the longest sample's tokens - 1, at most the model's max_seq
  int64_t exact_match = -1;          // samples to generate replies for (-1: all)
  int64_t max_reply_tokens = 32;     // exact match only when every reference reply is at most this long
  bool json = false;
};
int eval_data(Loaded& l, const EvalDataOptions& o);

// Flags several subcommands share (generate.cpp): sampling (--temperature, --top-k, --top-p, --seed), and
// where a model file runs (--backend, --device, --threads, --tokenizer).
void add_sampling_flags(CLI::App* sub, SampleOptions& s);
void add_model_run_flags(CLI::App* sub, std::string& backend, std::string& device, int& threads,
                         std::string& tokenizer);

// Registers a subcommand; returns the callback to run when it was chosen.
using Runner = std::function<int()>;
Runner add_info(CLI::App& app);
Runner add_selftest(CLI::App& app);
Runner add_train(CLI::App& app);
Runner add_generate(CLI::App& app);
Runner add_eval(CLI::App& app);
Runner add_chat(CLI::App& app);
Runner add_bench(CLI::App& app);
Runner add_convert(CLI::App& app);

}  // namespace edgetrain::cli
