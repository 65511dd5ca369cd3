// llama.cpp as the reference consumer of our GGUF exports: runs tests/llamacpp/llama_ref.mjs (node-llama-cpp
// 3.21.1's prebuilt CPU build, installed by scripts/setup.sh into .deps/llamacpp) on a GGUF file and parses
// the one JSON object it prints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace edgetrain::test {

// What llama.cpp computed for a token sequence.
struct LlamaRef {
  std::string reference;                      // "llama.cpp <release> via node-llama-cpp 3.21.1 (CPU, ...)"
  int64_t n_vocab = 0;
  std::vector<int32_t> prompt_tokens;         // llama.cpp's tokenization of the prompt (prompt runs only)
  std::vector<int32_t> tokens;                // the evaluated sequence (= prompt_tokens for a prompt run)
  // logprobs[i][v] = log P(v | tokens[0..i]): llama.cpp's logits at position i minus their logsumexp
  // (node-llama-cpp exposes only softmax probabilities, see llama_ref.mjs). -inf where the fp32 probability
  // underflowed to 0.
  std::vector<std::vector<double>> logprobs;
  std::vector<int32_t> argmax;                // llama.cpp's greedy pick after each position
  std::vector<int32_t> generated;             // greedy continuation after the whole sequence
  std::string generated_text;                 // its detokenized text
  std::vector<std::vector<double>> generated_logprobs;  // after each generated token but the last
};

// The pinned install's folder: deps_path("llamacpp") ($EDGETRAIN_DEPS/llamacpp when it exists, else the
// build's .deps/llamacpp).
std::string llamacpp_dir();
// Why the llama.cpp tests cannot run ("" when they can): the pinned node-llama-cpp is not installed there.
// Only this skips them; a broken install, a missing `node` or a failing run is a test failure.
std::string llamacpp_missing_reason();
// Skips the running test, saying why, where llama.cpp is not installed.
#define SKIP_WITHOUT_LLAMACPP()                                                         \
  do {                                                                                  \
    if (std::string why = llamacpp_missing_reason(); !why.empty()) GTEST_SKIP() << why; \
  } while (0)

struct LlamaRefRequest {
  std::string prompt;                         // tokenized by llama.cpp; or, when empty:
  std::vector<int32_t> tokens;                // these ids
  int generate = 0;                           // greedy tokens after the sequence
  std::string lora;                           // a LoRA adapter GGUF applied to the context ("" = none)
  double lora_scale = 1.0;                    // llama.cpp's adapter scale (times alpha / rank)
};
// Runs llama_ref.mjs (node from PATH, 1 thread, fp32 KV cache) on `gguf`. Throws std::runtime_error with
// the script's stderr when it fails or prints something that is not the expected JSON.
LlamaRef run_llama_ref(const std::string& gguf, const LlamaRefRequest& req);

// llama.cpp's tokenization of each text (llama_ref.mjs --texts: the vocabulary only, no BOS, control tokens
// not matched in the text). The texts must be valid UTF-8 (they travel as JSON); `reference` receives the
// "llama.cpp <release> via node-llama-cpp 3.21.1" line. Throws std::runtime_error as run_llama_ref does.
std::vector<std::vector<int32_t>> run_llama_tokenize(const std::string& gguf, const std::vector<std::string>& texts,
                                                     std::string* reference = nullptr);

}  // namespace edgetrain::test
