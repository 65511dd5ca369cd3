// Moving models between edgetrain and other tools: GGUF (llama.cpp) import and export, Hugging Face Llama
// import, LoRA adapters out and in (llama.cpp adapter GGUF, PEFT folder), ExecuTorch q4gsw export, and a
// one-line description of any model file for `edgetrain info`.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "edgetrain/model.h"
#include "edgetrain/tokenizer.h"

namespace edgetrain {

// The tokenizer metadata of a GGUF file (GgufVocab is in edgetrain/tokenizer.h; make_gguf_tokenizer or
// load_gguf_tokenizer build the tokenizer). model is "" when the file has none. Throws Error naming the file
// and key when a tokenizer.ggml.* key has the wrong type or an array the wrong length.
GgufVocab read_gguf_vocab(const std::string& path);
// Writes a GGUF file holding only tokenizer metadata (no tensors): what a run folder keeps as tokenizer.gguf.
void save_gguf_tokenizer(const std::string& path, const GgufVocab& vocab);
// make_gguf_tokenizer of a GGUF file's metadata (the whole file is read; a model file works).
std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::string& path, std::vector<std::string>* warnings = nullptr);
// True if `path` is a regular file starting with the GGUF magic: the one test of "is this a GGUF file".
bool is_gguf_file(const std::string& path);

// "bytes", "gpt2" (files from default_gpt2_dir()), a directory holding encoder.json and vocab.bpe, or a
// GGUF file (its tokenizer metadata).
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& spec);
// The tokenizer spec of a checkpoint's metadata ("tokenizer"; "bytes" when absent). A recorded GGUF file that
// no longer exists (the run folder was moved) is looked for under its file name beside the checkpoint.
std::string checkpoint_tokenizer_spec(const std::string& recorded, const std::string& checkpoint_path);

// How far quantized weights are from the weights they stand for, tensor by tensor: the relative RMS error
// sqrt(sum (q - w)^2 / sum w^2) of each, and over all of them together.
struct WeightError {
  struct Entry {
    std::string name;
    double rel_rms = 0;
  };
  std::vector<Entry> tensors;
  double sq_err = 0, sq_ref = 0;  // sums over every tensor
  void add(const std::string& name, const float* quantized, const float* reference, size_t n);
  double overall() const;       // 0 when empty or every reference is zero
  const Entry* worst() const;   // the largest rel_rms (the first of equals); nullptr when empty
  // One line: "relative RMS weight error 4.21% over 14 tensors (per tensor 3.90% to 5.30%)", and the worst
  // tensor: "worst: layers.1.feed_forward.w2.weight 5.30%".
  std::string summary() const;
  std::string worst_line() const;
};

// What an import read besides the weights.
struct ImportInfo {
  ModelConfig config;
  GgufVocab vocab;               // GGUF only; empty when the file has no (readable) tokenizer, see notes
  int exact_q4 = 0;              // linears whose codes/scales came exactly from Q4_0 blocks
  // qat/qlora: each 4-bit linear's q4gsw weights against the file's weights (its fp32 masters); 0 for the
  // exact Q4_0 linears. Empty in fp32 mode.
  WeightError q4_error;
  std::vector<std::string> notes;
};

// Model config of a llama GGUF file (dims, heads, key/value heads, eps, theta, context; vocab = token_embd
// rows), with the given mode and group size. Throws Error naming the file and the key or tensor that
// edgetrain cannot train: a head_count_kv that does not divide head_count, a llama.* key it does not know
// or implement (rope scaling, experts), a tensor of a type it does not decode or that its Llama lacks.
ModelConfig read_gguf_config(const std::string& path, TrainMode mode, int64_t group_size);
// Builds the model on `backend` and uploads the masters: every tensor decoded exactly as llama.cpp
// dequantizes it (F32, F16, BF16, Q4_0, Q8_0, Q4_K, Q5_K, Q6_K). Q4_0 linears with group 32 in a quantized
// mode get their codes and scales exactly from the file; every other 4-bit linear is quantized from its
// master, with the error measured in info->q4_error.
std::unique_ptr<Model> load_gguf_model(const std::string& path, Backend& backend, TrainMode mode,
                                       int64_t group_size, ImportInfo* info = nullptr);

enum class GgufType { F32, F16, Q4_0, Q8_0, Q4_K };
GgufType gguf_type_from_name(const std::string& s);  // "f32", "f16", "q4_0", "q8_0", "q4_k"
struct GgufExportReport {
  int exact_q4 = 0;        // linears written from our codes bit for bit
  int requantized = 0;     // linears quantized from the (merged) weights by llama.cpp's rules
  // Those linears' blocks, decoded, against the weights they were quantized from.
  WeightError error;
  std::vector<std::string> warnings;
};
// Writes a llama GGUF v3 file llama.cpp can read: metadata, tensors (linears in `type`; norms and
// embeddings F32). qlora adapters are merged (W + alpha/r * B A). With `tok`, its tok->gguf_vocab() is
// written as the tokenizer.ggml.* keys (GPT-2: "gpt2" with merges; bytes: a 256-token "llama" vocabulary;
// a GGUF tokenizer: as it was read). Every tensor is the weight the forward computes with
// (interop_detail::effective_weight): F32 holds 4-bit linears exactly, F16 rounds them, Q4_0 writes their
// codes and scales bit for bit when the group size is a multiple of 32 and no adapter is merged. Q8_0 and
// Q4_K quantize every linear from that weight exactly as llama.cpp's quantizer would (the same bytes); a
// Q4_K linear whose K is not a multiple of 256 is written as Q4_0 instead (llama.cpp's llama-quantize falls
// back too). In Q4_0, Q8_0 and Q4_K files the embeddings, norms and output head stay F32 (as trained).
GgufExportReport save_gguf(const std::string& path, Model& model, GgufType type, const Tokenizer* tok = nullptr);

// Hugging Face Llama folder: config.json + model.safetensors or model.safetensors.index.json shards.
ModelConfig read_hf_config(const std::string& dir, TrainMode mode, int64_t group_size);
std::unique_ptr<Model> load_hf_llama(const std::string& dir, Backend& backend, TrainMode mode, int64_t group_size,
                                     ImportInfo* info = nullptr);

// fp32 weights of a GGUF file or HF folder under edgetrain's parameter names (q/k rows already in our
// rope order), for `train --init`. `cfg_out` receives the file's config.
std::map<std::string, std::vector<float>> import_masters(const std::string& path, ModelConfig* cfg_out = nullptr);
bool is_hf_folder(const std::string& path);

// ExecuTorch: dir/weights.safetensors (per block linear: "<name>" u8 [N, Kp/2] interchange codes, K padded
// to a multiple of 8 with code 8; "<name>.scales" F32 [G, 4*ceil(N/4)] zero-padded; other tensors F32)
// and dir/manifest.json. Linears without codes (fp32 mode, merged qlora) are quantized from the weights.
void export_executorch(const std::string& dir, Model& model);

// ---- LoRA adapters (io/lora_adapter.cpp reads and attaches them, io/lora_export.cpp writes them) ----
// A qlora model's adapters alone, for a base model the user already has: llama.cpp's adapter GGUF
// (general.type "adapter", adapter.type "lora", adapter.lora.alpha; per adapted linear "<gguf name>.lora_a"
// ne [K, r] and ".lora_b" ne [r, N]) or a PEFT folder (adapter_config.json + adapter_model.safetensors with
// "base_model.model.<hf module>.lora_A.weight" [r, K] and ".lora_B.weight" [N, r]). Both add
// alpha / r * B A x to a linear's output, as edgetrain's qlora forward does.
struct LoraAdapter {
  enum class Format { gguf, peft };
  Format format = Format::gguf;
  std::string path;
  std::string arch;        // GGUF: general.architecture; PEFT: the "edgetrain.arch" metadata we write, else ""
  std::string base_model;  // PEFT: base_model_name_or_path ("" when absent)
  int64_t rank = 0;
  float alpha = 0;         // scale alpha / rank (a PEFT use_rslora adapter's lora_alpha * sqrt(r) here)
  std::string targets;     // as ModelConfig::lora_targets, in edgetrain's order: "q,k,v,o"
  int64_t n_layers = 0;    // layers 0 .. n_layers-1 all carry every target
  // One A or B matrix under our parameter name ("layers.0.attention.wq.weight.lora_a"): [r, K] or [N, r],
  // rows in the file's order (a B of q/k in a file whose rope rows are not ours is reordered on loading).
  struct Matrix {
    std::string file_name;        // the name in the file, for messages
    std::vector<int64_t> shape;   // [rows, cols]
    std::vector<float> values;
  };
  std::map<std::string, Matrix> tensors;
  std::vector<std::string> notes;  // what was read differently from how it is written (alpha absent, rslora)
};
// True for a GGUF file whose general.type is "adapter", or a folder holding adapter_config.json.
bool is_lora_adapter(const std::string& path);
// Reads either form. Throws Error (misuse) naming the file and the key or tensor: not an adapter, not LoRA,
// a PEFT option edgetrain does not implement (DoRA, biases, rank/alpha patterns, modules_to_save,
// fan_in_fan_out), a tensor that is not the A or B of a block linear, a missing half of a pair, ranks that
// differ, a layer or target missing, a NaN/Inf value.
LoraAdapter read_lora_adapter(const std::string& path);
// `base` in qlora mode with the adapter's rank, alpha and targets. Throws Error when the adapter names
// another architecture than the base model's.
ModelConfig with_lora_adapter(const ModelConfig& base, const LoraAdapter& adapter);
// Uploads the adapter's A and B into a qlora model built with with_lora_adapter(): every adapter parameter
// of the model must come from the file with its shape, and every tensor of the file must be used. Throws
// Error naming the file's tensor otherwise (an adapter of another model: arch, dims, layer count).
void load_lora_adapter(Model& model, const LoraAdapter& adapter);
// A qlora model on `backend` made of `base` (any mode; its 4-bit codes and scales as they are, an fp32 base
// quantized from its weights) and the adapter.
std::unique_ptr<Model> attach_lora_adapter(Model& base, const LoraAdapter& adapter, Backend& backend);
// A checkpoint (its own mode), a GGUF file or a Hugging Face folder (imported in qat mode at group 32, as
// load_gguf_model/load_hf_llama do: Q4_0 linears exactly) as a model on `backend`; a LoRA adapter is refused.
std::unique_ptr<Model> load_model_file(const std::string& path, Backend& backend);
// The base model at `base` (load_model_file) with the adapter at `adapter`, on `backend`.
std::unique_ptr<Model> load_model_with_adapter(const std::string& base, const std::string& adapter, Backend& backend);
// Writes the adapters of a qlora model as a llama.cpp adapter GGUF, tensors F32 or F16 (`type`); B rows of
// q/k in the file's rope order (llama_names::gguf_row_order). Throws Error for a model without adapters.
void save_lora_gguf(const std::string& path, Model& model, GgufType type = GgufType::F32);
// Writes dir/adapter_config.json and dir/adapter_model.safetensors (F32) as PEFT saves a LoRA of a
// Hugging Face Llama (q/k B rows in HF's rotate_half order). base_model: base_model_name_or_path, or null
// when "".
void save_peft_adapter(const std::string& dir, Model& model, const std::string& base_model = "");

// Several lines describing a .gguf, .safetensors (checkpoint or plain) file or an HF folder, ending with
// whether `edgetrain train --init` can start from it and, if not, every reason why.
std::string describe_model_file(const std::string& path);

namespace interop_detail {
// Host copy of the weight the model computes with: the fp32 value of an unquantized tensor; for a 4-bit
// linear the dequantized codes (c - 8) * s (not the master), plus alpha/r * B A when qlora adapters exist.
std::vector<float> effective_weight(Model& model, Param& p);
// Every 4-bit linear's dequantized codes against its fp32 master (right after an import: the file's weight).
WeightError q4_error(Model& model);
// HF rotate_half row order -> adjacent-pair row order for a [n_heads*head_dim, K] q weight (n_kv_heads for a
// k weight), and back.
std::vector<float> permute_from_hf(const std::vector<float>& w, int64_t n_heads, int64_t rows, int64_t cols);
std::vector<float> permute_to_hf(const std::vector<float>& w, int64_t n_heads, int64_t rows, int64_t cols);
}  // namespace interop_detail

}  // namespace edgetrain
