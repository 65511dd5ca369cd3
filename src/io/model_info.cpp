// `edgetrain info FILE`: what a model file holds (GGUF, Hugging Face folder, edgetrain checkpoint, plain
// safetensors, a LoRA adapter) and, for every one, whether `edgetrain train` can start from it and, if not, every reason
// why: the same checks the imports make (gguf_llama_check.cpp, hf_folder.cpp).
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "edgetrain/checkpoint.h"
#include "edgetrain/interop.h"
#include "edgetrain/q4gsw.h"
#include "edgetrain/safetensors.h"
#include "edgetrain/trainer.h"
#include "io/gguf.h"
#include "io/gguf_llama.h"
#include "io/hf_folder.h"

namespace edgetrain {

namespace {

void verdict(std::ostream& os, const std::vector<std::string>& problems, const std::string& yes) {
  if (problems.empty()) {
    os << "  trainable: yes: " << yes << "\n";
    return;
  }
  os << "  trainable: no, " << problems.size() << " problem" << (problems.size() > 1 ? "s" : "") << ":\n";
  for (const std::string& p : problems) os << "    - " << p << "\n";
}

// What `edgetrain train --init FILE` would take in memory in each mode at train's default batch and seq.
void memory_line(std::ostream& os, ModelConfig cfg) {
  const TrainOptions defaults;
  const int64_t seq = std::min<int64_t>(128, cfg.max_seq);
  os << "  training memory (estimate at batch " << defaults.batch << " x seq " << seq
     << "; `train` prints its own):";
  for (TrainMode m : {TrainMode::qlora, TrainMode::qat, TrainMode::fp32}) {
    cfg.mode = m;
    os << (m == TrainMode::qlora ? " " : ", ") << mode_name(m) << " "
       << format_bytes(estimate_training_memory(cfg, defaults.batch, seq).total);
  }
  cfg.mode = TrainMode::qlora;
  os << "; qlora with --checkpoint-activations "
     << format_bytes(estimate_training_memory(cfg, defaults.batch, seq, Precision::fp32, true).total) << "\n";
  // A GPU keeps qlora's frozen masters in host memory (Backend::host_storage).
  TargetDevice gpu;
  gpu.frozen_on_host = true;
  const MemoryEstimate on_gpu = estimate_training_memory(cfg, defaults.batch, seq, Precision::fp32, false, gpu);
  os << "  qlora on a GPU: " << format_bytes(on_gpu.total) << " on the device, the frozen fp32 masters ("
     << format_bytes(on_gpu.host) << ") in host memory\n";
}

// A LoRA adapter (is_lora_adapter): what it adapts, or why edgetrain cannot read it.
std::string describe_adapter(const std::string& path) {
  std::ostringstream os;
  const bool gguf_file = is_gguf_file(path);
  os << path << ": LoRA adapter, " << (gguf_file ? "llama.cpp adapter GGUF" : "PEFT folder") << "\n";
  try {
    const LoraAdapter a = read_lora_adapter(path);
    os << "  for a '" << (a.arch.empty() ? std::string("(not recorded)") : a.arch) << "' model"
       << (a.base_model.empty() ? "" : " (base_model_name_or_path " + a.base_model + ")") << ": rank " << a.rank
       << ", alpha " << a.alpha << " (scale " << a.alpha / static_cast<float>(a.rank) << "), targets " << a.targets
       << ", " << a.n_layers << " layers, " << a.tensors.size() << " tensors\n";
    for (const std::string& n : a.notes) os << "  note: " << n << "\n";
    os << "  usable: yes, on its base model: `edgetrain train --init BASE --mode qlora --adapter " << path
       << "`, `edgetrain generate|eval --checkpoint BASE --adapter " << path << "`, `edgetrain convert BASE OUT "
       << "--adapter " << path << "`\n";
  } catch (const Error& e) {
    os << "  usable: no: " << e.what() << "\n";
  }
  return os.str();
}

}  // namespace

std::string describe_model_file(const std::string& path) {
  std::ostringstream os;
  if (is_lora_adapter(path)) return describe_adapter(path);
  if (is_hf_folder(path)) {
    const hf_folder::Shards sh = hf_folder::open_shards(path);
    const hf_folder::Check c = hf_folder::check(path, sh, TrainMode::qat, 32);
    size_t n = 0;
    for (const auto& r : sh.readers) n += r.tensors().size();
    os << path << ": Hugging Face " << (c.problems.empty() ? c.config.arch : std::string("model")) << " folder, "
       << sh.readers.size() << " safetensors file"
       << (sh.readers.size() > 1 ? "s" : "") << ", " << n << " tensors\n";
    if (c.problems.empty()) os << "  config: " << c.config.to_json() << "\n";
    if (c.problems.empty()) memory_line(os, c.config);
    verdict(os, c.problems, "`edgetrain train --init " + path + "` starts from its weights (fp32; qat/qlora quantize "
                            "them to q4gsw and print the weight error)");
    return os.str();
  }
  if (is_gguf_file(path)) {
    gguf::File f = gguf::File::open(path);
    os << path << ": GGUF v" << f.version() << ", " << f.metadata().size() << " metadata keys, "
       << f.tensors().size() << " tensors, alignment " << f.alignment() << "\n  metadata:\n";
    for (auto& [k, v] : f.metadata()) os << "    " << k << " = " << v.describe() << "\n";
    os << "  tensors:\n";
    for (auto& t : f.tensors()) {
      os << "    " << t.name << " " << gguf::type_name(t.type) << " [";
      for (size_t d = 0; d < t.ne.size(); ++d) os << (d ? ", " : "") << t.ne[d];
      os << "] (ne, fastest first)\n";
    }
    const gguf_llama::Check c = gguf_llama::check(f, TrainMode::qat, 32);
    if (c.problems.empty()) os << "  edgetrain config: " << c.config.to_json() << "\n";
    if (c.problems.empty()) memory_line(os, c.config);
    std::string tokenizer_note;
    try {
      const GgufVocab v = gguf::read_vocab(f);
      if (v.model.empty()) {
        os << "  tokenizer: none (train --init uses the byte tokenizer)\n";
        if (c.problems.empty() && c.config.vocab != 256)
          tokenizer_note = "; it has no tokenizer and " + std::to_string(c.config.vocab) +
                           " embedding rows, so train needs --tokenizer with that many tokens";
      } else {
        auto tok = make_gguf_tokenizer(v, path);
        const std::string pre = v.pre.empty() ? "" : ", pre \"" + v.pre + "\"";
        os << "  tokenizer: " << tok->name() << " (\"" << v.model << "\"" << pre << ", " << tok->vocab_size()
           << " tokens), usable: train --init takes it by default\n";
      }
    } catch (const Error& e) {
      os << "  tokenizer not usable: " << e.what() << "\n";
      if (c.problems.empty())
        tokenizer_note = "; its tokenizer is not usable, so train needs --tokenizer with " +
                         std::to_string(c.config.vocab) + " tokens";
    }
    verdict(os, c.problems, "`edgetrain train --init " + path + "` starts from its weights (decoded exactly; "
                            "qat/qlora quantize them to q4gsw and print the weight error)" + tokenizer_note);
    return os.str();
  }
  auto r = safetensors::Reader::open(path);
  auto fmt = r.metadata().find("format");
  if (fmt != r.metadata().end() && fmt->second == kCheckpointFormat) {
    auto meta = read_checkpoint_metadata(path);
    os << path << ": edgetrain checkpoint, step " << meta["step"] << "\n  config: " << meta["config"] << "\n";
    for (auto& [k, v] : meta)
      if (k != "config" && k != "step") os << "  " << k << ": " << (v.size() > 120 ? v.substr(0, 120) + "..." : v) << "\n";
    // The 4-bit linears: how far the fp32 masters have left the range their codes can follow.
    const ModelConfig c = ModelConfig::from_json(meta["config"]);
    memory_line(os, c);
    q4::RangeStats all;
    std::ostringstream rows;
    for (auto& t : r.tensors()) {
      const std::string suffix = ".q4_scales";
      if (t.name.size() <= suffix.size() || t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) != 0)
        continue;
      const std::string w = t.name.substr(0, t.name.size() - suffix.size());
      if (!r.contains(w)) continue;
      const auto& ws = r.info(w).shape;
      if (ws.size() != 2) continue;
      q4::Geometry g(ws[0], ws[1], c.group_size);
      const auto lat = r.to_f32(w), sc = r.to_f32(t.name);
      if (static_cast<int64_t>(sc.size()) != g.groups() * g.N) continue;
      const q4::RangeStats st = q4::range_stats(g, lat.data(), sc.data());
      all.outside += st.outside, all.total += st.total, all.max_ratio = std::max(all.max_ratio, st.max_ratio);
      char buf[160];
      std::snprintf(buf, sizeof buf, "    %-40s %6.2f%% outside, max |w/s| %.1f\n", w.c_str(),
                    100.0 * static_cast<double>(st.outside) / static_cast<double>(st.total), st.max_ratio);
      rows << buf;
    }
    if (all.total > 0) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "  4-bit linears: %.2f%% of masters outside the range their codes follow "
                    "(-8.5*s <= w <= 7.5*s; training keeps them inside), max |w/s| %.1f\n",
                    100.0 * static_cast<double>(all.outside) / static_cast<double>(all.total), all.max_ratio);
      os << buf << rows.str();
    }
    os << "  trainable: yes: `edgetrain train --init " << path << "` starts a new run from it (`train --resume --out DIR` "
          "continues the run whose checkpoint it is)\n";
    return os.str();
  }
  os << path << ": safetensors, " << r.tensors().size() << " tensors\n";
  for (auto& [k, v] : r.metadata()) os << "  metadata " << k << ": " << v << "\n";
  for (auto& t : r.tensors()) {
    os << "  " << t.name << " " << t.dtype << " [";
    for (size_t d = 0; d < t.shape.size(); ++d) os << (d ? ", " : "") << t.shape[d];
    os << "]\n";
  }
  os << "  trainable: no: a safetensors file that is not an edgetrain checkpoint (no format = " << kCheckpointFormat
     << " metadata); a Hugging Face model is read as its folder (config.json beside the .safetensors files)\n";
  return os.str();
}

}  // namespace edgetrain
