// Llama models <-> GGUF: the config from llama.* metadata, the import (Q4_0 linears taken bit for bit as
// q4gsw group 32), fp32 masters for `train --init`, and the export save_gguf. Tensor names come from
// io/llama_names.
#include <cmath>
#include <cstdio>
#include <cstring>

#include "edgetrain/error.h"
#include "edgetrain/half.h"
#include "edgetrain/interop.h"
#include "edgetrain/q4gsw.h"
#include "io/gguf.h"
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
  const std::string& src = f.source();
  std::string arch = f.get_string("general.architecture");
  ET_CHECK(arch == "llama", "file ", src, ": general.architecture is '", arch, "', only 'llama' is supported");
  ModelConfig c;
  c.mode = mode;
  c.group_size = group_size;
  c.dim = f.get_int("llama.embedding_length");
  c.n_layers = f.get_int("llama.block_count");
  c.n_heads = f.get_int("llama.attention.head_count");
  if (f.has("llama.attention.head_count_kv")) {
    // Grouped-query attention. K rows are in llama.cpp's order already (adjacent rotary pairs within each
    // of the head_count_kv heads, as convert_hf_to_gguf permutes them): nothing to permute here.
    int64_t kv = f.get_int("llama.attention.head_count_kv");
    ET_CHECK(kv >= 1 && c.n_heads >= 1 && c.n_heads % kv == 0, "file ", src, ": llama.attention.head_count_kv = ", kv,
             " does not divide llama.attention.head_count = ", c.n_heads,
             " (grouped-query attention needs n_heads / n_kv_heads query heads per key/value head)");
    c.n_kv_heads = kv;
  }
  c.ffn_dim = f.get_int("llama.feed_forward_length");
  c.max_seq = f.has("llama.context_length") ? f.get_int("llama.context_length") : 2048;
  if (f.has("llama.rope.freq_base")) c.rope_theta = static_cast<float>(f.get_float("llama.rope.freq_base"));
  c.norm_eps = static_cast<float>(f.get_float("llama.attention.layer_norm_rms_epsilon"));
  ET_CHECK(c.n_heads >= 1 && c.dim % c.n_heads == 0, "file ", src, ": llama.embedding_length ", c.dim,
           " is not a multiple of llama.attention.head_count ", c.n_heads);
  if (f.has("llama.rope.dimension_count"))
    ET_CHECK(f.get_int("llama.rope.dimension_count") == c.dim / c.n_heads, "file ", src,
             ": llama.rope.dimension_count differs from the head dim (partial rotary is not supported)");
  const gguf::TensorInfo* emb = f.tensor("token_embd.weight");
  ET_CHECK(emb && emb->ne.size() == 2, "file ", src, ": missing 2-D tensor 'token_embd.weight'");
  c.vocab = static_cast<int64_t>(emb->ne[1]);
  c.tied_head = f.tensor("output.weight") == nullptr;
  try {
    c.validate();
  } catch (const Error& e) {
    fail_kind(e.kind(), "file ", src, ": ", e.what());
  }
  return c;
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
  fail("unknown GGUF type '", s, "' (choose f32, f16 or q4_0)");
}

GgufExportReport save_gguf(const std::string& path, Model& model, GgufType type, const Tokenizer* tok) {
  const ModelConfig& c = model.config();
  Backend& b = model.backend();
  GgufExportReport rep;
  gguf::Writer w;
  using V = gguf::Value;
  w.add_kv("general.architecture", V::str("llama"));
  w.add_kv("general.name", V::str("edgetrain"));
  w.add_kv("general.alignment", V::u32(32));
  w.add_kv("general.file_type", V::u32(type == GgufType::F32 ? 0 : type == GgufType::F16 ? 1 : 2));
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
    bool linear = p.value.shape().rank() == 2 && p.name != "tok_embeddings.weight";
    auto as_f32 = [&] {
      std::vector<uint8_t> bytes(v.size() * 4);
      std::memcpy(bytes.data(), v.data(), bytes.size());
      return bytes;
    };
    // Q4_0 files keep what edgetrain never quantizes (embeddings, norms, the output head) in F32, as trained:
    // the file is the model, not an approximation of it.
    if (!linear || type == GgufType::F32 || p.name == "output.weight") {
      w.add_tensor(gn, ne, gguf::F32, as_f32());
    } else if (type == GgufType::F16) {
      std::vector<uint8_t> bytes(v.size() * 2);
      for (size_t i = 0; i < v.size(); ++i) {
        uint16_t h = f32_to_f16(v[i]);
        std::memcpy(&bytes[2 * i], &h, 2);
      }
      w.add_tensor(gn, ne, gguf::F16, std::move(bytes));
    } else {
      const int64_t N = p.value.shape()[0], K = p.value.shape()[1];
      if (K % 32 != 0) {
        rep.warnings.push_back(p.name + ": K not a multiple of 32, written as F32");
        w.add_tensor(gn, ne, gguf::F32, as_f32());
        continue;
      }
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
        q4::Geometry g(N, K, c.group_size);
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
        w.add_tensor(gn, ne, gguf::Q4_0, gguf::q4gsw_to_q4_0(N, K, codes.data(), scales32.data()));
        ++rep.exact_q4;
      } else {
        auto blocks = gguf::quantize_q4_0(v.data(), v.size());
        std::vector<float> back(v.size());
        gguf::decode_q4_0(blocks.data(), back.size(), back.data());
        double err = 0, ref = 0;
        for (size_t i = 0; i < v.size(); ++i) err += (back[i] - v[i]) * double(back[i] - v[i]), ref += v[i] * double(v[i]);
        w.add_tensor(gn, ne, gguf::Q4_0, std::move(blocks));
        ++rep.requantized;
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.3g%%", ref > 0 ? 100.0 * std::sqrt(err / ref) : 0.0);
        rep.warnings.push_back(p.name + ": re-quantized to Q4_0 (" + why_not + "), RMS weight error " + buf +
                               " of the weight RMS");
      }
    }
  }
  w.save(path);
  return rep;
}

}  // namespace edgetrain