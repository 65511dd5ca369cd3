// The chat template families of chat_template.h: detection by marker substrings and one writer per family.
// The formats are llama.cpp's llm_chat_apply_template (src/llama-chat.cpp), which were taken from the
// models' own Jinja templates; each writer below produces the same text, cut into prompt and reply pieces.
#include "text/chat_template.h"

#include <algorithm>
#include <cctype>

#include "edgetrain/error.h"

namespace edgetrain {
namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// Collects pieces, merging neighbours of the same kind.
struct Out {
  std::vector<ChatPiece> pieces;
  void add(const std::string& text, bool reply) {
    if (text.empty()) return;
    if (!pieces.empty() && pieces.back().reply == reply) pieces.back().text += text;
    else pieces.push_back({text, reply});
  }
  void prompt(const std::string& text) { add(text, false); }
  void reply(const std::string& text) { add(text, true); }
};

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

void render_llama2(const std::string& name, const std::vector<ChatMessage>& msgs, Out& out) {
  const bool system_block = name != "llama2";           // <<SYS>> ... <</SYS>>
  const bool bos_in_history = name == "llama2-sys-bos";  // "<s>[INST] " for the later turns
  const bool strip = name == "llama2-sys-strip";
  out.prompt("[INST] ");
  bool in_turn = true;
  for (const ChatMessage& m : msgs) {
    const std::string c = strip ? trim(m.content) : m.content;
    if (!in_turn) {
      out.prompt(bos_in_history ? "<s>[INST] " : "[INST] ");
      in_turn = true;
    }
    if (m.role == "system") out.prompt(system_block ? "<<SYS>>\n" + c + "\n<</SYS>>\n\n" : c + "\n");
    else if (m.role == "user") out.prompt(c + " [/INST]");
    else {
      out.reply(c + "</s>");
      in_turn = false;
    }
  }
}

void render_mistral(const std::string& name, const std::vector<ChatMessage>& msgs, Out& out) {
  if (starts_with(name, "mistral-v7")) {
    const std::string sp = name == "mistral-v7" ? " " : "";
    for (const ChatMessage& m : msgs) {
      if (m.role == "system") out.prompt("[SYSTEM_PROMPT]" + sp + m.content + "[/SYSTEM_PROMPT]");
      else if (m.role == "user") out.prompt("[INST]" + sp + m.content + "[/INST]");
      else out.reply(sp + m.content + "</s>");
    }
    return;
  }
  const std::string lead = name == "mistral-v1" ? " " : "";
  const std::string trail = name == "mistral-v3-tekken" ? "" : " ";
  const bool trim_reply = name == "mistral-v3";
  bool in_turn = false;
  for (const ChatMessage& m : msgs) {
    if (!in_turn) {
      out.prompt(lead + "[INST]" + trail);
      in_turn = true;
    }
    if (m.role == "system") out.prompt(m.content + "\n\n");
    else if (m.role == "user") out.prompt(m.content + lead + "[/INST]");
    else {
      out.reply(trail + (trim_reply ? trim(m.content) : m.content) + "</s>");
      in_turn = false;
    }
  }
}

void render_gemma(const std::vector<ChatMessage>& msgs, bool gen, Out& out) {
  std::string system;  // Gemma has no system turn: it goes in front of the next user message
  for (const ChatMessage& m : msgs) {
    if (m.role == "system") {
      system += trim(m.content);
      continue;
    }
    const bool model = m.role == "assistant";
    out.prompt(std::string("<start_of_turn>") + (model ? "model" : m.role) + "\n");
    if (!system.empty() && !model) {
      out.prompt(system + "\n\n");
      system.clear();
    }
    if (model) out.reply(trim(m.content) + "<end_of_turn>");
    else out.prompt(trim(m.content) + "<end_of_turn>");
    out.prompt("\n");
  }
  if (gen) out.prompt("<start_of_turn>model\n");
}

// Templates that write every message as header + content + end marker + separator.
void render_turns(const std::vector<ChatMessage>& msgs, bool gen, Out& out, const std::string& head_open,
                  const std::string& head_close, const std::string& end, const std::string& sep, bool trim_content) {
  for (const ChatMessage& m : msgs) {
    out.prompt(head_open + m.role + head_close);
    const std::string body = (trim_content ? trim(m.content) : m.content) + end;
    if (m.role == "assistant") out.reply(body);
    else out.prompt(body);
    out.prompt(sep);
  }
  if (gen) out.prompt(head_open + "assistant" + head_close);
}

// plain (ours): a system message is a paragraph of its own, then "User: <text>\n" and "Assistant: <text>\n\n";
// the reply is " <text>\n\n" (its leading space included, so that a BPE tokenizer sees " word" as it would in
// running text); the generation prompt is "Assistant:".
void render_plain(const std::vector<ChatMessage>& msgs, bool gen, Out& out) {
  for (const ChatMessage& m : msgs) {
    if (m.role == "system") out.prompt(m.content + "\n\n");
    else if (m.role == "user") out.prompt("User: " + m.content + "\n");
    else {
      out.prompt("Assistant:");
      out.reply(" " + m.content + "\n\n");
    }
  }
  if (gen) out.prompt("Assistant:");
}

}  // namespace

const std::vector<std::string>& chat_template_names() {
  static const std::vector<std::string> names = {
      "chatml",     "llama3",     "llama2",           "llama2-sys", "llama2-sys-bos",    "llama2-sys-strip",
      "mistral-v1", "mistral-v3", "mistral-v3-tekken", "mistral-v7", "mistral-v7-tekken", "gemma",
      "phi3",       "plain"};
  return names;
}

std::string chat_template_list() {
  std::string s;
  for (const std::string& n : chat_template_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

std::string detect_chat_template(const std::string& t) {
  const auto& names = chat_template_names();
  if (std::find(names.begin(), names.end(), t) != names.end()) return t;
  auto has = [&t](const char* s) { return t.find(s) != std::string::npos; };
  // The order of llama.cpp's checks, for the families written here: a template matching an earlier family's
  // markers is that family, as there.
  if (has("<|im_start|>")) return has("<|im_sep|>") || has("<end_of_utterance>") ? "" : "chatml";  // phi4, SmolVLM
  if (t.rfind("mistral", 0) == 0 || has("[INST]")) {
    if (has("[SYSTEM_PROMPT]")) return "mistral-v7";
    if (has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]")) {
      if (has(" [INST]")) return "mistral-v1";
      if (has("\"[INST]\"")) return "mistral-v3-tekken";
      return "mistral-v3";
    }
    if (has("content.strip()")) return "llama2-sys-strip";
    if (has("bos_token + '[INST]")) return "llama2-sys-bos";
    if (has("<<SYS>>")) return "llama2-sys";
    return "llama2";
  }
  if (has("<|assistant|>") && has("<|end|>")) return "phi3";
  // Families llama.cpp checks before gemma and llama3 whose markers could also be in those templates.
  if (has("[gMASK]<sop>") || (has("<|assistant|>") && has("<|user|>")) || (has("<|user|>") && has("<|endoftext|>")) ||
      has("bos_token + message['role']"))
    return "";
  if (has("<start_of_turn>")) return "gemma";
  if (has("'\\n\\nAssistant: ' + eos_token") || has("GPT4 Correct ") || (has("USER: ") && has("ASSISTANT: ")) ||
      (has("### Instruction:") && has("<|EOT|>")) || (has("<|START_OF_TURN_TOKEN|>") && has("<|USER_TOKEN|>")))
    return "";  // orion, openchat, vicuna, deepseek, command-r
  if (has("<|start_header_id|>") && has("<|end_header_id|>")) return "llama3";
  return "";
}

std::vector<ChatPiece> render_chat(const std::string& name, const std::vector<ChatMessage>& msgs, bool gen) {
  const auto& names = chat_template_names();
  ET_CHECK(std::find(names.begin(), names.end(), name) != names.end(), "unknown chat template '", name,
           "': known templates are ", chat_template_list());
  for (size_t i = 0; i < msgs.size(); ++i)
    ET_CHECK(msgs[i].role == "system" || msgs[i].role == "user" || msgs[i].role == "assistant", "chat message ", i,
             ": role '", msgs[i].role, "' is not system, user or assistant");
  Out out;
  if (name == "chatml") render_turns(msgs, gen, out, "<|im_start|>", "\n", "<|im_end|>", "\n", false);
  else if (name == "llama3") render_turns(msgs, gen, out, "<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>", "", true);
  else if (name == "phi3") render_turns(msgs, gen, out, "<|", "|>\n", "<|end|>", "\n", false);
  else if (name == "gemma") render_gemma(msgs, gen, out);
  else if (starts_with(name, "llama2")) render_llama2(name, msgs, out);
  else if (starts_with(name, "mistral")) render_mistral(name, msgs, out);
  else render_plain(msgs, gen, out);
  return out.pieces;
}

std::string render_chat_text(const std::string& name, const std::vector<ChatMessage>& msgs, bool gen) {
  std::string s;
  for (const ChatPiece& p : render_chat(name, msgs, gen)) s += p.text;
  return s;
}

std::string chat_end_of_turn(const std::string& name) {
  if (name == "chatml") return "<|im_end|>";
  if (name == "llama3") return "<|eot_id|>";
  if (name == "phi3") return "<|end|>";
  if (name == "gemma") return "<end_of_turn>";
  if (starts_with(name, "llama2") || starts_with(name, "mistral")) return "</s>";
  return "\n\n";
}

bool tokenizer_adds_bos(const Tokenizer& tok) {
  if (tok.bos() < 0) return false;
  const GgufVocab v = tok.gguf_vocab();
  return v.add_bos >= 0 ? v.add_bos == 1 : v.model == "llama";
}

ChatTokens tokenize_chat(const Tokenizer& tok, const std::vector<ChatPiece>& pieces, bool add_bos) {
  ChatTokens t;
  if (add_bos) {
    t.ids.push_back(tok.bos());
    t.trained.push_back(0);
  }
  // A piece continues the text before it unless that ended in a special token, after which llama.cpp
  // starts a new stretch of text (a SentencePiece space prefix): tokenized as the whole text would be.
  for (size_t i = 0; i < pieces.size(); ++i) {
    const bool continuation = i > 0 && !tok.is_special(t.ids.back());  // pieces are never empty
    const std::vector<int32_t> ids = tok.encode_special(pieces[i].text, continuation);
    t.ids.insert(t.ids.end(), ids.begin(), ids.end());
    t.trained.insert(t.trained.end(), ids.size(), pieces[i].reply ? 1 : 0);
  }
  return t;
}

}  // namespace edgetrain
