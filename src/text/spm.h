// SentencePiece-style BPE for a "llama" GGUF vocabulary (see spm.cpp for how it differs from llama.cpp).
#pragma once

#include <memory>

#include "edgetrain/tokenizer.h"
#include "text/vocab.h"

namespace edgetrain::text {

// Throws Error naming c.src when the vocabulary cannot encode every byte or has a NaN score.
std::unique_ptr<Tokenizer> make_spm_tokenizer(const CheckedVocab& c);

}  // namespace edgetrain::text
