// The checks and helpers every GGUF vocabulary goes through (see vocab.h).
#include "text/vocab.h"

#include <cstdio>
#include <limits>

#include "edgetrain/error.h"

namespace edgetrain::text {
namespace {

// 64-bit FNV-1a, fed with length-prefixed strings so that different token lists never hash alike by shifting
// bytes between neighbours.
class Fnv1a {
 public:
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ b[i]) * 0x100000001B3ull;
  }
  void str(std::string_view s) {
    const uint64_t n = s.size();
    bytes(&n, sizeof n);
    bytes(s.data(), s.size());
  }
  template <typename T>
  void value(T v) {
    bytes(&v, sizeof v);
  }
  std::string hex() const {
    char buf[20];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h_));
    return buf;
  }

 private:
  uint64_t h_ = 0xCBF29CE484222325ull;
};

}  // namespace

int byte_token_value(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  const int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::string byte_token_text(int b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "<0x%02X>", b);
  return buf;
}

std::string shown(std::string_view t) {
  std::string out = "\"";
  for (size_t i = 0; i < t.size() && i < 48; ++i) {
    const unsigned char c = static_cast<unsigned char>(t[i]);
    if (c < 0x20 || c == 0x7F || c == '"' || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (t.size() > 48) out += "...";
  return out + "\"";
}

std::string gguf_tokenizer_name(const GgufVocab& v) {
  Fnv1a h;
  h.str(v.model);
  h.str(v.pre);
  h.value<uint64_t>(v.tokens.size());
  for (const auto& t : v.tokens) h.str(t);
  h.value<uint64_t>(v.scores.size());
  for (float f : v.scores) h.value(f);
  h.value<uint64_t>(v.token_types.size());
  for (int32_t t : v.token_types) h.value(t);
  h.value<uint64_t>(v.merges.size());
  for (const auto& m : v.merges) h.str(m);
  for (int64_t id : {v.bos, v.eos, v.unk, v.pad}) h.value(id);
  for (int f : {v.add_bos, v.add_eos, v.add_space_prefix}) h.value(f);
  return "gguf-" + v.model + "-" + h.hex();
}

CheckedVocab check_vocab(const GgufVocab& v, const std::string& source) {
  CheckedVocab c{v, "file " + source, {}, {}, 0};
  const std::string& src = c.src;
  ET_CHECK(!v.model.empty(), src, ": no tokenizer (metadata key 'tokenizer.ggml.model' is missing)");
  ET_CHECK(v.model == "gpt2" || v.model == "llama", src, ": tokenizer.ggml.model '", v.model,
           "' is not supported (edgetrain reads \"gpt2\", byte-level BPE, and \"llama\", SentencePiece)");
  ET_CHECK(!v.tokens.empty(), src, ": tokenizer.ggml.tokens is missing or empty");
  ET_CHECK(v.tokens.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()), src,
           ": tokenizer.ggml.tokens has ", v.tokens.size(), " entries, more than int32 ids can number");
  c.n = static_cast<int32_t>(v.tokens.size());
  ET_CHECK(v.scores.empty() || v.scores.size() == v.tokens.size(), src, ": tokenizer.ggml.scores has ",
           v.scores.size(), " entries but tokenizer.ggml.tokens has ", v.tokens.size());
  ET_CHECK(v.token_types.empty() || v.token_types.size() == v.tokens.size(), src, ": tokenizer.ggml.token_type has ",
           v.token_types.size(), " entries but tokenizer.ggml.tokens has ", v.tokens.size());
  const std::pair<const char*, int64_t> ids[] = {{"tokenizer.ggml.bos_token_id", v.bos},
                                                 {"tokenizer.ggml.eos_token_id", v.eos},
                                                 {"tokenizer.ggml.unknown_token_id", v.unk},
                                                 {"tokenizer.ggml.padding_token_id", v.pad}};
  for (const auto& [key, id] : ids)
    ET_CHECK(id >= -1 && id < c.n, src, ": ", key, " = ", id, " is outside the vocabulary [0, ", c.n, ")");
  const std::pair<const char*, int> flags[] = {{"tokenizer.ggml.add_bos_token", v.add_bos},
                                               {"tokenizer.ggml.add_eos_token", v.add_eos},
                                               {"tokenizer.ggml.add_space_prefix", v.add_space_prefix}};
  for (const auto& [key, f] : flags) ET_CHECK(f >= -1 && f <= 1, src, ": ", key, " must be a bool, got ", f);
  c.types.resize(v.tokens.size());
  c.text_id.reserve(v.tokens.size());
  for (int32_t id = 0; id < c.n; ++id) {
    const std::string& t = v.tokens[id];
    int32_t type = 0;
    if (!v.token_types.empty()) {
      type = v.token_types[id];
      ET_CHECK(type >= 0 && type <= kByteToken, src, ": tokenizer.ggml.token_type[", id, "] = ", type,
               " is not a token type (0 undefined, 1 normal, 2 unknown, 3 control, 4 user defined, 5 unused, 6 byte)");
    } else {
      // No types (old files): what llama.cpp's converters would have written.
      type = id == v.bos || id == v.eos ? kControl : id == v.unk ? kUnknown
             : v.model == "llama" && byte_token_value(t) >= 0 ? kByteToken : kNormal;
    }
    ET_CHECK(type != kByteToken || byte_token_value(t) >= 0, src, ": tokenizer.ggml.tokens[", id, "] = ", shown(t),
             " has token type 6 (byte) but is not of the form <0xNN>");
    c.types[id] = type;
    if (t.empty()) continue;  // never matched; llama.cpp renames such tokens
    auto [it, fresh] = c.text_id.emplace(t, id);
    ET_CHECK(fresh, src, ": tokenizer.ggml.tokens[", id, "] = ", shown(t), " repeats tokenizer.ggml.tokens[",
             it->second, "]");
  }
  return c;
}

}  // namespace edgetrain::text
