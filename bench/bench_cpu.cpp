// Benchmark of the CPU backend's fast kernels against the reference on the training step's heavy ops:
// mm, linear_dW, linear_q4gsw (prefill M=512 and decode M=1), linear_q4gsw_backward, fused_ce and adamw.
// Each op is recorded once into a program and replayed; the median replay time gives GFLOP/s or GB/s.
// Usage: edgetrain_bench_cpu [--threads N] [--reps N] [--no-ref]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cpu/cpu_backend.h"
#include "edgetrain/q4gsw.h"

using namespace edgetrain;

namespace {

std::mt19937 g_rng(1234);

Tensor random_tensor(Backend& b, Shape s, float lo, float hi) {
  std::vector<float> v(static_cast<size_t>(s.numel()));
  std::uniform_real_distribution<float> d(lo, hi);
  for (float& x : v) x = d(g_rng);
  return b.from_vector(s, DType::f32, v);
}

struct Q4 {
  Tensor w, scales;
};
Q4 random_q4(Backend& b, int64_t N, int64_t K, int64_t gs) {
  q4::Geometry g(N, K, gs);
  std::vector<uint8_t> codes(static_cast<size_t>(N * K));
  std::uniform_int_distribution<int> d(0, 15);
  for (auto& c : codes) c = static_cast<uint8_t>(d(g_rng));
  auto words = q4::pack_w4x8(g, codes.data());
  return {b.from_vector(Shape{g.words()}, DType::u32, words), random_tensor(b, Shape{g.groups(), N}, 0.01f, 0.1f)};
}

// Median seconds of one replay of the call (after one warm-up replay).
double time_call(Backend& b, const OpCall& call, int reps) {
  auto prog = b.new_program();
  prog->record(call);
  prog->finalize();
  prog->replay();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    prog->replay();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Bench {
  std::string name;
  double work;       // flops, or bytes moved
  const char* unit;  // "GFLOP/s" or "GB/s"
  std::function<OpCall(Backend&)> make;
};

}  // namespace

int main(int argc, char** argv) {
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency())), reps = 10;
  bool with_ref = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--no-ref") with_ref = false;
    else {
      std::printf("usage: %s [--threads N] [--reps N] [--no-ref]\n", argv[0]);
      return a == "--help" ? 0 : 2;
    }
  }
  cpu::CpuBackend fast(BackendOptions{threads, "", false, false});
  cpu::CpuBackend ref(BackendOptions{threads, "", false, false});
  ref.set_reference_only(true);
  cpu::set_threads(threads);  // both constructors set the shared pool; make the choice explicit
  std::printf("edgetrain CPU kernels: %s, %d thread(s), median of %d replays\n", fast.device_name().c_str(), threads,
              reps);

  const int64_t S = 512;
  std::vector<Bench> benches = {
      {"mm 512x512x512", 2.0 * S * S * S, "GFLOP/s",
       [&](Backend& b) {
         Tensor a = random_tensor(b, Shape{S, S}, -1, 1), c = random_tensor(b, Shape{S, S}, -1, 1);
         return OpCall{Op::mm, {a, c}, {b.zeros(Shape{S, S}, DType::f32)}, {0, 0}, {1.0f}};
       }},
      {"linear_dW M=N=K=512", 2.0 * S * S * S, "GFLOP/s",
       [&](Backend& b) {
         Tensor dy = random_tensor(b, Shape{S, S}, -1, 1), x = random_tensor(b, Shape{S, S}, -1, 1);
         return OpCall{Op::linear_dW, {dy, x}, {b.zeros(Shape{S, S}, DType::f32)}, {0}, {}};
       }},
      {"linear_q4gsw M=N=K=512 gs32", 2.0 * S * S * S, "GFLOP/s",
       [&](Backend& b) {
         Q4 q = random_q4(b, S, S, 32);
         return OpCall{Op::linear_q4gsw, {random_tensor(b, Shape{S, S}, -1, 1), q.w, q.scales}, {b.zeros(Shape{S, S}, DType::f32)},
                       {32}, {}};
       }},
      {"linear_q4gsw M=1 N=K=512 gs32", 2.0 * S * S, "GFLOP/s",
       [&](Backend& b) {
         Q4 q = random_q4(b, S, S, 32);
         return OpCall{Op::linear_q4gsw, {random_tensor(b, Shape{1, S}, -1, 1), q.w, q.scales}, {b.zeros(Shape{1, S}, DType::f32)},
                       {32}, {}};
       }},
      {"linear_q4gsw_backward M=N=K=512", 2.0 * S * S * S, "GFLOP/s",
       [&](Backend& b) {
         Q4 q = random_q4(b, S, S, 32);
         return OpCall{Op::linear_q4gsw_backward, {random_tensor(b, Shape{S, S}, -1, 1), q.w, q.scales},
                       {b.zeros(Shape{S, S}, DType::f32)}, {32, S}, {}};
       }},
      {"fused_ce R=512 V=8192 (in place)", 2.0 * 4 * 512 * 8192, "GB/s",
       [&](Backend& b) {
         Tensor lg = random_tensor(b, Shape{512, 8192}, -6, 6);
         std::vector<int32_t> lab(512);
         for (size_t i = 0; i < lab.size(); ++i) lab[i] = static_cast<int32_t>((i * 7919) % 8192);
         return OpCall{Op::fused_ce, {lg, b.from_vector(Shape{512}, DType::i32, lab)}, {b.zeros(Shape{}, DType::f32), lg},
                       {}, {512.0f}};
       }},
      {"adamw_step 4M params", 8.0 * 4 * (4 << 20), "GB/s",
       [&](Backend& b) {
         const Shape s{4 << 20};
         Tensor p = random_tensor(b, s, -1, 1), m = random_tensor(b, s, -0.1f, 0.1f), v = random_tensor(b, s, 0, 0.01f),
                g = random_tensor(b, s, -1, 1);
         return OpCall{Op::adamw_step, {p, m, v, g}, {p, m, v, g}, {}, {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.1f, 0.05f}};
       }},
  };

  std::printf("%-36s %12s %12s %12s %12s %9s\n", "op", "fast ms", "fast rate", "ref ms", "ref rate", "speedup");
  for (const Bench& bm : benches) {
    double tf = time_call(fast, bm.make(fast), reps);
    double rf = bm.work / tf * 1e-9;
    std::printf("%-36s %12.3f %8.2f %-3s", bm.name.c_str(), tf * 1e3, rf, bm.unit[1] == 'F' ? "GF" : "GB");
    if (with_ref) {
      double tr = time_call(ref, bm.make(ref), std::min(reps, 2));
      std::printf(" %12.3f %8.3f %-3s %8.1fx", tr * 1e3, bm.work / tr * 1e-9, bm.unit[1] == 'F' ? "GF" : "GB", tr / tf);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  std::printf("(rates: GF = GFLOP/s (2*M*N*K), GB = GB/s of fp32 traffic: fused_ce reads+writes R*V, adamw 7 arrays)\n");
  return 0;
}
