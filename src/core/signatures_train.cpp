// Signatures of the training ops (4-bit products, requantization, fused cross-entropy, AdamW) and the
// optimizer helpers; see signatures.h.
#include <algorithm>
#include <cstdint>

#include "edgetrain/q4gsw.h"
#include "core/signatures.h"

namespace edgetrain::sig {

// ---- training ops ----

static void q4_weight(const Ctx& x, const Tensor& w, const Tensor& scales, int64_t N, int64_t K, int64_t gs) {
  if (gs <= 0 || gs % 4 != 0) x.bad("group_size must be a positive multiple of 4, got ", gs);
  if (N < 1 || K < 1) x.bad("weight must have N >= 1 and K >= 1, got N=", N, " K=", K);
  q4::Geometry g(N, K, gs);
  x.dtype(w, DType::u32, "w (W_4X8 words)");
  if (w.numel() != g.words())
    x.bad("w must hold 4*ceil(K/4)*ceil(N/8) = ", g.words(), " W_4X8 words for N=", N, " K=", K, ", got ",
          w.str());
  x.dtype(scales, DType::f32, "scales");
  if (scales.shape() != Shape{g.groups(), N})
    x.bad("scales must be [ceil(K/group_size), N] = [", g.groups(), ", ", N, "], got ", scales.str());
}

void sig_linear_q4gsw(Ctx& x) {
  const Tensor &a = x.in(0), &scales = x.in(2);
  x.dtype(a, DType::f32, "x");
  x.rank_at_least(a, 1, "x");
  x.rank_is(scales, 2, "scales");
  int64_t N = scales.shape()[1], K = a.shape().last();
  q4_weight(x, x.in(1), scales, N, K, x.ival(0));
  x.f16_flag(1);
  if (x.has_in(3)) {
    x.dtype(x.in(3), DType::f32, "bias");
    if (x.in(3).shape() != Shape{N}) x.bad("bias must be [N] = [", N, "], got ", x.in(3).str());
  }
  x.out(with_last(a.shape(), N), DType::f32);
}

void sig_linear_q4gsw_backward(Ctx& x) {
  const Tensor &dy = x.in(0), &scales = x.in(2);
  x.dtype(dy, DType::f32, "dy");
  x.rank_at_least(dy, 1, "dy");
  x.rank_is(scales, 2, "scales");
  int64_t N = scales.shape()[1], K = x.ival(1);
  if (dy.shape().last() != N) x.bad("dy's last dim must be N = ", N, ", got ", dy.str());
  q4_weight(x, x.in(1), scales, N, K, x.ival(0));
  x.f16_flag(2);
  x.out(with_last(dy.shape(), K), DType::f32);
}

// A latent f32 [N, K] that is requantized with its scales [ceil(K / group_size), N] (int 0: group_size).
static q4::Geometry requant_geometry(Ctx& x, const Tensor& lat, const Tensor& scales) {
  x.dtype(lat, DType::f32, "latent");
  x.rank_is(lat, 2, "latent");
  x.rank_is(scales, 2, "scales");
  int64_t N = lat.shape()[0], K = lat.shape()[1], gs = x.ival(0);
  if (gs <= 0 || gs % 4 != 0) x.bad("group_size must be a positive multiple of 4, got ", gs);
  if (N < 1 || K < 1) x.bad("latent must be non-empty, got ", lat.str());
  q4::Geometry g(N, K, gs);
  x.dtype(scales, DType::f32, "scales");
  if (scales.shape() != Shape{g.groups(), N})
    x.bad("scales must be [ceil(K/group_size), N] = [", g.groups(), ", ", N, "], got ", scales.str());
  return g;
}

void sig_q4gsw_requant(Ctx& x) {
  const Tensor &lat = x.in(0), &scales = x.in(1);
  x.out(Shape{requant_geometry(x, lat, scales).words()}, DType::u32);
  x.out(lat.shape(), DType::f32);
  if (!x.inferring && x.c.out.size() > 1 && !x.c.out[1].same_memory(lat))
    x.bad("output 1 must be the latent tensor itself (q4gsw_requant clamps it in place)");
  if (x.inferring) x.bad("output 1 is the latent input (in place); use Graph::q4gsw_requant");
}

void sig_linear_dW(Ctx& x) {
  const Tensor &dy = x.in(0), &a = x.in(1);
  x.dtype(dy, DType::f32, "dy");
  x.dtype(a, DType::f32, "x");
  x.rank_at_least(dy, 1, "dy");
  x.rank_at_least(a, 1, "x");
  if (dy.shape().rows() != a.shape().rows())
    x.bad("dy and x must have the same number of rows M, got ", dy.str(), " and ", a.str());
  x.flag(0, "accumulate");
  x.f16_flag(1);
  x.out(Shape{dy.shape().last(), a.shape().last()}, DType::f32);
}

void sig_fused_ce(Ctx& x) {
  const Tensor &lg = x.in(0), &lab = x.in(1);
  x.dtype(lg, DType::f32, "logits");
  x.rank_is(lg, 2, "logits");
  x.dtype(lab, DType::i32, "labels");
  if (lab.shape() != Shape{lg.shape()[0]}) x.bad("labels must be [R] = [", lg.shape()[0], "], got ", lab.str());
  if (lg.shape()[1] < 1) x.bad("logits must have V >= 1 columns, got ", lg.str());
  x.out(Shape{}, DType::f32);
  x.out(lg.shape(), DType::f32);
}

void sig_logsumexp_rows(Ctx& x) {
  const Tensor& a = x.in(0);
  x.dtype(a, DType::f32, "x");
  x.rank_is(a, 2, "x");
  if (a.shape()[1] < 1) x.bad("x must have V >= 1 columns, got ", a.str());
  x.flag(0, "accumulate");
  x.out(Shape{a.shape()[0]}, DType::f32);
}

void sig_fused_ce_part(Ctx& x) {
  const Tensor &lg = x.in(0), &lab = x.in(1), &lse = x.in(2);
  x.dtype(lg, DType::f32, "logits");
  x.rank_is(lg, 2, "logits");
  const int64_t R = lg.shape()[0], Vp = lg.shape()[1];
  x.dtype(lab, DType::i32, "labels");
  if (lab.shape() != Shape{R}) x.bad("labels must be [R] = [", R, "], got ", lab.str());
  x.dtype(lse, DType::f32, "lse");
  if (lse.shape() != Shape{R}) x.bad("lse must be [R] = [", R, "], got ", lse.str());
  if (Vp < 1) x.bad("logits must have Vp >= 1 columns, got ", lg.str());
  vocab_part(x, Vp, 0, 1);
  x.flag(2, "accumulate");
  x.out(Shape{}, DType::f32);
  x.out(lg.shape(), DType::f32);
}

// adamw_step's tensors (inputs 0..3, updated in place as outputs 0..3) and its optional grad_scale input.
static void adamw_tensors(Ctx& x, size_t grad_scale_input, const char* op) {
  for (size_t i = 0; i < 4; ++i) {
    static const char* names[] = {"param", "m", "v", "grad"};
    x.dtype(x.in(i), DType::f32, names[i]);
    if (x.in(i).numel() != x.in(0).numel())
      x.bad(names[i], " must have as many elements as param ", x.in(0).str(), ", got ", x.in(i).str());
  }
  if (x.c.has_in(grad_scale_input)) {
    x.dtype(x.in(grad_scale_input), DType::f32, "grad_scale");
    if (x.in(grad_scale_input).numel() != 1) x.bad("grad_scale must hold one value, got ", x.in(grad_scale_input).str());
  }
  for (size_t i = 0; i < 4; ++i) {
    x.out(x.in(i).shape(), DType::f32);
    if (!x.inferring && i < x.c.out.size() && !x.c.out[i].same_memory(x.in(i)))
      x.bad("output ", i, " must be the same tensor as input ", i, " (", op, " updates in place)");
  }
}

void sig_adamw_step(Ctx& x) {
  adamw_tensors(x, 4, "adamw_step");
  if (x.inferring) x.bad("outputs are the inputs (in place); use Graph::adamw_step");
}

// latent [N, K] with adamw_step's m, v, grad of its shape; scales and w as q4gsw_requant's.
void sig_adamw_q4gsw_step(Ctx& x) {
  const Tensor &lat = x.in(0), &scales = x.in(4);
  x.rank_is(lat, 2, "latent");
  for (size_t i = 1; i < 4; ++i)
    if (x.in(i).shape() != lat.shape())
      x.bad(i == 1 ? "m" : i == 2 ? "v" : "grad", " must have the latent's shape ", lat.str(), ", got ", x.in(i).str());
  adamw_tensors(x, 5, "adamw_q4gsw_step");
  x.out(Shape{requant_geometry(x, lat, scales).words()}, DType::u32);
  if (x.inferring) x.bad("outputs 0..3 are the inputs (in place); use Graph::adamw_q4gsw_step");
}

// ---- optimizer helpers ----

void sig_grad_norm(Ctx& x) {
  for (const Tensor& t : x.c.in) x.dtype(t, DType::f32, "every input");
  x.out(Shape{}, DType::f32);
}

void sig_clip_coef(Ctx& x) {
  x.dtype(x.in(0), DType::f32, "norm");
  if (x.in(0).numel() != 1) x.bad("norm must hold one element, got ", x.in(0).str());
  x.out(Shape{}, DType::f32);
}

}  // namespace edgetrain::sig
