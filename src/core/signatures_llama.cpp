// Signatures of the Llama block ops (norms, rope, SwiGLU, embedding, gather, fused attention); see
// signatures.h.
#include <algorithm>
#include <cstdint>

#include "core/signatures.h"

namespace edgetrain::sig {

// ---- Llama block ----

void sig_rms_norm(Ctx& x) {
  const Tensor &a = x.in(0), &w = x.in(1);
  x.dtype(a, DType::f32, "x");
  x.dtype(w, DType::f32, "w");
  x.rank_at_least(a, 1, "x");
  if (w.shape() != Shape{a.shape().last()}) x.bad("w must be [D] = [", a.shape().last(), "], got ", w.str());
  x.out(a.shape(), DType::f32);
  x.out(Shape{a.shape().rows()}, DType::f32);
}

void sig_rms_norm_backward(Ctx& x) {
  const Tensor &dy = x.in(0), &a = x.in(1), &w = x.in(2), &rstd = x.in(3);
  for (size_t i = 0; i < 4; ++i) x.dtype(x.in(i), DType::f32, "every input");
  x.rank_at_least(a, 1, "x");
  if (dy.shape() != a.shape()) x.bad("dy and x must have the same shape");
  if (w.shape() != Shape{a.shape().last()}) x.bad("w must be [D] = [", a.shape().last(), "], got ", w.str());
  if (rstd.shape() != Shape{a.shape().rows()}) x.bad("rstd must be [rows] = [", a.shape().rows(), "]");
  x.flag(0, "accumulate");
  if (x.c.ints.size() > 1) x.flag(1, "dw");
  x.out(a.shape(), DType::f32);
  x.out(w.shape(), DType::f32);
}

static void rope_like(Ctx& x) {
  const Tensor& a = x.in(0);
  x.dtype(a, DType::f32, "x");
  int r = a.shape().rank();
  if (r != 3 && r != 4) x.bad("x must be [B, T, H, D] or [T, H, D], got ", a.str());
  if (a.shape().last() % 2 != 0) x.bad("head dim D must be even, got ", a.str());
  if (x.has_in(1)) {
    x.dtype(x.in(1), DType::f32, "freqs");
    if (x.in(1).shape() != Shape{a.shape().last() / 2})
      x.bad("freqs must be [D/2] = [", a.shape().last() / 2, "] (one frequency per pair), got ", x.in(1).str());
  }
  if (x.has_in(2)) {
    const Shape want = r == 4 ? Shape{a.shape()[0], a.shape()[1]} : Shape{a.shape()[0]};
    x.dtype(x.in(2), DType::i32, "pos");
    if (x.in(2).shape() != want)
      x.bad("pos must be ", want.str(), " (each token's position within its sample), got ", x.in(2).str());
  }
  x.out(a.shape(), DType::f32);
}
void sig_rope(Ctx& x) { rope_like(x); }
void sig_rope_backward(Ctx& x) { rope_like(x); }

void sig_silu_mul(Ctx& x) {
  x.dtype(x.in(0), DType::f32, "g");
  x.dtype(x.in(1), DType::f32, "u");
  if (x.in(0).shape() != x.in(1).shape()) x.bad("g and u must have the same shape");
  x.out(x.in(0).shape(), DType::f32);
}

void sig_silu_mul_backward(Ctx& x) {
  for (size_t i = 0; i < 3; ++i) {
    x.dtype(x.in(i), DType::f32, "every input");
    if (x.in(i).shape() != x.in(0).shape()) x.bad("dh, g and u must have the same shape");
  }
  x.out(x.in(0).shape(), DType::f32);
  x.out(x.in(0).shape(), DType::f32);
}

void sig_embedding(Ctx& x) {
  const Tensor &w = x.in(0), &idx = x.in(1);
  x.dtype(w, DType::f32, "w");
  x.rank_is(w, 2, "w");
  x.dtype(idx, DType::i32, "idx");
  if (x.c.ints.size() == 1) x.bad("give both first and total (a part of a table) or neither");
  if (x.c.ints.size() == 2) vocab_part(x, w.shape()[0], 0, 1);
  x.out(append_dim(x, idx.shape(), w.shape()[1]), DType::f32);
}

void sig_embedding_backward(Ctx& x) {
  x.outputs_given = true;
  if (x.inferring) x.bad("the vocabulary size is the caller's choice; use Graph::embedding_backward");
  const Tensor &dout = x.in(0), &idx = x.in(1), &dw = x.c.out[0];
  x.dtype(dout, DType::f32, "dout");
  x.dtype(idx, DType::i32, "idx");
  x.dtype(dw, DType::f32, "dw");
  x.rank_is(dw, 2, "dw");
  x.flag(0, "accumulate");
  if (x.c.ints.size() > 1) vocab_part(x, dw.shape()[0], 1, -1);
  if (dout.shape() != append_dim(x, idx.shape(), dw.shape()[1]))
    x.bad("dout must be idx.shape + [D] with D = ", dw.shape()[1], ", got ", dout.str());
}

void sig_gather(Ctx& x) {
  const Tensor &a = x.in(0), &idx = x.in(1);
  x.dtype(a, DType::f32, "x");
  x.dtype(idx, DType::i32, "index");
  int r = a.shape().rank();
  if (idx.shape().rank() != r) x.bad("index must have x's rank ", r, ", got ", idx.str());
  int64_t d = x.ival(0);
  if (d < -r || d >= r) x.bad("dim ", d, " out of range for rank ", r);
  if (d < 0) d += r;
  for (int i = 0; i < r; ++i)
    if (i != d && idx.shape()[i] > a.shape()[i])
      x.bad("index size ", idx.shape()[i], " exceeds x size ", a.shape()[i], " in dim ", i);
  x.out(idx.shape(), DType::f32);
}

// q [B,T,H,hd], k and v [B,S,KV,hd] with S >= T and KV dividing H; returns {B, T, S, H, KV, hd} after
// checking them (names in messages as the catalogue's).
struct AttnDims {
  int64_t B, T, S, H, KV, hd;
};
AttnDims attention_dims(const Ctx& x, const Tensor& q, const Tensor& k, const Tensor& v) {
  x.dtype(q, DType::f32, "q");
  x.dtype(k, DType::f32, "k");
  x.dtype(v, DType::f32, "v");
  x.rank_is(q, 4, "q [B, T, H, hd]");
  x.rank_is(k, 4, "k [B, S, KV, hd]");
  if (v.shape() != k.shape()) x.bad("v must have k's shape ", k.shape().str(), ", got ", v.str());
  const Shape &qs = q.shape(), &ks = k.shape();
  AttnDims d{qs[0], qs[1], ks[1], qs[2], ks[2], qs[3]};
  if (ks[0] != d.B || ks[3] != d.hd)
    x.bad("k must be [B, S, KV, hd] with q's B = ", d.B, " and hd = ", d.hd, ", got ", k.str());
  if (d.hd < 1 || d.H < 1 || d.KV < 1) x.bad("heads and head dim must be >= 1, got q ", q.str(), " and k ", k.str());
  if (d.H % d.KV != 0) x.bad("the ", d.KV, " kv heads of k must divide the ", d.H, " query heads of q");
  if (d.S < d.T) x.bad("k's S = ", d.S, " must be >= q's T = ", d.T, " (the last T of S positions are the queries)");
  return d;
}

// The optional pos [B, T] (sample packing) at input i: i32, and only with S == T, where query t is
// position t of the sequence (with a KV cache the queries' positions are not the sequence's).
static void attention_pos(const Ctx& x, size_t i, const AttnDims& d) {
  if (!x.has_in(i)) return;
  x.dtype(x.in(i), DType::i32, "pos");
  if (x.in(i).shape() != Shape{d.B, d.T})
    x.bad("pos must be [B, T] = [", d.B, ", ", d.T, "] (each query's position within its sample), got ", x.in(i).str());
  if (d.S != d.T)
    x.bad("pos (sample packing) needs k's S = ", d.S, " equal to q's T = ", d.T,
          " (training shape; a KV cache with S > T has no packed samples)");
}

void sig_attention(Ctx& x) {
  const AttnDims d = attention_dims(x, x.in(0), x.in(1), x.in(2));
  attention_pos(x, 3, d);
  x.out(x.in(0).shape(), DType::f32);
  x.out(Shape{d.B, d.H, d.T}, DType::f32);
}

void sig_attention_backward(Ctx& x) {
  const Tensor &dout = x.in(0), &q = x.in(1), &out = x.in(4), &lse = x.in(5);
  const AttnDims d = attention_dims(x, q, x.in(2), x.in(3));
  x.dtype(dout, DType::f32, "dout");
  x.dtype(out, DType::f32, "out");
  x.dtype(lse, DType::f32, "lse");
  if (dout.shape() != q.shape()) x.bad("dout must have q's shape ", q.shape().str(), ", got ", dout.str());
  if (out.shape() != q.shape()) x.bad("out must have q's shape ", q.shape().str(), ", got ", out.str());
  if (lse.shape() != Shape{d.B, d.H, d.T}) x.bad("lse must be [B, H, T] = [", d.B, ", ", d.H, ", ", d.T, "], got ", lse.str());
  attention_pos(x, 6, d);
  x.out(q.shape(), DType::f32);
  x.out(x.in(2).shape(), DType::f32);
  x.out(x.in(3).shape(), DType::f32);
}

}  // namespace edgetrain::sig
