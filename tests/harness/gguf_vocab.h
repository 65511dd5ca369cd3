// The fixed head of the llama-style (SentencePiece) vocabularies the tokenizer and interop tests build:
// <unk> (id 0, type 2), <s> (1, control), </s> (2, control), then the 256 byte tokens <0x00>..<0xFF>
// (ids 3..258, type 6), all with score 0. Callers append their own tokens and set the special ids.
#pragma once

#include <cstdio>

#include "edgetrain/tokenizer.h"

namespace edgetrain::test {

inline GgufVocab spm_vocab_head() {
  GgufVocab v;
  v.model = "llama";
  auto add = [&](const std::string& t, int32_t type) {
    v.tokens.push_back(t);
    v.scores.push_back(0);
    v.token_types.push_back(type);
  };
  add("<unk>", 2);
  add("<s>", 3);
  add("</s>", 3);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    add(buf, 6);
  }
  return v;
}

}  // namespace edgetrain::test
