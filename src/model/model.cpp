// The model's parameters: creation, deterministic initialisation, quantization, and lookup.
// The recorded training/eval/generation programs live in step.cpp and generate.cpp.
#include <atomic>
#include <cmath>
#include <cstring>
#include <system_error>
#include <thread>

#include "edgetrain/q4gsw.h"
#include "model/model_impl.h"

namespace edgetrain {

namespace {

// SplitMix64: a tiny, portable generator so initial weights are identical on every platform.
struct SplitMix {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) / 9007199254740992.0; }  // (0, 1)
  double normal() { return std::sqrt(-2.0 * std::log(uniform())) * std::cos(2.0 * M_PI * uniform()); }
};

uint64_t name_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

Model::Model(Backend& b, const ModelConfig& cfg) : backend_(b), cfg_(cfg), impl_(std::make_unique<Impl>()) {
  cfg_.validate();
  const int64_t D = cfg_.dim, F = cfg_.ffn_dim, V = cfg_.vocab, KV = cfg_.kv_dim();
  const bool base_trainable = cfg_.mode != TrainMode::qlora;
  const bool quantized = cfg_.mode != TrainMode::fp32;
  // Param* stay valid: no reallocation. Per layer at most 4 norms + 7 linears, each with 2 LoRA adapters, + 3 biases.
  params_.reserve(static_cast<size_t>(28 * cfg_.n_layers + 3));
  auto add = [&](const std::string& name, Shape shape, bool trainable, bool decay, bool q4) -> Param* {
    Param p;
    p.name = name;
    // A frozen 4-bit linear's master: no kernel reads it (the steps read the codes), so it stays off the device.
    p.value = (q4 && !trainable ? b.host_storage() : b).zeros(shape, DType::f32);
    p.trainable = trainable;
    p.decay = decay;
    if (trainable) {
      p.grad = b.zeros(shape, DType::f32);
      p.m = b.zeros(shape, DType::f32);
      p.v = b.zeros(shape, DType::f32);
    }
    if (q4) {
      q4::Geometry g(shape[0], shape[1], cfg_.group_size);
      p.codes = b.zeros(Shape{g.words()}, DType::u32);
      p.scales = b.zeros(Shape{g.groups(), shape[0]}, DType::f32);
    }
    ET_CHECK(params_.size() < params_.capacity(), "model: internal error: the parameter table would reallocate");
    params_.push_back(std::move(p));
    return &params_.back();
  };
  auto targets = cfg_.lora_targets + ",";
  auto lora_on = [&](const char* t) {
    return cfg_.mode == TrainMode::qlora && targets.find(std::string(t) + ",") != std::string::npos;
  };
  auto linear = [&](const std::string& name, const char* target, int64_t N, int64_t K, bool bias = false) {
    Impl::Lin l;
    l.w = add(name, Shape{N, K}, base_trainable, true, quantized);
    l.N = N;
    l.K = K;
    if (lora_on(target)) {
      l.a = add(name + ".lora_a", Shape{cfg_.lora_rank, K}, true, false, false);
      l.b = add(name + ".lora_b", Shape{N, cfg_.lora_rank}, true, false, false);
    }
    // A bias trains like the norms (fp32, no decay; frozen in qlora). Its name is the weight's with ".bias".
    if (bias) l.bias = add(name.substr(0, name.size() - 7) + ".bias", Shape{N}, base_trainable, false, false);
    return l;
  };
  impl_->emb = add("tok_embeddings.weight", Shape{V, D}, base_trainable, false, false);
  for (int64_t i = 0; i < cfg_.n_layers; ++i) {
    std::string p = "layers." + std::to_string(i) + ".";
    Impl::Layer L;
    L.attn_norm = add(p + "attention_norm.weight", Shape{D}, base_trainable, false, false);
    const bool bias = cfg_.qkv_bias();
    L.q = linear(p + "attention.wq.weight", "q", cfg_.q_dim(), D, bias);  // [n_heads * head_dim, dim]
    L.k = linear(p + "attention.wk.weight", "k", KV, D, bias);            // [n_kv_heads * head_dim, dim]
    L.v = linear(p + "attention.wv.weight", "v", KV, D, bias);
    L.o = linear(p + "attention.wo.weight", "o", D, cfg_.q_dim());
    if (cfg_.qk_norm()) {
      L.q_norm = add(p + "attention.q_norm.weight", Shape{cfg_.head_dim()}, base_trainable, false, false);
      L.k_norm = add(p + "attention.k_norm.weight", Shape{cfg_.head_dim()}, base_trainable, false, false);
    }
    L.ffn_norm = add(p + "ffn_norm.weight", Shape{D}, base_trainable, false, false);
    L.gate = linear(p + "feed_forward.w1.weight", "gate", F, D);
    L.up = linear(p + "feed_forward.w3.weight", "up", F, D);
    L.down = linear(p + "feed_forward.w2.weight", "down", D, F);
    impl_->layers.push_back(L);
  }
  impl_->norm = add("norm.weight", Shape{D}, base_trainable, false, false);
  impl_->head = cfg_.tied_head ? impl_->emb : add("output.weight", Shape{V, D}, base_trainable, true, false);
  if (!cfg_.rope_factors.empty()) {
    std::vector<float> f;
    for (double x : cfg_.rope_frequencies()) f.push_back(static_cast<float>(x));
    impl_->rope_freqs = b.from_vector(Shape{static_cast<int64_t>(f.size())}, DType::f32, f);
  }
}

Model::~Model() = default;

Param& Model::param(const std::string& name) {
  for (Param& p : params_)
    if (p.name == name) return p;
  fail("model: no parameter named '", name, "'");
}

void Model::init(uint64_t seed) {
  const double std_dev = 0.02, resid = 0.02 / std::sqrt(2.0 * static_cast<double>(cfg_.n_layers));
  // Each value draws a fixed number of SplitMix outputs (2 for a normal, 1 for a uniform), and SplitMix's
  // n-th output depends on n alone: chunks of a tensor are filled on all cores with exactly the values of
  // one sequential pass (a 1B model's 1.2G normals take ~40 s on one core).
  const unsigned threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  for (Param& p : params_) {
    const uint64_t base = seed ^ name_hash(p.name);
    std::vector<float> v(static_cast<size_t>(p.value.numel()));
    const bool is_bias = p.name.size() > 5 && p.name.compare(p.name.size() - 5, 5, ".bias") == 0;
    bool is_norm = p.value.shape().rank() == 1 && !is_bias;
    bool lora_a = p.name.size() > 7 && p.name.compare(p.name.size() - 7, 7, ".lora_a") == 0;
    bool lora_b = p.name.size() > 7 && p.name.compare(p.name.size() - 7, 7, ".lora_b") == 0;
    bool residual_out = p.name.find("attention.wo") != std::string::npos || p.name.find("feed_forward.w2") != std::string::npos;
    const uint64_t draws = is_norm || is_bias || lora_b ? 0 : lora_a ? 1 : 2;
    const double a_root = lora_a ? std::sqrt(static_cast<double>(p.value.shape()[1])) : 1.0;
    const double sd = residual_out ? resid : std_dev;
    auto fill = [&](size_t begin, size_t end) {
      SplitMix rng{base + 0x9E3779B97F4A7C15ull * draws * begin};
      for (size_t i = begin; i < end; ++i) {
        float& x = v[i];
        if (is_norm) x = 1.0f;
        else if (is_bias || lora_b) x = 0.0f;  // adapters start as the identity: B = 0
        else if (lora_a) x = static_cast<float>((rng.uniform() * 2.0 - 1.0) / a_root);
        else x = static_cast<float>(rng.normal() * sd);
      }
    };
    // This thread takes chunks too, beside helpers for the chunks beyond the first; where no thread can be
    // started (a browser build without pthreads), it fills them all.
    const size_t n = v.size(), chunk = size_t{1} << 20, chunks = (n + chunk - 1) / chunk;
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t b; (b = next.fetch_add(chunk)) < n;) fill(b, std::min(n, b + chunk));
    };
    std::vector<std::thread> helpers;
    try {
      for (size_t t = 1; t < std::min<size_t>(threads, chunks); ++t) helpers.emplace_back(work);
    } catch (const std::system_error&) {
    }
    work();
    for (std::thread& t : helpers) t.join();
    backend_.upload(p.value, v.data(), v.size() * sizeof(float));
  }
  quantize_from_masters();
  for (Param& p : params_)
    if (p.trainable) {
      for (const Tensor* t : {&p.grad, &p.m, &p.v}) {
        std::vector<float> z(static_cast<size_t>(t->numel()), 0.0f);
        backend_.upload(*t, z.data(), z.size() * sizeof(float));
      }
    }
  steps_done = 0;
  adam_steps = 0;
}

void Model::quantize_from_masters() {
  for (Param& p : params_) {
    if (!p.quantized()) continue;
    auto w = backend_.to_vector<float>(p.value);
    q4::Geometry g(p.value.shape()[0], p.value.shape()[1], cfg_.group_size);
    auto q = q4::quantize(g, w.data());
    auto words = q4::pack_w4x8(g, q.codes.data());
    backend_.upload(p.scales, q.scales.data(), q.scales.size() * sizeof(float));
    backend_.upload(p.codes, words.data(), words.size() * sizeof(uint32_t));
  }
}

void Model::requantize() {
  for (Param& p : params_) {
    if (!p.quantized()) continue;
    auto w = backend_.to_vector<float>(p.value);
    auto s = backend_.to_vector<float>(p.scales);
    q4::Geometry g(p.value.shape()[0], p.value.shape()[1], cfg_.group_size);
    std::vector<uint8_t> codes(w.size());
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t k = 0; k < g.K; ++k)
        codes[n * g.K + k] = q4::requant_code(w[n * g.K + k], s[(k / g.group_size) * g.N + n]);
    auto words = q4::pack_w4x8(g, codes.data());
    backend_.upload(p.codes, words.data(), words.size() * sizeof(uint32_t));
  }
}

q4::RangeStats Model::range_stats() {
  q4::RangeStats all;
  for (Param& p : params_) {
    if (!p.quantized()) continue;
    q4::Geometry g(p.value.shape()[0], p.value.shape()[1], cfg_.group_size);
    const auto w = backend_.to_vector<float>(p.value), s = backend_.to_vector<float>(p.scales);
    const q4::RangeStats r = q4::range_stats(g, w.data(), s.data());
    all.outside += r.outside, all.total += r.total, all.max_ratio = std::max(all.max_ratio, r.max_ratio);
  }
  return all;
}

std::vector<Model::Named> Model::state_tensors() {
  std::vector<Named> out;
  for (Param& p : params_) {
    out.push_back({p.name, p.value});
    if (p.quantized()) {
      out.push_back({p.name + ".q4_codes", p.codes});
      out.push_back({p.name + ".q4_scales", p.scales});
    }
    if (p.trainable) {
      out.push_back({p.name + ".adam_m", p.m});
      out.push_back({p.name + ".adam_v", p.v});
    }
  }
  return out;
}

}  // namespace edgetrain
