// The benchmark cases of `edgetrain bench`: for each op of the catalogue it times, the shapes (small ones
// for the CPU, realistic ones for GPUs), how its work is counted, and how to build one call on random data.
#include "tools/bench_cases.h"

#include <cmath>

#include "edgetrain/q4gsw.h"

namespace edgetrain::cli {
namespace {

// ---- random data ----

Tensor random_f32(Backend& b, Shape s, Rng& r, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(static_cast<size_t>(s.numel()));
  for (float& x : v) x = r.uniform(lo, hi);
  return b.from_vector(s, DType::f32, v);
}

Tensor random_labels(Backend& b, int64_t n, int64_t vocab, Rng& r) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<int32_t>(r.next() % static_cast<uint64_t>(vocab));
  return b.from_vector(Shape{n}, DType::i32, v);
}

struct Q4 {
  Tensor w, scales;
};
Q4 random_q4(Backend& b, int64_t N, int64_t K, int64_t gs, Rng& r) {
  q4::Geometry g(N, K, gs);
  std::vector<uint8_t> codes(static_cast<size_t>(N * K));
  for (auto& c : codes) c = static_cast<uint8_t>(r.next() & 15);
  auto words = q4::pack_w4x8(g, codes.data());
  return {b.from_vector(Shape{g.words()}, DType::u32, words), random_f32(b, Shape{g.groups(), N}, r, 0.01f, 0.1f)};
}

// One call whose outputs are allocated from the catalogue's shape rules unless given.
OpCall make_call(Backend& b, Op op, std::vector<Tensor> in, std::vector<int64_t> ints = {},
                 std::vector<Scalar> floats = {}, std::vector<Tensor> out = {}) {
  if (out.empty())
    for (const OutSpec& s : infer_outputs(op, in, ints)) out.push_back(b.zeros(s.shape, s.dtype));
  return OpCall{op, std::move(in), std::move(out), std::move(ints), std::move(floats)};
}

// ---- the cases ----




Case mm_case(int64_t M, int64_t N, int64_t K) {
  return {Op::mm, dims({{"M", M}, {"N", N}, {"K", K}}), "GFLOP/s", 2.0 * M * N * K, "2*M*N*K flop; out[M,N] = a[M,K] @ b[K,N]",
          [=](Backend& b, Rng& r) {
            return make_call(b, Op::mm, {random_f32(b, Shape{M, K}, r), random_f32(b, Shape{K, N}, r)}, {0, 0}, {1.0f});
          }};
}

Case dw_case(int64_t M, int64_t N, int64_t K) {
  return {Op::linear_dW, dims({{"M", M}, {"N", N}, {"K", K}}), "GFLOP/s", 2.0 * M * N * K,
          "2*M*N*K flop; dw[N,K] = dy[M,N]^T @ x[M,K], accumulate=0", [=](Backend& b, Rng& r) {
            return make_call(b, Op::linear_dW, {random_f32(b, Shape{M, N}, r), random_f32(b, Shape{M, K}, r)}, {0});
          }};
}

Case q4_case(int64_t M, int64_t N, int64_t K, int64_t gs) {
  q4::Geometry g(N, K, gs);
  Case c{Op::linear_q4gsw, dims({{"M", M}, {"N", N}, {"K", K}, {"gs", gs}}), "GFLOP/s", 2.0 * M * N * K,
         "2*M*N*K flop; y[M,N] = x[M,K] @ W^T, W 4-bit", [=](Backend& b, Rng& r) {
           Q4 q = random_q4(b, N, K, gs, r);
           return make_call(b, Op::linear_q4gsw, {random_f32(b, Shape{M, K}, r), q.w, q.scales}, {gs});
         }};
  if (M == 1) {  // GEMV: memory-bound, count bytes
    c.unit = "GB/s";
    c.work = 0.5 * N * K + 4.0 * g.groups() * N + 4.0 * K + 4.0 * N;
    c.model = "bytes = N*K/2 (codes) + 4*G*N (scales) + 4*K (x) + 4*N (y)";
  }
  return c;
}

Case q4_backward_case(int64_t M, int64_t N, int64_t K, int64_t gs) {
  return {Op::linear_q4gsw_backward, dims({{"M", M}, {"N", N}, {"K", K}, {"gs", gs}}), "GFLOP/s", 2.0 * M * N * K,
          "2*M*N*K flop; dx[M,K] = dy[M,N] @ W, W 4-bit", [=](Backend& b, Rng& r) {
            Q4 q = random_q4(b, N, K, gs, r);
            return make_call(b, Op::linear_q4gsw_backward, {random_f32(b, Shape{M, N}, r), q.w, q.scales}, {gs, K});
          }};
}

Case requant_case(int64_t N, int64_t K, int64_t gs) {
  q4::Geometry g(N, K, gs);
  return {Op::q4gsw_requant, dims({{"N", N}, {"K", K}, {"gs", gs}}), "GB/s",
          4.0 * N * K + 4.0 * g.groups() * N + 0.5 * N * K,
          "bytes = 4*N*K (read latent; written back only where clamped, which after the first repetition is "
          "nowhere) + 4*G*N (scales) + N*K/2 (write codes)", [=](Backend& b, Rng& r) {
            Tensor scales = random_f32(b, Shape{g.groups(), N}, r, 0.01f, 0.1f);
            Tensor w = b.zeros(Shape{g.words()}, DType::u32);
            Tensor latent = random_f32(b, Shape{N, K}, r, -0.5f, 0.5f);
            return make_call(b, Op::q4gsw_requant, {latent, scales}, {gs}, {}, {w, latent});
          }};
}

Case ce_case(int64_t R, int64_t V) {
  return {Op::fused_ce, dims({{"R", R}, {"V", V}}), "GB/s", 8.0 * R * V,
          "bytes = 8 per logit (read logits, write dlogits in place; labels and loss ignored)",
          [=](Backend& b, Rng& r) {
            Tensor logits = random_f32(b, Shape{R, V}, r, -4.0f, 4.0f);
            Tensor labels = random_labels(b, R, V, r);
            return make_call(b, Op::fused_ce, {logits, labels}, {}, {static_cast<float>(R)},
                             {b.zeros(Shape{}, DType::f32), logits});
          }};
}

Case adamw_case(int64_t P) {
  return {Op::adamw_step, dims({{"P", P}}), "GB/s", 32.0 * P, "bytes = 32 per param (read p,m,v,g; write p,m,v and g = 0)",
          [=](Backend& b, Rng& r) {
            Tensor p = random_f32(b, Shape{P}, r), g = random_f32(b, Shape{P}, r, -1e-2f, 1e-2f);
            Tensor m = b.zeros(Shape{P}, DType::f32), v = b.zeros(Shape{P}, DType::f32);
            std::vector<Scalar> f = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.1f, 0.05f};
            return make_call(b, Op::adamw_step, {p, m, v, g}, {}, f, {p, m, v, g});
          }};
}

Case rms_case(int64_t R, int64_t D) {
  return {Op::rms_norm, dims({{"R", R}, {"D", D}}), "GB/s", 8.0 * R * D + 4.0 * D + 4.0 * R,
          "bytes = 8 per element (read x, write y) + 4*D (w) + 4*R (rstd)", [=](Backend& b, Rng& r) {
            return make_call(b, Op::rms_norm, {random_f32(b, Shape{R, D}, r), random_f32(b, Shape{D}, r)}, {}, {1e-5f});
          }};
}

Case softmax_case(int64_t R, int64_t D) {
  return {Op::softmax, dims({{"R", R}, {"D", D}}), "GB/s", 8.0 * R * D, "bytes = 8 per element (read x, write out)",
          [=](Backend& b, Rng& r) { return make_call(b, Op::softmax, {random_f32(b, Shape{R, D}, r, -4, 4)}, {-1}); }};
}

Case causal_case(int64_t B, int64_t H, int64_t T) {
  return {Op::causal_softmax, dims({{"B", B}, {"H", H}, {"T", T}, {"S", T}}), "GB/s", 8.0 * B * H * T * T,
          "bytes = 8 per element of [B,H,T,S] (read x, write out, masked entries included)", [=](Backend& b, Rng& r) {
            float scale = 1.0f / std::sqrt(64.0f);
            return make_call(b, Op::causal_softmax, {random_f32(b, Shape{B, H, T, T}, r, -4, 4)}, {}, {scale});
          }};
}

// Causal attention of B sequences of T tokens with H heads of hd (multi-head), the model's layouts. Work:
// the products over the T(T+1)/2 visible (query, key) pairs of a head, 2 for the forward (q.k, p*v) and 5
// for the backward (q.k and dout.v recomputed, dv, dq, dk) of 2*hd flop each: the count PyTorch and the
// flash-attention papers use, whatever a kernel recomputes.
double attention_pairs(int64_t B, int64_t H, int64_t T) { return static_cast<double>(B) * H * T * (T + 1) / 2.0; }

Case attention_case(int64_t B, int64_t H, int64_t T, int64_t hd) {
  return {Op::attention, dims({{"B", B}, {"H", H}, {"T", T}, {"D", hd}}), "GFLOP/s", 4.0 * hd * attention_pairs(B, H, T),
          "4*hd flop per visible (query, key) pair, T(T+1)/2 pairs per head; q,k,v [B,T,H,hd] -> out, lse",
          [=](Backend& b, Rng& r) {
            Shape s{B, T, H, hd};
            return make_call(b, Op::attention, {random_f32(b, s, r), random_f32(b, s, r), random_f32(b, s, r)}, {},
                             {1.0f / std::sqrt(static_cast<float>(hd))});
          }};
}

Case attention_backward_case(int64_t B, int64_t H, int64_t T, int64_t hd) {
  return {Op::attention_backward, dims({{"B", B}, {"H", H}, {"T", T}, {"D", hd}}), "GFLOP/s",
          10.0 * hd * attention_pairs(B, H, T),
          "10*hd flop per visible (query, key) pair (5 products), T(T+1)/2 pairs per head; out and lse from the forward",
          [=](Backend& b, Rng& r) {
            Shape s{B, T, H, hd};
            const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
            Tensor q = random_f32(b, s, r), k = random_f32(b, s, r), v = random_f32(b, s, r);
            Graph g(b);
            auto [out, lse] = g.attention(q, k, v, scale);
            return make_call(b, Op::attention_backward, {random_f32(b, s, r), q, k, v, out, lse}, {}, {scale});
          }};
}

Case silu_case(int64_t R, int64_t D) {
  return {Op::silu_mul, dims({{"R", R}, {"D", D}}), "GB/s", 12.0 * R * D, "bytes = 12 per element (read g,u; write h)",
          [=](Backend& b, Rng& r) {
            return make_call(b, Op::silu_mul, {random_f32(b, Shape{R, D}, r), random_f32(b, Shape{R, D}, r)});
          }};
}

Case rope_case(int64_t B, int64_t T, int64_t H, int64_t D) {
  return {Op::rope, dims({{"B", B}, {"T", T}, {"H", H}, {"D", D}}), "GB/s", 8.0 * B * T * H * D,
          "bytes = 8 per element (read x, write y)", [=](Backend& b, Rng& r) {
            return make_call(b, Op::rope, {random_f32(b, Shape{B, T, H, D}, r)}, {}, {10000.0f, 0.0f});
          }};
}

Case copy_case(int64_t N) {
  return {Op::dim_order_copy, dims({{"N", N}}), "GB/s", 8.0 * N, "bytes = 8 per element (read x, write out); op dim_order_copy f32->f32",
          [=](Backend& b, Rng& r) {
            Tensor x = random_f32(b, Shape{N}, r);
            return make_call(b, Op::dim_order_copy, {x}, {}, {}, {b.zeros(Shape{N}, DType::f32)});
          },
          "copy"};
}

}  // namespace

// Realistic: the 4096^3 class of products, the base step's own weight gradients (8192 tokens; dW
// [768, 768] and [768, 2048], the deep products with few output tiles), a rank-16 LoRA's products at
// the 1B shape (4096 tokens, width 2048: x A^T, t B^T, and the adapters' gradients; dt = dy B over the
// MLP's 8192), and the steps' 4-bit products and attention (below).
std::vector<Case> bench_cases(bool small) {
  if (small)
    return {mm_case(512, 512, 512),          dw_case(512, 256, 256),   dw_case(512, 512, 512),
            q4_case(512, 512, 512, 64),      q4_case(1, 512, 512, 64), q4_case(1, 384, 512, 64),
            q4_backward_case(512, 512, 512, 64), requant_case(512, 512, 64), ce_case(512, 512),
            adamw_case(int64_t{1} << 18),    rms_case(512, 512),       softmax_case(512, 512),
            causal_case(2, 4, 64),           silu_case(512, 512),      rope_case(2, 64, 4, 64),
            copy_case(int64_t{1} << 18),     attention_case(4, 4, 128, 32), attention_backward_case(4, 4, 128, 32)};
  return {mm_case(4096, 4096, 4096),          mm_case(8192, 8192, 8192),       dw_case(4096, 2048, 2048),
          dw_case(4096, 4096, 4096),          dw_case(8192, 2048, 2048),       dw_case(8192, 768, 768),
          dw_case(8192, 768, 2048),           mm_case(4096, 16, 2048),         mm_case(4096, 16, 8192),
          mm_case(4096, 2048, 16),            dw_case(4096, 16, 2048),         dw_case(4096, 2048, 16),
          q4_case(4096, 4096, 4096, 64),
          q4_case(1, 4096, 4096, 64),         q4_case(1, 11008, 4096, 64),     q4_backward_case(4096, 4096, 4096, 64),
          requant_case(4096, 4096, 64),       ce_case(8192, 32000),            adamw_case(int64_t{1} << 28),
          rms_case(8192, 4096),               softmax_case(8192, 4096),        causal_case(16, 12, 512),
          silu_case(8192, 11008),             rope_case(16, 512, 32, 128),     copy_case(int64_t{1} << 28),
          attention_case(16, 12, 512, 64),    attention_backward_case(16, 12, 512, 64),
          // The training steps' own 4-bit products (group size 32) and attention: the base preset (8192
          // tokens; q/k/v/o 768 -> 768, gate/up 768 -> 2048, down 2048 -> 768) and the Llama-3.2-1B shape
          // (4096 tokens; gate/up 2048 -> 8192, down 8192 -> 2048; 32 heads of 64 over 1024 tokens, here
          // without the model's grouped key/value heads).
          q4_case(8192, 768, 768, 32),        q4_case(8192, 2048, 768, 32),    q4_case(8192, 768, 2048, 32),
          q4_backward_case(8192, 2048, 768, 32), q4_backward_case(8192, 768, 2048, 32),
          q4_case(4096, 8192, 2048, 32),      q4_case(4096, 2048, 8192, 32),
          q4_backward_case(4096, 8192, 2048, 32), q4_backward_case(4096, 2048, 8192, 32),
          attention_case(4, 32, 1024, 64),    attention_backward_case(4, 32, 1024, 64)};
}

std::string dims(std::initializer_list<std::pair<const char*, int64_t>> d) {
  std::string s;
  for (auto& [k, v] : d) {
    if (!s.empty()) s += '_';
    s += k;
    s += std::to_string(v);
  }
  return s;
}

}  // namespace edgetrain::cli
