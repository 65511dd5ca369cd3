// GGUF tokenizer metadata (the tokenizer.ggml.* keys) <-> GgufVocab, the vocabulary description the text
// layer builds tokenizers from; and tokenizer-only GGUF files. Nothing here makes a tokenizer.
#include "edgetrain/error.h"
#include "edgetrain/interop.h"
#include "io/gguf.h"

namespace edgetrain::gguf {

GgufVocab read_vocab(const File& f) {
  GgufVocab v;
  const std::string& src = f.source();
  if (!f.has("tokenizer.ggml.model")) return v;
  v.model = f.get_string("tokenizer.ggml.model");
  if (f.has("tokenizer.ggml.pre")) v.pre = f.get_string("tokenizer.ggml.pre");
  // An array whose elements pass `ok`, or null when the key is absent.
  auto array = [&](const char* key, bool (*ok)(VType), const char* what) -> const std::vector<Value>* {
    const Value* x = f.find(key);
    if (!x) return nullptr;
    ET_CHECK(x->type == VType::ARRAY && ok(x->elem), "file ", src, ": metadata key '", key, "' must be an array of ",
             what);
    return &x->arr;
  };
  auto is_string = [](VType t) { return t == VType::STRING; };
  auto is_number = [](VType t) { return t != VType::STRING && t != VType::ARRAY && t != VType::BOOL; };
  auto is_integer = [](VType t) {
    return t != VType::STRING && t != VType::ARRAY && t != VType::BOOL && t != VType::F32 && t != VType::F64;
  };
  const auto* tokens = array("tokenizer.ggml.tokens", is_string, "strings");
  ET_CHECK(tokens, "file ", src, ": tokenizer.ggml.model is set but tokenizer.ggml.tokens is missing");
  v.tokens.reserve(tokens->size());
  for (const Value& e : *tokens) v.tokens.push_back(e.s);
  if (const auto* a = array("tokenizer.ggml.scores", is_number, "numbers")) {
    ET_CHECK(a->size() == v.tokens.size(), "file ", src, ": tokenizer.ggml.scores has ", a->size(),
             " entries but tokenizer.ggml.tokens has ", v.tokens.size());
    for (const Value& e : *a) v.scores.push_back(e.is_float() ? static_cast<float>(e.f) : static_cast<float>(e.i));
  }
  if (const auto* a = array("tokenizer.ggml.token_type", is_integer, "integers")) {
    ET_CHECK(a->size() == v.tokens.size(), "file ", src, ": tokenizer.ggml.token_type has ", a->size(),
             " entries but tokenizer.ggml.tokens has ", v.tokens.size());
    for (const Value& e : *a) {
      // Out-of-range values become -1, which the text layer's vocabulary check rejects naming the index.
      v.token_types.push_back(e.i >= 0 && e.i <= 255 ? static_cast<int32_t>(e.i) : -1);
    }
  }
  if (const auto* a = array("tokenizer.ggml.merges", is_string, "strings"))
    for (const Value& e : *a) v.merges.push_back(e.s);
  auto id = [&](const char* key, int64_t& out) {
    if (!f.has(key)) return;
    const int64_t x = f.get_int(key);
    ET_CHECK(x >= 0 && x < static_cast<int64_t>(v.tokens.size()), "file ", src, ": ", key, " = ", x,
             " is outside the vocabulary [0, ", v.tokens.size(), ")");
    out = x;
  };
  id("tokenizer.ggml.bos_token_id", v.bos);
  id("tokenizer.ggml.eos_token_id", v.eos);
  id("tokenizer.ggml.unknown_token_id", v.unk);
  id("tokenizer.ggml.padding_token_id", v.pad);
  auto flag = [&](const char* key, int& out) {
    const Value* x = f.find(key);
    if (!x) return;
    ET_CHECK(x->type == VType::BOOL, "file ", src, ": metadata key '", key, "' must be a bool");
    out = x->u ? 1 : 0;
  };
  flag("tokenizer.ggml.add_bos_token", v.add_bos);
  flag("tokenizer.ggml.add_eos_token", v.add_eos);
  flag("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  if (const Value* x = f.find("tokenizer.chat_template")) {
    ET_CHECK(x->type == VType::STRING, "file ", src, ": metadata key 'tokenizer.chat_template' must be a string");
    v.chat_template = x->s;
  }
  return v;
}

void add_vocab(Writer& w, const GgufVocab& v) {
  w.add_kv("tokenizer.ggml.model", Value::str(v.model));
  if (!v.pre.empty()) w.add_kv("tokenizer.ggml.pre", Value::str(v.pre));
  w.add_kv("tokenizer.ggml.tokens", Value::strings(v.tokens));
  if (!v.scores.empty()) w.add_kv("tokenizer.ggml.scores", Value::f32s(v.scores));
  if (!v.token_types.empty()) w.add_kv("tokenizer.ggml.token_type", Value::i32s(v.token_types));
  if (!v.merges.empty() || v.model == "gpt2") w.add_kv("tokenizer.ggml.merges", Value::strings(v.merges));
  const std::pair<const char*, int64_t> ids[] = {{"tokenizer.ggml.bos_token_id", v.bos},
                                                 {"tokenizer.ggml.eos_token_id", v.eos},
                                                 {"tokenizer.ggml.unknown_token_id", v.unk},
                                                 {"tokenizer.ggml.padding_token_id", v.pad}};
  for (const auto& [key, id] : ids)
    if (id >= 0) w.add_kv(key, Value::u32(static_cast<uint32_t>(id)));
  const std::pair<const char*, int> flags[] = {{"tokenizer.ggml.add_bos_token", v.add_bos},
                                               {"tokenizer.ggml.add_eos_token", v.add_eos},
                                               {"tokenizer.ggml.add_space_prefix", v.add_space_prefix}};
  for (const auto& [key, f] : flags)
    if (f >= 0) w.add_kv(key, Value::boolean(f != 0));
  if (!v.chat_template.empty()) w.add_kv("tokenizer.chat_template", Value::str(v.chat_template));
}

}  // namespace edgetrain::gguf

namespace edgetrain {

GgufVocab read_gguf_vocab(const std::string& path) { return gguf::read_vocab(gguf::File::open(path)); }

void save_gguf_tokenizer(const std::string& path, const GgufVocab& vocab) {
  gguf::Writer w;
  w.add_kv("general.name", gguf::Value::str("edgetrain tokenizer"));
  gguf::add_vocab(w, vocab);
  w.save(path);
}

}  // namespace edgetrain
