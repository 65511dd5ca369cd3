// Generation with a KV cache: each call runs only the new tokens through the model, appending their
// rotated keys and values to per-layer caches, and returns the logits of the new positions. The program
// is recorded per call because the attended length grows; pipelines are cached by the backends.
// The caches hold only the n_kv_heads key/value heads, as rows [position, KV * hd]: their first L rows are
// the [1, L, KV, hd] keys and values of the attention op, whose T queries are the last T of those L
// positions (so query t sees the cached positions and the new ones up to itself).
#include <algorithm>
#include <cmath>

#include "model/model_impl.h"

namespace edgetrain {

void Model::reset_cache() { impl_->cache_len = 0; }

std::vector<float> Model::next_logits(const std::vector<int32_t>& new_tokens) {
  Impl& m = *impl_;
  const int64_t T = static_cast<int64_t>(new_tokens.size()), H = cfg_.n_heads, hd = cfg_.head_dim();
  const int64_t KV = cfg_.kv_heads(), KVD = cfg_.kv_dim();
  ET_CHECK(T >= 1, "generate: no tokens given");
  for (int32_t t : new_tokens) ET_CHECK(t >= 0 && t < cfg_.vocab, "generate: token id ", t, " outside the vocabulary");
  const int64_t pos = m.cache_len, L = pos + T;
  ET_CHECK(L <= cfg_.max_seq, "generate: context of ", L, " tokens exceeds max_seq ", cfg_.max_seq,
           " (reset the cache and feed a shorter prompt)");
  if (m.k_cache.empty())
    for (size_t i = 0; i < m.layers.size(); ++i) {
      m.k_cache.push_back(backend_.zeros(Shape{cfg_.max_seq, KVD}, DType::f32));
      m.v_cache.push_back(backend_.zeros(Shape{cfg_.max_seq, KVD}, DType::f32));
    }
  auto prog = backend_.new_program();
  prog->share_memory(m.memory);  // each call records a program: they reuse the same buffers
  Graph g(backend_, *prog);
  Tensor tokens = backend_.from_vector(Shape{T}, DType::i32, new_tokens);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const float theta = cfg_.rope_theta, p0 = static_cast<float>(pos);
  auto lin = [&](const Tensor& x, const Impl::Lin& l) {
    const Tensor bias = l.bias ? l.bias->value : Tensor();
    Tensor y = l.w->quantized() ? g.linear_q4gsw(x, l.w->codes, l.w->scales, cfg_.group_size, bias)
                                : g.linear(x, l.w->value, bias);
    if (l.a) g.call(Op::add, {y, g.linear(g.linear(x, l.a->value), l.b->value)}, {y}, {},
                    {cfg_.lora_alpha / static_cast<float>(cfg_.lora_rank)});
    return y;
  };
  Tensor x = embed(g, m.emb->value, tokens);  // [T, D]
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const Impl::Layer& Ly = m.layers[i];
    Tensor h = g.rms_norm(x, Ly.attn_norm->value, cfg_.norm_eps).first;
    Tensor q = lin(h, Ly.q).reshape(Shape{1, T, H, hd}), k = lin(h, Ly.k).reshape(Shape{1, T, KV, hd});
    if (Ly.q_norm) {  // qwen3
      q = g.rms_norm(q, Ly.q_norm->value, cfg_.norm_eps).first;
      k = g.rms_norm(k, Ly.k_norm->value, cfg_.norm_eps).first;
    }
    q = g.rope(q, theta, p0, m.rope_freqs);
    k = g.rope(k, theta, p0, m.rope_freqs);
    g.write_rows(k.reshape(Shape{T, KVD}), m.k_cache[i], p0);
    g.write_rows(lin(h, Ly.v), m.v_cache[i], p0);
    // The first L rows of a cache are a contiguous prefix of its memory: view them without a copy.
    Tensor kc(m.k_cache[i].storage(), Shape{1, L, KV, hd}, DType::f32), vc(m.v_cache[i].storage(), Shape{1, L, KV, hd}, DType::f32);
    Tensor o = g.attention(q, kc, vc, scale).first.reshape(Shape{T, H * hd});
    Tensor x2 = g.add(x, lin(o, Ly.o));
    Tensor h2 = g.rms_norm(x2, Ly.ffn_norm->value, cfg_.norm_eps).first;
    x = g.add(x2, lin(g.silu_mul(lin(h2, Ly.gate), lin(h2, Ly.up)), Ly.down));
  }
  // [T, V] in parts of the vocabulary when the logits exceed one binding (vocab.cpp)
  const std::vector<Tensor> parts = head_logits(g, m.head->value, g.rms_norm(x, m.norm->value, cfg_.norm_eps).first);
  prog->finalize();
  prog->replay();
  m.cache_len = L;
  if (parts.size() == 1) return backend_.to_vector<float>(parts[0]);
  const int64_t V = cfg_.vocab;
  std::vector<float> logits(static_cast<size_t>(T * V));
  int64_t first = 0;
  for (const Tensor& p : parts) {
    const int64_t n = p.shape()[1];
    const std::vector<float> v = backend_.to_vector<float>(p);
    for (int64_t t = 0; t < T; ++t) std::copy_n(v.begin() + t * n, n, logits.begin() + t * V + first);
    first += n;
  }
  return logits;
}

}  // namespace edgetrain
