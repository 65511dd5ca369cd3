// resolve_chat_template (src/text/chat_template.h): the chat template a run uses, from --chat-template or the
// files that carry one. Here, in io, because it reads GGUF metadata and Hugging Face tokenizer_config.json.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "edgetrain/error.h"
#include "edgetrain/interop.h"
#include "text/chat_template.h"

namespace edgetrain {
namespace {

namespace fs = std::filesystem;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ET_CHECK_KIND(ErrorKind::io, in.good(), "cannot read '", path, "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The "chat_template" of a tokenizer_config.json: a string, or a list of {"name", "template"} (the one named
// "default", else the first). "" when there is none.
std::string hf_config_template(const std::string& path) {
  const auto j = nlohmann::json::parse(read_text(path), nullptr, false);
  ET_CHECK(!j.is_discarded() && j.is_object(), "'", path, "' is not a JSON object");
  if (!j.contains("chat_template")) return "";
  const auto& t = j["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  ET_CHECK(t.is_array() && !t.empty(), "'", path, "': chat_template must be a string or a list of {name, template}");
  for (const auto& e : t)
    if (e.is_object() && e.value("name", "") == "default" && e.contains("template") && e["template"].is_string())
      return e["template"].get<std::string>();
  ET_CHECK(t[0].is_object() && t[0].contains("template") && t[0]["template"].is_string(), "'", path,
           "': chat_template[0] has no \"template\" string");
  return t[0]["template"].get<std::string>();
}

std::string detected(const std::string& jinja, const std::string& source) {
  const std::string name = detect_chat_template(jinja);
  ET_CHECK(!name.empty(), "the chat template of ", source, " is none of the known families (", chat_template_list(),
           "); choose one with --chat-template NAME");
  return name;
}

}  // namespace

std::string resolve_chat_template(const std::string& requested, const Tokenizer& tok, const std::string& hf_folder,
                                  std::string* why) {
  auto say = [&](const std::string& s) {
    if (why) *why = s;
  };
  const auto& names = chat_template_names();
  if (!requested.empty()) {
    if (std::find(names.begin(), names.end(), requested) != names.end()) {
      say("--chat-template " + requested);
      return requested;
    }
    std::error_code ec;
    ET_CHECK(fs::exists(requested, ec), "unknown chat template '", requested, "': known templates are ",
             chat_template_list(), " (or a GGUF file, tokenizer_config.json or template file holding one)");
    std::string jinja, source = "'" + requested + "'";
    if (fs::is_directory(requested, ec)) {
      const std::string cfg = (fs::path(requested) / "tokenizer_config.json").string();
      ET_CHECK(fs::exists(cfg, ec), "--chat-template '", requested, "': a folder without tokenizer_config.json");
      jinja = hf_config_template(cfg);
      source = "'" + cfg + "'";
    } else if (is_gguf_file(requested)) {
      jinja = read_gguf_vocab(requested).chat_template;
    } else if (fs::path(requested).extension() == ".json") {
      jinja = hf_config_template(requested);
    } else {
      jinja = read_text(requested);
    }
    ET_CHECK(!jinja.empty(), "--chat-template ", source, " holds no chat template");
    const std::string name = detected(jinja, source);
    say(name + ", detected in " + source);
    return name;
  }
  const std::string own = tok.gguf_vocab().chat_template;
  if (!own.empty()) {
    const std::string name = detected(own, "the tokenizer (tokenizer.chat_template)");
    say(name + ", detected in the tokenizer's tokenizer.chat_template");
    return name;
  }
  if (!hf_folder.empty()) {
    const std::string cfg = (fs::path(hf_folder) / "tokenizer_config.json").string();
    std::error_code ec;
    if (fs::exists(cfg, ec)) {
      const std::string jinja = hf_config_template(cfg);
      if (!jinja.empty()) {
        const std::string name = detected(jinja, "'" + cfg + "'");
        say(name + ", detected in '" + cfg + "'");
        return name;
      }
    }
  }
  say("plain: the tokenizer has no chat template");
  return "plain";
}

}  // namespace edgetrain
