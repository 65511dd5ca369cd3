// Chat templates: how a conversation (system / user / assistant messages) becomes the text a chat model was
// trained on. Not a Jinja engine: like llama.cpp's llm_chat_apply_template, a model's Jinja template
// (GGUF tokenizer.chat_template, Hugging Face tokenizer_config.json "chat_template") is recognised by marker
// substrings and rendered by a built-in writer of that family. The rendering comes in pieces that say which
// text a fine-tune learns (the assistant's replies and the end-of-turn marker after each) and which it only
// reads, so that loss masking never has to find its way back from tokens to roles.
#pragma once

#include <string>
#include <vector>

#include "edgetrain/tokenizer.h"

namespace edgetrain {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// A stretch of the rendered text. `reply`: the assistant's content with its end-of-turn marker (what
// --train-on completion trains on).
struct ChatPiece {
  std::string text;
  bool reply = false;
};

// The templates this renderer writes: the names --chat-template takes (llama.cpp's names where it has them).
//   chatml (Qwen, SmolLM, ...), llama3, llama2, llama2-sys, llama2-sys-bos, llama2-sys-strip, mistral-v1,
//   mistral-v3, mistral-v3-tekken, mistral-v7, mistral-v7-tekken, gemma, phi3, and plain (ours, for models
//   without a template such as the byte tokenizer's: "User: ...\nAssistant: ...\n\n", see plain below).
const std::vector<std::string>& chat_template_names();
// "a, b, c": for messages.
std::string chat_template_list();

// The family of a Jinja chat template, found by the marker substrings llama.cpp's llm_chat_detect_template
// looks for ("<|im_start|>" -> chatml, "[INST]" -> the llama2 / mistral variants, ...); a known name is
// itself. "" when it is none of the families above.
std::string detect_chat_template(const std::string& jinja);

// The template a run uses. `requested`: a --chat-template value ("" = none): a name of
// chat_template_names(), or a file holding a template: a GGUF file (its tokenizer.chat_template), a Hugging
// Face tokenizer_config.json or a folder holding one (its "chat_template"), or any other text file (the
// Jinja text). Otherwise the tokenizer's own template (tokenizer.chat_template of its GGUF vocabulary),
// then `hf_folder`'s tokenizer_config.json when given, then "plain". Throws Error naming the source and the
// known names when a template is found but is none of them, or the name is unknown. `why` (optional): where
// the choice came from, for the run's log.
std::string resolve_chat_template(const std::string& requested, const Tokenizer& tok, const std::string& hf_folder = "",
                                  std::string* why = nullptr);

// The conversation rendered with template `name` (a name of chat_template_names()): the pieces in order,
// their texts concatenated being what llama.cpp's llm_chat_apply_template writes for it (plain: ours).
// add_generation_prompt: end with the header of an assistant turn (templates that have one), for
// generating the reply. Throws Error for a role other than system/user/assistant.
std::vector<ChatPiece> render_chat(const std::string& name, const std::vector<ChatMessage>& messages,
                                   bool add_generation_prompt);
std::string render_chat_text(const std::string& name, const std::vector<ChatMessage>& messages,
                             bool add_generation_prompt);

// The text that ends an assistant turn: "<|im_end|>", "<|eot_id|>", "</s>", "<end_of_turn>", "<|end|>";
// plain: "\n\n" (so a plain reply is one paragraph). Generation stops there.
std::string chat_end_of_turn(const std::string& name);

// Whether a text of this tokenizer starts with its BOS id: the GGUF vocabulary's add_bos_token, or, when the
// key is absent, llama.cpp's default (SentencePiece "llama" vocabularies add it, byte-level BPE does not).
bool tokenizer_adds_bos(const Tokenizer& tok);

// A conversation's tokens: BOS when the tokenizer adds it, then each piece through encode_special (so the
// template's markers are single special ids; pieces after the first as continuations, as one text would be
// tokenized), with `trained[i]` saying whether token i is part of a reply.
struct ChatTokens {
  std::vector<int32_t> ids;
  std::vector<uint8_t> trained;
};
ChatTokens tokenize_chat(const Tokenizer& tok, const std::vector<ChatPiece>& pieces, bool add_bos);

}  // namespace edgetrain
