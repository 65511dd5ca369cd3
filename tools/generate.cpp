// `edgetrain generate` and `edgetrain eval`: use a checkpoint, GGUF file or Hugging Face folder (with
// --adapter: plus a LoRA adapter) to write text or to measure loss (eval --data: eval_data.cpp); and the
// loader the commands share.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "edgetrain/backends.h"
#include "edgetrain/checkpoint.h"
#include "edgetrain/interop.h"
#include "edgetrain/paths.h"
#include "edgetrain/tokenizer.h"
#include "edgetrain/trainer.h"
#include "io/atomic_file.h"
#include "tools/commands.h"

namespace edgetrain::cli {

// The tokenizer of a model file: a GGUF file's own, a checkpoint's recorded one; a Hugging Face folder's
// tokenizer.json is not read (--tokenizer names one).
std::string tokenizer_of(const std::string& path) {
  if (is_gguf_file(path)) return path;
  ET_CHECK(!is_hf_folder(path), "'", path, "' is a Hugging Face folder, whose tokenizer edgetrain does not read: give "
           "--tokenizer (gpt2, a folder with encoder.json + vocab.bpe, or a GGUF file)");
  std::map<std::string, std::string> meta = read_checkpoint_metadata(path);
  return checkpoint_tokenizer_spec(meta.count("tokenizer") ? meta["tokenizer"] : "", path);
}

// A NumPy .npy file of float32 [rows, cols] (format 1.0: magic, header length, a Python dict literal padded
// to 64 bytes, then the little-endian values), written atomically.
void write_npy_f32(const std::string& path, const std::vector<float>& values, int64_t rows, int64_t cols) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                       std::to_string(cols) + "), }";
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  write_file_atomic(path, [&](std::FILE* out) {
    const uint16_t n = static_cast<uint16_t>(header.size());
    const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    const unsigned char len[2] = {static_cast<unsigned char>(n & 0xFF), static_cast<unsigned char>(n >> 8)};
    ET_CHECK(std::fwrite(magic, 1, 8, out) == 8 && std::fwrite(len, 1, 2, out) == 2 &&
                 std::fwrite(header.data(), 1, header.size(), out) == header.size() &&
                 std::fwrite(values.data(), sizeof(float), values.size(), out) == values.size(),
             "writing '", path, "' failed");
  });
}

// A checkpoint, GGUF file or Hugging Face folder (load_model_file), with `adapter` that LoRA adapter attached.
Loaded load(const std::string& path, const std::string& adapter, const std::string& backend, const std::string& device,
            int threads, const std::string& tokenizer_override) {
  Loaded l;
  BackendOptions bo;
  bo.device = device;
  bo.threads = threads;
  l.backend = make_backend(backend, bo);
  if (adapter.empty()) {
    l.model = load_model_file(path, *l.backend);
  } else {
    l.model = load_model_with_adapter(path, adapter, *l.backend);
    const ModelConfig& c = l.model->config();
    std::fprintf(stderr, "LoRA adapter %s on %s: rank %ld, alpha %g, targets %s\n", adapter.c_str(), path.c_str(),
                 static_cast<long>(c.lora_rank), c.lora_alpha, c.lora_targets.c_str());
  }
  const std::string tok = !tokenizer_override.empty() ? tokenizer_override : tokenizer_of(path);
  l.tok = make_tokenizer(tok);
  ET_CHECK(l.tok->vocab_size() == l.model->config().vocab, "tokenizer '", tok, "' has ", l.tok->vocab_size(),
           " tokens but the model has ", l.model->config().vocab);
  return l;
}

void add_sampling_flags(CLI::App* sub, SampleOptions& s) {
  sub->add_option("--temperature", s.temperature, "Sampling temperature (0 = greedy)")->capture_default_str();
  sub->add_option("--top-k", s.top_k, "Keep the k most likely tokens (0 = all)")->capture_default_str();
  sub->add_option("--top-p", s.top_p, "Nucleus: keep the smallest set with this total probability")->capture_default_str();
  sub->add_option("--seed", s.seed, "Sampling seed")->capture_default_str();
}

void add_model_run_flags(CLI::App* sub, std::string& backend, std::string& device, int& threads,
                         std::string& tokenizer) {
  sub->add_option("--backend", backend, "auto, cpu, vulkan or webgpu")->capture_default_str();
  sub->add_option("--device", device, "Device index or name substring");
  sub->add_option("--threads", threads, "CPU threads (0 = all cores)");
  sub->add_option("--tokenizer", tokenizer, "Override the checkpoint's tokenizer");
}

Runner add_generate(CLI::App& app) {
  auto* sub = app.add_subcommand("generate",
      "Sample text from a checkpoint (KV cache; temperature, top-k, top-p; seeded). Example:\n"
      "  edgetrain generate --checkpoint runs/mini/checkpoint.safetensors --prompt \"In the beginning\"");
  struct Flags {
    std::string checkpoint, adapter, prompt = "And God said", backend = "auto", device, tokenizer, logits;
    SampleOptions s;
    int threads = 0;
  };
  auto f = std::make_shared<Flags>();
  sub->add_option("--checkpoint", f->checkpoint,
                  "Checkpoint file (.safetensors), GGUF file or Hugging Face folder (imported as in convert: qat, group 32)")
      ->required();
  sub->add_option("--adapter", f->adapter,
                  "LoRA adapter (llama.cpp adapter GGUF or PEFT folder) to apply on top of --checkpoint's model");
  sub->add_option("--prompt", f->prompt, "Text to continue")->capture_default_str();
  sub->add_option("--max-tokens", f->s.max_tokens, "Tokens to generate")->capture_default_str();
  sub->add_option("--logits", f->logits,
                  "Also write the logits each new token was picked from to this NumPy file (float32, [tokens, vocab]),\n"
                  "e.g. to compare with another runtime");
  add_sampling_flags(sub, f->s);
  add_model_run_flags(sub, f->backend, f->device, f->threads, f->tokenizer);
  return [f] {
    Loaded l = load(f->checkpoint, f->adapter, f->backend, f->device, f->threads, f->tokenizer);
    std::vector<float> rows;
    int64_t vocab = 0;
    if (!f->logits.empty())
      f->s.on_logits = [&](const float* logits, int64_t V) {
        vocab = V;
        rows.insert(rows.end(), logits, logits + V);
      };
    std::printf("%s", f->prompt.c_str());
    std::fflush(stdout);
    generate(*l.model, *l.tok, f->prompt, f->s, [](const std::string& t) {
      std::printf("%s", t.c_str());
      std::fflush(stdout);
    });
    std::printf("\n");
    if (!f->logits.empty()) {
      write_npy_f32(f->logits, rows, vocab > 0 ? static_cast<int64_t>(rows.size()) / vocab : 0, vocab);
      std::fprintf(stderr, "logits of %lld tokens written to %s\n", static_cast<long long>(vocab ? rows.size() / vocab : 0),
                   f->logits.c_str());
    }
    return 0;
  };
}

Runner add_eval(CLI::App& app) {
  auto* sub = app.add_subcommand("eval",
      "Validation loss and perplexity of a checkpoint on a corpus's held-out end (the split train used). Example:\n"
      "  edgetrain eval --checkpoint runs/mini/checkpoint.safetensors");
  struct Flags {
    std::string checkpoint, adapter, corpus, backend = "auto", device, tokenizer, precision = "auto";
    int64_t batch = 8, seq = 128, batches = 16;
    double val_fraction = 0.02;
    bool whole = false, json = false;
    int threads = 0;
    EvalDataOptions data;
  };
  auto f = std::make_shared<Flags>();
  sub->add_option("--checkpoint", f->checkpoint,
                  "Checkpoint file (.safetensors), GGUF file or Hugging Face folder (imported as in convert: qat, group 32)")
      ->required();
  sub->add_option("--adapter", f->adapter,
                  "LoRA adapter (llama.cpp adapter GGUF or PEFT folder) to apply on top of --checkpoint's model");
  sub->add_option("--corpus", f->corpus, "Text file (default: the KJV corpus)");
  sub->add_option("--val-fraction", f->val_fraction, "Held-out fraction at the end of the corpus")->capture_default_str();
  sub->add_flag("--whole", f->whole, "Evaluate on windows spread over the whole file instead");
  sub->add_option("--data", f->data.data,
                  "Chat / instruction samples (JSONL, as train --data) instead of a corpus: the loss on the reply\n"
                  "tokens, and exact-match accuracy of greedy replies when the replies are short");
  sub->add_option("--chat-template", f->data.chat_template,
                  "With --data: the template (default: the one the checkpoint was fine-tuned with)");
  sub->add_option("--exact-match", f->data.exact_match,
                  "With --data: samples whose reply is generated and compared (0 = none; default all)");
  sub->add_option("--max-reply-tokens", f->data.max_reply_tokens,
                  "With --data: exact match only when every reference reply has at most this many tokens")
      ->capture_default_str();
  sub->add_flag("--json", f->json, "Print the result as one JSON object");
  sub->add_option("--batch", f->batch, "Sequences per batch")->capture_default_str();
  auto* seq_opt = sub->add_option("--seq", f->seq, "Tokens per sequence (--data: default the longest sample)");
  seq_opt->capture_default_str();
  sub->add_option("--batches", f->batches, "Number of batches")->capture_default_str();
  add_model_run_flags(sub, f->backend, f->device, f->threads, f->tokenizer);
  sub->add_option("--precision", f->precision,
                  "fp32, fp16 (fp16 GEMM operands, fp32 accumulation) or auto (fp16 where it is faster)")
      ->capture_default_str();
  return [f, seq_opt] {
    check_precision_flag(f->precision);
    ET_CHECK(f->data.data.empty() || f->corpus.empty(), "eval: --data and --corpus cannot be combined");
    Loaded l = load(f->checkpoint, f->adapter, f->backend, f->device, f->threads, f->tokenizer);
    const PrecisionChoice pc = choose_precision(f->precision, *l.backend);
    l.model->set_precision(pc.precision);
    std::fprintf(stderr, "eval: %s\n", pc.why.c_str());
    if (!f->data.data.empty()) {
      EvalDataOptions d = f->data;
      d.checkpoint = f->checkpoint;
      d.batch = f->batch;
      d.seq = seq_opt->count() > 0 ? f->seq : 0;
      d.json = f->json;
      return eval_data(l, d);
    }
    std::string corpus = f->corpus.empty() ? deps_path("data/kjv.txt") : f->corpus;
    ET_CHECK(f->batch >= 1 && f->batches >= 1 && f->seq >= 1, "eval: --batch, --batches and --seq must be >= 1");
    ET_CHECK(f->seq <= l.model->config().max_seq, "eval: --seq exceeds the model's max_seq ", l.model->config().max_seq);
    ET_CHECK(f->val_fraction > 0 && f->val_fraction < 1, "eval: --val-fraction must be in (0, 1)");
    auto data = TokenStream::open(corpus, *l.tok, "runs/cache");
    int64_t N = data->size();
    int64_t begin = f->whole ? 0 : N - std::max<int64_t>(f->seq + 2, static_cast<int64_t>(static_cast<double>(N) * f->val_fraction));
    EvalResult r = evaluate_split(*l.model, *data, std::max<int64_t>(0, begin), N, f->batch, f->seq, f->batches);
    if (f->json)
      std::printf("%s\n", nlohmann::json{{"checkpoint", f->checkpoint}, {"corpus", corpus},
                                         {"split", f->whole ? "whole" : "validation"}, {"tokens", r.tokens},
                                         {"loss", r.loss}, {"perplexity", r.perplexity}}.dump().c_str());
    else
      std::printf("%s on %s (%s, %ld tokens evaluated, %s): loss %.4f nats/token, perplexity %.3f\n",
                  f->checkpoint.c_str(), corpus.c_str(), f->whole ? "whole file" : "validation split",
                  static_cast<long>(r.tokens), precision_name(pc.precision), r.loss, r.perplexity);
    return 0;
  };
}

}  // namespace edgetrain::cli
