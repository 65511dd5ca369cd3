// Material for the pre-tokenizer tests (test_pretokenize.cpp): texts that exercise every alternative of the
// pre-tokenizer regexes (KJV windows, code, CJK, emoji, digit runs, contractions in any case, whitespace runs,
// newlines, other scripts with combining marks, random code points), and a byte-level BPE vocabulary whose
// merges are learned on such text without pre-tokenization, so that its tokens span the places where the
// pre-tokenizers cut differently (spaces before digits, newlines, punctuation, contractions).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "edgetrain/tokenizer.h"

namespace edgetrain::test {

// `count` valid UTF-8 texts from seed `seed`, cycling through the kinds above (KJV from deps_path).
std::vector<std::string> comparison_texts(size_t count, uint32_t seed);
// About 40 KB of the same kinds of text (another seed), to learn merges on.
std::string training_text();
// A "gpt2" GGUF vocabulary (no pre set): the 256 bytes in GPT-2's byte alphabet (id = byte), the tokens of
// up to `merges` merges learned greedily (most frequent adjacent pair first, ties to the smallest pair) on
// `text`, and "<|endoftext|>", a control token that is BOS and EOS.
GgufVocab learned_bpe_vocab(const std::string& text, int merges);

}  // namespace edgetrain::test
