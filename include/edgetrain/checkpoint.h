// Training checkpoints: every state tensor of a Model (fp32 masters, packed 4-bit codes, scales, AdamW
// moments) plus its config and step count in one safetensors file, saved atomically and loaded with
// strict checks (format, config, every tensor's presence, dtype and shape, code/master consistency).
#pragma once

#include <map>
#include <string>

#include "edgetrain/model.h"

namespace edgetrain {

// The "format" metadata value of checkpoints this version writes and reads.
constexpr const char* kCheckpointFormat = "edgetrain-checkpoint-v1";

// Downloads every Model::state_tensors() tensor and writes `path` atomically. Metadata: "format",
// "config" (ModelConfig::to_json), "step" (steps_done), "adam_steps", "q4_layout" ("W_4X8"), "group_size",
// under Precision::fp16 the loss scaler's "loss_scale", "loss_scale_good_steps" and "overflow_steps", plus
// `extra_metadata` (trainer state, tokenizer name, ...), whose keys may not shadow those. The tensors are
// the fp32 masters whatever the precision.
// Tensor dtypes: F32 for masters, scales and moments; U32 for the W_4X8 code words.
void save_checkpoint(const std::string& path, Model& model,
                     const std::map<std::string, std::string>& extra_metadata = {});

// Loads a checkpoint into a model built with the same config. Verifies the format, the config, that every
// expected tensor is present with its exact dtype and shape and no unexpected tensor is, that every F32
// tensor (masters, scales, AdamW moments) is finite — no NaN/Inf — and that the stored 4-bit codes agree
// with the stored masters and scales — all before touching the model, so a rejected file leaves it
// unchanged. Then uploads every tensor, zeroes the gradients, clears the KV cache and sets steps_done and
// adam_steps (a file without "adam_steps" predates skipped steps counting apart: it is taken as "step"),
// and the loss scaler's state when the file has it (an fp16 run's; kept whatever the model's precision).
// Errors name the file and the offending tensor or field.
void load_checkpoint(const std::string& path, Model& model, std::map<std::string, std::string>* metadata_out = nullptr);

// The config stored in a checkpoint (to build the Model to load it into).
ModelConfig read_checkpoint_config(const std::string& path);
// All metadata of a checkpoint, after checking its format.
std::map<std::string, std::string> read_checkpoint_metadata(const std::string& path);

}  // namespace edgetrain
