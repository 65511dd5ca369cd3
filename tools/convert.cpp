// `edgetrain convert`: read a checkpoint, a GGUF file or a Hugging Face Llama folder (with --adapter: plus a
// LoRA adapter on top) and write a GGUF file (f32, f16, q4_0, q8_0, q4_k), an edgetrain checkpoint, an
// ExecuTorch q4gsw export, or a qlora model's adapters alone (llama.cpp adapter GGUF, PEFT folder).
// Quantization on either side reports its measured weight error.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "edgetrain/backends.h"
#include "edgetrain/checkpoint.h"
#include "edgetrain/interop.h"
#include "edgetrain/tokenizer.h"
#include "tools/commands.h"

namespace edgetrain::cli {

namespace {
// An import into a 4-bit mode: the q4gsw weights against the file's (one line, and the worst tensor).
void print_q4_error(const ImportInfo& info) {
  if (info.q4_error.tensors.empty()) return;
  std::printf("  q4gsw (group %ld) against the file's weights: %s\n  %s\n", static_cast<long>(info.config.group_size),
              info.q4_error.summary().c_str(), info.q4_error.worst_line().c_str());
}
}  // namespace

Runner add_convert(CLI::App& app) {
  auto* sub = app.add_subcommand("convert",
      "Convert models: IN is a checkpoint (.safetensors), a GGUF file or a Hugging Face llama, qwen2 or qwen3 folder. Example:\n"
      "  edgetrain convert runs/mini/checkpoint.safetensors mini.gguf --to gguf-q4_0\n"
      "  edgetrain convert runs/ft/checkpoint.safetensors ft-lora.gguf --to lora-gguf   # the qlora adapters alone\n"
      "  edgetrain convert base.gguf merged.gguf --adapter ft-lora.gguf --to gguf-f32  # base + adapter, merged");
  struct Flags {
    std::string in, out, to = "gguf-f32", mode = "qat", tokenizer, adapter, base_model;
    int64_t group_size = 32;
  };
  auto f = std::make_shared<Flags>();
  sub->add_option("IN", f->in, "Input: checkpoint, .gguf file or Hugging Face folder")->required();
  sub->add_option("OUT", f->out, "Output file (or folder for executorch)")->required();
  sub->add_option("--to", f->to,
                  "gguf-f32, gguf-f16, gguf-q4_0, gguf-q8_0, gguf-q4_k, edgetrain, executorch, or a qlora model's\n"
                  "adapters alone: lora-gguf (llama.cpp adapter, F32), lora-gguf-f16, peft (a PEFT folder)")
      ->capture_default_str();
  sub->add_option("--adapter", f->adapter,
                  "A LoRA adapter (llama.cpp adapter GGUF or PEFT folder) for the model IN: the output is IN + adapter\n"
                  "(a qlora model with the adapter's rank, alpha and targets)");
  sub->add_option("--base-model", f->base_model,
                  "peft: base_model_name_or_path to record (default: IN's Hugging Face folder with --adapter, else none)");
  sub->add_option("--mode", f->mode, "Mode of a model imported from GGUF/HF: qat, qlora or fp32")->capture_default_str();
  sub->add_option("--group-size", f->group_size, "q4gsw group size for imports (32, 64, 128)")->capture_default_str();
  sub->add_option("--tokenizer", f->tokenizer,
                  "Tokenizer to embed in a GGUF file or record in a checkpoint (default: the checkpoint's, or a GGUF "
                  "input's own): bytes, gpt2, a folder with encoder.json + vocab.bpe, or a GGUF file");
  return [f] {
    auto backend = make_cpu_backend();
    std::unique_ptr<Model> model;
    std::string tok_name = f->tokenizer;
    ImportInfo info;
    std::unique_ptr<Tokenizer> tok;
    if (is_gguf_file(f->in)) {
      model = load_gguf_model(f->in, *backend, mode_from_name(f->mode), f->group_size, &info);
      std::printf("read GGUF %s: %d linears exactly from Q4_0\n", f->in.c_str(), info.exact_q4);
      print_q4_error(info);
      for (const std::string& n : info.notes) std::printf("note: %s\n", n.c_str());
      // The file's own tokenizer goes along (written back unchanged; an edgetrain checkpoint records the file).
      if (tok_name.empty() && !info.vocab.model.empty()) {
        try {
          tok = make_gguf_tokenizer(info.vocab, f->in);
          ET_CHECK(tok->vocab_size() == model->config().vocab, "it has ", tok->vocab_size(), " tokens, the model ",
                   model->config().vocab, " embedding rows");
          tok_name = std::filesystem::absolute(f->in).string();
        } catch (const Error& e) {
          tok.reset();
          std::printf("warning: the tokenizer of %s is not usable, none written: %s\n", f->in.c_str(), e.what());
        }
      }
    } else if (is_hf_folder(f->in)) {
      model = load_hf_llama(f->in, *backend, mode_from_name(f->mode), f->group_size, &info);
      std::printf("read Hugging Face folder %s\n", f->in.c_str());
      print_q4_error(info);
    } else {
      ModelConfig cfg = read_checkpoint_config(f->in);
      auto meta = read_checkpoint_metadata(f->in);
      model = std::make_unique<Model>(*backend, cfg);
      load_checkpoint(f->in, *model, nullptr);
      if (tok_name.empty() && meta.count("tokenizer")) tok_name = checkpoint_tokenizer_spec(meta["tokenizer"], f->in);
      std::printf("read checkpoint %s (mode %s)\n", f->in.c_str(), mode_name(cfg.mode));
    }
    std::string base_model = f->base_model;
    if (!f->adapter.empty()) {
      const LoraAdapter a = read_lora_adapter(f->adapter);
      for (const std::string& n : a.notes) std::printf("note: %s\n", n.c_str());
      model = attach_lora_adapter(*model, a, *backend);
      std::printf("attached LoRA adapter %s: rank %ld, alpha %g, targets %s\n", f->adapter.c_str(),
                  static_cast<long>(a.rank), a.alpha, a.targets.c_str());
      if (base_model.empty() && is_hf_folder(f->in)) base_model = f->in;
      if (base_model.empty()) base_model = a.base_model;
    }
    const std::string& to = f->to;
    if (to.rfind("gguf-", 0) == 0) {
      if (!tok && !tok_name.empty()) tok = make_tokenizer(tok_name);
      if (tok && tok->vocab_size() != model->config().vocab) {
        std::printf("warning: tokenizer '%s' has %ld tokens, the model %ld: no tokenizer written\n", tok_name.c_str(),
                    static_cast<long>(tok->vocab_size()), static_cast<long>(model->config().vocab));
        tok.reset();
      }
      GgufExportReport rep = save_gguf(f->out, *model, gguf_type_from_name(to.substr(5)), tok.get());
      for (auto& w : rep.warnings) std::printf("warning: %s\n", w.c_str());
      std::printf("wrote %s (%d linears exact Q4_0, %d quantized from the weights)\n", f->out.c_str(), rep.exact_q4,
                  rep.requantized);
      if (rep.requantized > 0)
        std::printf("  written blocks against the model's weights: %s\n  %s\n", rep.error.summary().c_str(),
                    rep.error.worst_line().c_str());
    } else if (to == "edgetrain") {
      save_checkpoint(f->out, *model, tok_name.empty() ? std::map<std::string, std::string>{}
                                                       : std::map<std::string, std::string>{{"tokenizer", tok_name}});
      std::printf("wrote checkpoint %s\n", f->out.c_str());
    } else if (to == "lora-gguf" || to == "lora-gguf-f16") {
      save_lora_gguf(f->out, *model, to == "lora-gguf" ? GgufType::F32 : GgufType::F16);
      std::printf("wrote LoRA adapter %s (rank %ld, alpha %g, targets %s) for llama.cpp's --lora\n", f->out.c_str(),
                  static_cast<long>(model->config().lora_rank), model->config().lora_alpha,
                  model->config().lora_targets.c_str());
    } else if (to == "peft") {
      save_peft_adapter(f->out, *model, base_model);
      std::printf("wrote PEFT adapter %s/adapter_config.json and %s/adapter_model.safetensors (rank %ld, alpha %g)\n",
                  f->out.c_str(), f->out.c_str(), static_cast<long>(model->config().lora_rank),
                  model->config().lora_alpha);
    } else if (to == "executorch") {
      export_executorch(f->out, *model);
      std::printf("wrote %s/weights.safetensors and %s/manifest.json\n", f->out.c_str(), f->out.c_str());
    } else {
      fail("convert: unknown --to '", to, "' (choose gguf-f32, gguf-f16, gguf-q4_0, gguf-q8_0, gguf-q4_k, edgetrain, "
           "executorch, lora-gguf, lora-gguf-f16 or peft)");
    }
    return 0;
  };
}

}  // namespace edgetrain::cli
