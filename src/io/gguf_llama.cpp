// Llama models <-> GGUF: the import (every decodable type to exact fp32 masters, Q4_0 linears taken bit
// for bit as q4gsw group 32, the measured q4gsw error of the others), fp32 masters for `train --init`, and
// the export save_gguf. What a file must be to import is gguf_llama_check.cpp's; tensor names come from
// io/llama_names.
#include <cmath>
#include <cstdio>
#include <cstring>

#include "edgetrain/error.h"
#include "edgetrain/half.h"
#include "edgetrain/interop.h"
#include "edgetrain/q4gsw.h"
#include "io/gguf.h"
#include "io/gguf_llama.h"
#include "io/llama_names.h"

namespace edgetrain {

using llama_names::BaseTensor;
using llama_names::base_tensors;
using llama_names::gguf_name;

namespace {

std::vector<uint64_t> gguf_dims(const Shape& s) {
  std::vector<uint64_t> ne;
  for (int64_t d = s.rank() - 1; d >= 0; --d) ne.push_back(static_cast<uint64_t>(s[d]));
  return ne;
}

ModelConfig config_from(const gguf::File& f, TrainMode mode, int64_t group_size) {
  return gguf_llama::config_of(f, mode, group_size);
}

// The tensor of the file that holds our tensor `ours` of shape `shape`: present and of that shape.
const gguf::TensorInfo& tensor_for(const gguf::File& f, const std::string& ours, const Shape& shape) {
  const std::string gn = gguf_name(ours);
  const gguf::TensorInfo* t = f.tensor(gn);
  ET_CHECK(t, "file ", f.source(), ": missing tensor '", gn, "' (for ", ours, ")");
  ET_CHECK(t->ne == gguf_dims(shape), "file ", f.source(), ": tensor '", gn, "' has the wrong shape for ", ours, " ",
           shape.str());
  return *t;
}

}  // namespace

ModelConfig read_gguf_config(const std::string& path, TrainMode mode, int64_t group_size) {
  return config_from(gguf::File::open(path), mode, group_size);
}

std::unique_ptr<Model> load_gguf_model(const std::string& path, Backend& backend, TrainMode mode, int64_t group_size,
                                       ImportInfo* info) {
  gguf::File f = gguf::File::open(path);
  ModelConfig cfg = config_from(f, mode, group_size);
  auto model = std::make_unique<Model>(backend, cfg);
  model->init(1);  // LoRA adapters and moments; every base tensor is overwritten below
  std::vector<std::pair<Param*, const gguf::TensorInfo*>> exact;
  for (Param& p : model->params()) {
    if (gguf_name(p.name).empty()) continue;  // a LoRA adapter
    const gguf::TensorInfo* t = &tensor_for(f, p.name, p.value.shape());
    std::vector<float> v = f.to_f32(*t);
    backend.upload(p.value, v.data(), v.size() * sizeof(float));
    if (p.quantized() && t->type == gguf::Q4_0 && group_size == 32) exact.push_back({&p, t});
  }
  model->quantize_from_masters();
  for (auto [p, t] : exact) {
    q4::Geometry g(p->value.shape()[0], p->value.shape()[1], 32);
    std::vector<uint8_t> codes(static_cast<size_t>(g.N * g.K));
    std::vector<float> scales(static_cast<size_t>(g.groups() * g.N));
    gguf::q4_0_to_q4gsw(f.data(*t), g.N, g.K, codes.data(), scales.data());
    auto words = q4::pack_w4x8(g, codes.data());
    backend.upload(p->codes, words.data(), words.size() * sizeof(uint32_t));
    backend.upload(p->scales, scales.data(), scales.size() * sizeof(float));
  }
  model->steps_done = 0;
  if (info) {
    info->config = cfg;
    info->q4_error = interop_detail::q4_error(*model);
    try {
      info->vocab = gguf::read_vocab(f);
    } catch (const Error& e) {
      info->vocab = GgufVocab();
      info->notes.push_back(std::string("tokenizer metadata not usable: ") + e.what());
    }
    info->exact_q4 = static_cast<int>(exact.size());
  }
  return model;
}

std::map<std::string, std::vector<float>> llama_names::gguf_masters(const std::string& path, ModelConfig* cfg_out) {
  gguf::File f = gguf::File::open(path);
  const ModelConfig cfg = config_from(f, TrainMode::fp32, 32);
  std::map<std::string, std::vector<float>> out;
  for (const BaseTensor& t : base_tensors(cfg)) out[t.name] = f.to_f32(tensor_for(f, t.name, t.shape));
  if (cfg_out) *cfg_out = cfg;
  return out;
}

GgufType gguf_type_from_name(const std::string& s) {
  if (s == "f32" || s == "F32") return GgufType::F32;
  if (s == "f16" || s == "F16") return GgufType::F16;
  if (s == "q4_0" || s == "Q4_0") return GgufType::Q4_0;
  if (s == "q8_0" || s == "Q8_0") return GgufType::Q8_0;
  if (s == "q4_k" || s == "Q4_K") return GgufType::Q4_K;
  fail("unknown GGUF type '", s, "' (choose f32, f16, q4_0, q8_0 or q4_k)");
}

namespace {

// llama.cpp's llama_ftype of a file whose linears are `type` (general.file_type; informational).
uint32_t file_type(GgufType type) {
  switch (type) {
    case GgufType::F32: return 0;
    case GgufType::F16: return 1;
    case GgufType::Q4_0: return 2;
    case GgufType::Q8_0: return 7;
    case GgufType::Q4_K: return 14;  // LLAMA_FTYPE_MOSTLY_Q4_K_S: every linear Q4_K
  }
  return 0;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> bytes(v.size() * 4);
  if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

// The 4-bit linear `p` as Q4_0 blocks: its codes and scales bit for bit when they fit (group size a multiple
// of 32, fp16 scales, no merged adapter), else llama.cpp's Q4_0 quantization of its weight `v` with a warning.
std::vector<uint8_t> q4_0_blocks(Model& model, Param& p, const std::vector<float>& v, GgufExportReport& rep) {
  const ModelConfig& c = model.config();
  Backend& b = model.backend();
  const int64_t N = p.value.shape()[0], K = p.value.shape()[1];
  bool merged = false;
  for (Param& q : model.params())
    if (q.name == p.name + ".lora_b")
      for (float x : b.to_vector<float>(q.value)) merged |= x != 0.0f;
  // A q4gsw group of 32*j values with scale s is j Q4_0 blocks with that scale: exact whenever the group
  // size is a multiple of 32 and s is an fp16 value (quantize() rounds every scale to fp16).
  std::string why_not;
  if (!p.quantized()) why_not = "an fp32-mode weight";
  else if (merged) why_not = "merged LoRA adapters";
  else if (c.group_size % 32 != 0) why_not = "group size " + std::to_string(c.group_size) + " is not a multiple of 32";
  std::vector<float> scales32;
  if (why_not.empty()) {
    const auto scales = b.to_vector<float>(p.scales);
    scales32.resize(static_cast<size_t>(K / 32 * N));
    for (int64_t j = 0; j < K / 32; ++j)
      for (int64_t n = 0; n < N; ++n) {
        const float sc = scales[(j * 32 / c.group_size) * N + n];
        if (round_to_f16(sc) != sc && why_not.empty())
          why_not = "scale " + std::to_string(sc) + " is not an fp16 value (a checkpoint of an older version)";
        scales32[j * N + n] = sc;
      }
  }
  if (why_not.empty()) {
    const auto codes = q4::unpack_w4x8(q4::Geometry(N, K, c.group_size), b.to_vector<uint32_t>(p.codes).data());
    ++rep.exact_q4;
    return gguf::q4gsw_to_q4_0(N, K, codes.data(), scales32.data());
  }
  auto blocks = gguf::quantize_q4_0(v.data(), v.size());
  std::vector<float> back(v.size());
  gguf::decode_q4_0(blocks.data(), back.size(), back.data());
  rep.error.add(p.name, back.data(), v.data(), v.size());
  ++rep.requantized;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g%%", 100 * rep.error.tensors.back().rel_rms);
  rep.warnings.push_back(p.name + ": re-quantized to Q4_0 (" + why_not + "), RMS weight error " + buf +
                         " of the weight RMS");
  return blocks;
}

// `v` quantized to Q8_0 or Q4_K by llama.cpp's rules, with the decoded blocks' error recorded.
std::vector<uint8_t> quantized_blocks(uint32_t type, const std::string& name, const std::vector<float>& v,
                                      GgufExportReport& rep) {
  std::vector<uint8_t> blocks = type == gguf::Q8_0 ? gguf::quantize_q8_0(v.data(), v.size())
                                                   : gguf::quantize_q4_k(v.data(), v.size());
  std::vector<float> back(v.size());
  gguf::decode_to_f32(type, blocks.data(), back.size(), back.data());
  rep.error.add(name, back.data(), v.data(), v.size());
  ++rep.requantized;
  return blocks;
}

}  // namespace

GgufExportReport save_gguf(const std::string& path, Model& model, GgufType type, const Tokenizer* tok) {
  const ModelConfig& c = model.config();
  GgufExportReport rep;
  gguf::Writer w;
  using V = gguf::Value;
  w.add_kv("general.architecture", V::str("llama"));
  w.add_kv("general.name", V::str("edgetrain"));
  w.add_kv("general.alignment", V::u32(32));
  w.add_kv("general.file_type", V::u32(file_type(type)));
  if (type != GgufType::F32 && type != GgufType::F16) w.add_kv("general.quantization_version", V::u32(2));
  w.add_kv("llama.context_length", V::u32(static_cast<uint32_t>(c.max_seq)));
  w.add_kv("llama.embedding_length", V::u32(static_cast<uint32_t>(c.dim)));
  w.add_kv("llama.block_count", V::u32(static_cast<uint32_t>(c.n_layers)));
  w.add_kv("llama.feed_forward_length", V::u32(static_cast<uint32_t>(c.ffn_dim)));
  w.add_kv("llama.attention.head_count", V::u32(static_cast<uint32_t>(c.n_heads)));
  w.add_kv("llama.attention.head_count_kv", V::u32(static_cast<uint32_t>(c.kv_heads())));
  w.add_kv("llama.rope.dimension_count", V::u32(static_cast<uint32_t>(c.head_dim())));
  w.add_kv("llama.rope.freq_base", V::f32(c.rope_theta));
  w.add_kv("llama.attention.layer_norm_rms_epsilon", V::f32(c.norm_eps));
  w.add_kv("llama.vocab_size", V::u32(static_cast<uint32_t>(c.vocab)));
  if (tok) {
    ET_CHECK(tok->vocab_size() == c.vocab, "save_gguf: tokenizer '", tok->name(), "' has ", tok->vocab_size(),
             " tokens, the model ", c.vocab);
    gguf::add_vocab(w, tok->gguf_vocab());
  }
  for (Param& p : model.params()) {
    std::string gn = gguf_name(p.name);
    if (gn.empty()) continue;
    auto ne = gguf_dims(p.value.shape());
    std::vector<float> v = interop_detail::effective_weight(model, p);
    const bool linear = p.value.shape().rank() == 2 && p.name != "tok_embeddings.weight";
    const int64_t K = linear ? p.value.shape()[1] : 0;
    // Quantized files keep what edgetrain never quantizes (embeddings, norms, the output head) in F32, as
    // trained: the file is the model, not an approximation of it.
    if (!linear || type == GgufType::F32 || p.name == "output.weight") {
      w.add_tensor(gn, ne, gguf::F32, f32_bytes(v));
    } else if (type == GgufType::F16) {
      std::vector<uint8_t> bytes(v.size() * 2);
      for (size_t i = 0; i < v.size(); ++i) {
        uint16_t h = f32_to_f16(v[i]);
        std::memcpy(&bytes[2 * i], &h, 2);
      }
      w.add_tensor(gn, ne, gguf::F16, std::move(bytes));
    } else if (type == GgufType::Q4_K && K % 256 == 0) {
      w.add_tensor(gn, ne, gguf::Q4_K, quantized_blocks(gguf::Q4_K, p.name, v, rep));
    } else if (K % 32 != 0) {
      rep.warnings.push_back(p.name + ": K = " + std::to_string(K) + " is not a multiple of 32, written as F32");
      w.add_tensor(gn, ne, gguf::F32, f32_bytes(v));
    } else if (type == GgufType::Q8_0) {
      w.add_tensor(gn, ne, gguf::Q8_0, quantized_blocks(gguf::Q8_0, p.name, v, rep));
    } else {
      if (type == GgufType::Q4_K)
        rep.warnings.push_back(p.name + ": K = " + std::to_string(K) + " is not a multiple of 256 (a Q4_K block), written as Q4_0");
      w.add_tensor(gn, ne, gguf::Q4_0, q4_0_blocks(model, p, v, rep));
    }
  }
  w.save(path);
  return rep;
}

}  // namespace edgetrain
