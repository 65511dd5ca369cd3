// `edgetrain selftest`: runs the six training ops, the fused attention the training step uses (forward and
// backward) and the GEMM they lean on (the matrix products also with fp16 operands), on a backend with random
// data at awkward shapes, and compares every output with the CPU reference. A quick check that a user's
// GPU and driver compute what the spec says; the full per-op suite lives in tests/.
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>

#include "cpu/cpu_backend.h"
#include "edgetrain/backends.h"
#include "edgetrain/graph.h"
#include "edgetrain/q4gsw.h"
#include "tools/commands.h"

namespace edgetrain::cli {
namespace {

std::vector<float> random_floats(std::mt19937& g, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

struct Probe {
  const char* name;
  double tolerance;  // relative to the largest reference magnitude
  // Runs the op on a backend and returns its outputs flattened to floats (codes as floats).
  std::function<std::vector<float>(Backend&)> run;
};

std::vector<Probe> probes() {
  const int64_t M = 37, K = 100, N = 52, gs = 32, V = 1001;
  std::mt19937 g(1234);
  auto x = random_floats(g, M * K, -1, 1), dy = random_floats(g, M * N, -1, 1), lat = random_floats(g, N * K, -0.5f, 0.5f);
  auto logits = random_floats(g, M * V, -4, 4), grad = random_floats(g, N * K, -1, 1);
  const Shape qs{2, 37, 4, 32}, ks{2, 37, 2, 32};  // attention: T = 37 crosses the kernels' row blocks
  auto aq = random_floats(g, qs.numel(), -1, 1), ak = random_floats(g, ks.numel(), -1, 1);
  auto av = random_floats(g, ks.numel(), -1, 1), ado = random_floats(g, qs.numel(), -1, 1);
  q4::Geometry geo(N, K, gs);
  auto q = q4::quantize(geo, lat.data());
  auto words = q4::pack_w4x8(geo, q.codes.data());
  std::vector<int32_t> labels(M);
  for (int64_t i = 0; i < M; ++i) labels[i] = i % 7 == 3 ? -100 : static_cast<int32_t>((i * 37) % V);
  auto as_floats = [](Backend& b, const Tensor& t) {
    if (t.dtype() == DType::f32) return b.to_vector<float>(t);
    auto w = b.to_vector<uint32_t>(t);
    return std::vector<float>(w.begin(), w.end());
  };
  auto concat = [](std::vector<float> a, const std::vector<float>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  // The matrix products in both precisions: fp16 operands (--precision fp16) are compared with the
  // reference of the same fp16 arithmetic, so the limit stays that of fp32 accumulation.
  std::vector<Probe> out;
  for (Precision pr : {Precision::fp32, Precision::fp16}) {
    const bool h = pr == Precision::fp16;
    auto graph = [pr](Backend& b) {
      Graph gr(b);
      gr.set_precision(pr);
      return gr;
    };
    out.push_back({h ? "linear_q4gsw, fp16 operands" : "linear_q4gsw (M=37,K=100,N=52,gs=32)", 1e-5, [=](Backend& b) {
                     Graph gr = graph(b);
                     return as_floats(b, gr.linear_q4gsw(b.from_vector(Shape{M, K}, DType::f32, x),
                                                         b.from_vector(Shape{geo.words()}, DType::u32, words),
                                                         b.from_vector(Shape{geo.groups(), N}, DType::f32, q.scales), gs));
                   }});
    if (!h)
      out.push_back({"linear_q4gsw GEMV (M=1)", 1e-5, [=](Backend& b) {
                       Graph gr(b);
                       std::vector<float> x1(x.begin(), x.begin() + K);
                       return as_floats(b, gr.linear_q4gsw(b.from_vector(Shape{1, K}, DType::f32, x1),
                                                           b.from_vector(Shape{geo.words()}, DType::u32, words),
                                                           b.from_vector(Shape{geo.groups(), N}, DType::f32, q.scales), gs));
                     }});
    out.push_back({h ? "linear_q4gsw_backward, fp16 operands" : "linear_q4gsw_backward", 1e-5, [=](Backend& b) {
                     Graph gr = graph(b);
                     return as_floats(b, gr.linear_q4gsw_backward(b.from_vector(Shape{M, N}, DType::f32, dy),
                                                                  b.from_vector(Shape{geo.words()}, DType::u32, words),
                                                                  b.from_vector(Shape{geo.groups(), N}, DType::f32, q.scales),
                                                                  gs, K));
                   }});
    out.push_back({h ? "linear_dW, fp16 operands" : "linear_dW", 1e-5, [=](Backend& b) {
                     Graph gr = graph(b);
                     return as_floats(b, gr.linear_dW(b.from_vector(Shape{M, N}, DType::f32, dy),
                                                      b.from_vector(Shape{M, K}, DType::f32, x)));
                   }});
    out.push_back({h ? "mm, fp16 operands" : "mm (37x100 @ 100x52)", 1e-5, [=](Backend& b) {
                     Graph gr = graph(b);
                     return as_floats(b, gr.mm(b.from_vector(Shape{M, K}, DType::f32, x),
                                               b.from_vector(Shape{K, N}, DType::f32, grad)));
                   }});
  }
  out.push_back({"fused_ce (R=37,V=1001, ignored rows)", 1e-5, [=](Backend& b) {
                   Graph gr(b);
                   auto [loss, dl] = gr.fused_ce(b.from_vector(Shape{M, V}, DType::f32, logits),
                                                 b.from_vector(Shape{M}, DType::i32, labels), 31.0f);
                   return concat(as_floats(b, loss), as_floats(b, dl));
                 }});
  out.push_back({"q4gsw_requant (bit-exact)", 0.0, [=](Backend& b) {
                   Graph gr(b);
                   Tensor w = b.zeros(Shape{geo.words()}, DType::u32);
                   Tensor latent = b.from_vector(Shape{N, K}, DType::f32, grad);
                   gr.q4gsw_requant(latent, b.from_vector(Shape{geo.groups(), N}, DType::f32, q.scales), gs, w);
                   return concat(as_floats(b, w), as_floats(b, latent));
                 }});
  out.push_back({"adamw_step", 1e-6, [=](Backend& b) {
                   Graph gr(b);
                   Tensor p = b.from_vector(Shape{N, K}, DType::f32, lat), m = b.zeros(Shape{N, K}, DType::f32),
                          v = b.zeros(Shape{N, K}, DType::f32);
                   // A fresh gradient each step (AdamW zeroes the one it takes), the last two scaled.
                   Tensor half = b.from_vector(Shape{}, DType::f32, std::vector<float>{0.5f});
                   for (int t = 1; t <= 3; ++t)
                     gr.adamw_step(p, m, v, b.from_vector(Shape{N, K}, DType::f32, grad), 1e-2f, 0.9f, 0.999f, 1e-8f,
                                   0.1f, 1.0f - std::pow(0.9f, t), 1.0f - std::pow(0.999f, t), t > 1 ? half : Tensor());
                   return concat(concat(as_floats(b, p), as_floats(b, m)), as_floats(b, v));
                 }});
  out.push_back({"attention + backward (B2,T37,H4,KV2,hd32)", 1e-5, [=](Backend& b) {
                   Graph gr(b);
                   Tensor q = b.from_vector(qs, DType::f32, aq), k = b.from_vector(ks, DType::f32, ak);
                   Tensor v = b.from_vector(ks, DType::f32, av), dout = b.from_vector(qs, DType::f32, ado);
                   auto [o, lse] = gr.attention(q, k, v, 0.2f);
                   auto [dq, dk, dv] = gr.attention_backward(dout, q, k, v, o, lse, 0.2f);
                   return concat(concat(concat(as_floats(b, o), as_floats(b, lse)),
                                        concat(as_floats(b, dq), as_floats(b, dk))),
                                 as_floats(b, dv));
                 }});
  return out;
}

}  // namespace

Runner add_selftest(CLI::App& app) {
  auto* sub = app.add_subcommand("selftest", "Check the training kernels of a backend against the CPU reference");
  auto backend = std::make_shared<std::string>("auto");
  sub->add_option("--backend", *backend, "auto, cpu, vulkan or webgpu")->capture_default_str();
  return [backend] {
    auto b = make_backend(*backend);
    auto ref = std::make_unique<cpu::CpuBackend>(BackendOptions{});
    ref->set_reference_only(true);
    std::printf("selftest on %s (%s)\n", b->name().c_str(), b->device_name().c_str());
    int failed = 0, skipped = 0;
    for (const Probe& p : probes()) {
      std::vector<float> got, want = p.run(*ref);
      try {
        got = p.run(*b);
      } catch (const Error& e) {
        std::printf("  SKIP %-40s %s\n", p.name, e.what());
        ++skipped;
        continue;
      }
      double scale = 0, worst = 0;
      for (float w : want) scale = std::max(scale, std::fabs(static_cast<double>(w)));
      bool ok = got.size() == want.size();
      for (size_t i = 0; ok && i < got.size(); ++i) {
        if (std::isnan(want[i]) != std::isnan(got[i])) ok = false;
        else if (!std::isnan(want[i])) worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
      }
      double rel = scale > 0 ? worst / scale : worst;
      ok = ok && rel <= p.tolerance;
      std::printf("  %s %-40s max error %.2e (relative to max |ref|, limit %.0e)\n", ok ? "ok  " : "FAIL", p.name, rel,
                  p.tolerance);
      failed += !ok;
    }
    std::printf("%d passed, %d failed, %d skipped\n", static_cast<int>(probes().size()) - failed - skipped, failed, skipped);
    return failed ? 1 : 0;
  };
}

}  // namespace edgetrain::cli
