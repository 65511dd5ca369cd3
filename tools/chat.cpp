// `edgetrain chat`: talk to a fine-tuned checkpoint through its chat template — one reply to --prompt, or a
// conversation read from stdin line by line (each reply streamed as it is sampled, the history kept).
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "edgetrain/checkpoint.h"
#include "edgetrain/interop.h"
#include "edgetrain/trainer.h"
#include "text/chat_template.h"
#include "tools/commands.h"
#include "train/samples.h"

namespace edgetrain::cli {

std::string checkpoint_chat_template(const std::string& checkpoint, const Tokenizer& tok, const std::string& requested,
                                     std::string* why) {
  const bool model_file = is_gguf_file(checkpoint) || is_hf_folder(checkpoint);  // not a checkpoint: no record
  if (requested.empty() && !model_file) {
    auto meta = read_checkpoint_metadata(checkpoint);
    if (meta.count("train_options")) {
      const auto j = nlohmann::json::parse(meta["train_options"], nullptr, false);
      const std::string recorded = j.is_object() ? j.value("chat_template", "") : "";
      if (!recorded.empty()) {
        if (why) *why = "the one the checkpoint was fine-tuned with";
        return resolve_chat_template(recorded, tok);
      }
    }
  }
  return resolve_chat_template(requested, tok, is_hf_folder(checkpoint) ? checkpoint : "", why);
}

Runner add_chat(CLI::App& app) {
  auto* sub = app.add_subcommand("chat",
      "Chat with a checkpoint through its chat template (the one it was fine-tuned with, else the tokenizer's,\n"
      "else plain). With --prompt: one reply; otherwise each line of stdin is a user message and the\n"
      "conversation is kept. Replies stop at EOS or the template's end of turn. Examples:\n"
      "  edgetrain chat --checkpoint runs/qa/checkpoint.safetensors --prompt \"Which book says: In the beginning?\"\n"
      "  edgetrain chat --checkpoint runs/qa/checkpoint.safetensors --system \"Answer briefly.\"");
  struct Flags {
    std::string checkpoint, adapter, system, prompt, chat_template, backend = "auto", device, tokenizer;
    SampleOptions s;
    int threads = 0;
  };
  auto f = std::make_shared<Flags>();
  f->s.max_tokens = 256;
  f->s.temperature = 0.7f;
  sub->add_option("--checkpoint", f->checkpoint,
                  "Checkpoint file (.safetensors), GGUF file or Hugging Face folder (imported as in convert: qat, group 32)")
      ->required();
  sub->add_option("--adapter", f->adapter,
                  "LoRA adapter (llama.cpp adapter GGUF or PEFT folder) to apply on top of --checkpoint's model");
  sub->add_option("--system", f->system, "System message at the start of the conversation");
  auto* prompt_opt = sub->add_option("--prompt", f->prompt, "One user message: print the reply and exit");
  sub->add_option("--chat-template", f->chat_template, "Override the template (a name or a file holding one)");
  sub->add_option("--max-tokens", f->s.max_tokens, "Most tokens per reply")->capture_default_str();
  add_sampling_flags(sub, f->s);
  add_model_run_flags(sub, f->backend, f->device, f->threads, f->tokenizer);
  return [f, prompt_opt] {
    Loaded l = load(f->checkpoint, f->adapter, f->backend, f->device, f->threads, f->tokenizer);
    std::string why;
    const std::string tmpl = checkpoint_chat_template(f->checkpoint, *l.tok, f->chat_template, &why);
    std::fprintf(stderr, "chat: template %s (%s)\n", tmpl.c_str(), why.c_str());
    std::vector<ChatMessage> messages;
    if (!f->system.empty()) messages.push_back({"system", f->system});
    auto stream = [](const std::string& t) {
      std::fputs(t.c_str(), stdout);
      std::fflush(stdout);
    };
    if (prompt_opt->count() > 0) {
      messages.push_back({"user", f->prompt});
      training::generate_reply(*l.model, *l.tok, tmpl, messages, f->s, stream);
      std::printf("\n");
      return 0;
    }
    const bool tty = ::isatty(STDIN_FILENO);
    if (tty) std::fprintf(stderr, "(one message per line; Ctrl-D ends)\n");
    SampleOptions so = f->s;
    for (std::string line;;) {
      if (tty) std::fprintf(stderr, "> ");
      if (!std::getline(std::cin, line)) break;
      if (line.empty()) continue;
      messages.push_back({"user", line});
      const std::string reply = training::generate_reply(*l.model, *l.tok, tmpl, messages, so, stream);
      std::printf("\n");
      std::fflush(stdout);
      messages.push_back({"assistant", reply});
      ++so.seed;  // each turn its own draw, still reproducible
    }
    return 0;
  };
}

}  // namespace edgetrain::cli
