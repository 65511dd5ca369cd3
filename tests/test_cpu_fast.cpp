// The CPU backend's fast kernels against the reference at realistic and awkward shapes (bigger than the
// shared op cases: tiles, K/N chunking, GEMV paths, special values), and the same results for 1, 2 and 3
// worker threads, byte for byte (every fast kernel uses fixed tiles and fixed reduction orders) — on each
// instruction-set path the machine has: the AVX-512 kernels where the CPU supports them, and the portable
// ones (which every CPU runs, so they are checked on AVX-512 machines too).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <limits>
#include <thread>

#include <unistd.h>

#include "cpu/cpu_backend.h"
#include "cpu/isa.h"
#include "cpu/threads.h"
#include "edgetrain/q4gsw.h"
#include "harness/op_case.h"

namespace edgetrain::test {
namespace {

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// The fast CPU backend at a given worker count (the pool size is process-wide, so set it per run).
std::vector<HostTensor> run_fast(const OpCase& c, int threads) {
  static cpu::CpuBackend backend(BackendOptions{1, "", false, false});
  cpu::set_threads(threads);
  auto out = run_on(backend, c);
  cpu::set_threads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  return out;
}

bool same_bytes(const HostTensor& a, const HostTensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// The instruction-set paths to check: AVX-512 first where the CPU has it, then the portable kernels.
std::vector<bool> isa_paths() {
  cpu::set_avx512(true);
  std::vector<bool> paths;
  if (cpu::use_avx512()) paths.push_back(true);
  paths.push_back(false);
  return paths;
}

// On each path: fast vs reference within c.tol, then thread counts 1, 2, 3 byte-identical.
void check(const OpCase& c) {
  auto want = run_reference(c);
  for (bool avx512 : isa_paths()) {
    SCOPED_TRACE(std::string(op_name(c.op)) + "/" + c.name + (avx512 ? " (AVX-512)" : " (portable)"));
    cpu::set_avx512(avx512);
    auto got1 = run_fast(c, 1);
    ASSERT_EQ(got1.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      std::string diff = compare(got1[i], want[i], c.tol);
      EXPECT_TRUE(diff.empty()) << "output " << i << ":\n" << diff;
    }
    for (int t : {2, 3}) {
      auto got = run_fast(c, t);
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_TRUE(same_bytes(got[i], got1[i])) << "output " << i << " differs between 1 and " << t << " threads";
    }
  }
  cpu::set_avx512(true);
}

OpCase make(Op op, std::string name, std::vector<HostTensor> in, std::vector<HostTensor> out,
            std::vector<int64_t> ints, std::vector<float> floats, Tolerance t) {
  OpCase c;
  c.op = op;
  c.name = std::move(name);
  c.in = std::move(in);
  c.out = std::move(out);
  c.ints = std::move(ints);
  c.floats = std::move(floats);
  c.tol = t;
  return c;
}

HostTensor f32z(Shape s) { return zeros(s, DType::f32); }

// ---- 4-bit linears ----

struct Q4Shape {
  int64_t M, K, N, gs;
  bool bias;
};
const std::vector<Q4Shape> kQ4Shapes = {
    {256, 512, 768, 32, true}, {256, 512, 768, 64, false}, {256, 512, 768, 128, true},  // realistic
    {1, 512, 768, 32, true},   {1, 512, 768, 128, false},  {1, 37, 13, 4, true},        // GEMV
    {7, 101, 27, 8, true},     {2, 30, 9, 12, false},      {65, 64, 129, 64, true},     // odd shapes
    {5, 2100, 70, 128, true},  {3, 70, 1100, 32, false},                                // K / N chunking
    {2048, 128, 384, 32, true}, {2048, 384, 128, 32, false},                            // the mini step
    {5, 2100, 200, 64, true},  {3, 200, 2100, 8, false},  // AVX-512: several column blocks of W
};

std::string q4_name(const Q4Shape& s) {
  return "M" + std::to_string(s.M) + "_K" + std::to_string(s.K) + "_N" + std::to_string(s.N) + "_gs" +
         std::to_string(s.gs);
}

TEST(CpuFast, LinearQ4gsw) {
  Rng r(11);
  for (const Q4Shape& s : kQ4Shapes) {
    Q4Weight q = random_q4(r, s.N, s.K, s.gs, s.M == 7);
    OpCase c = make(Op::linear_q4gsw, q4_name(s), {random_f32(r, Shape{s.M, s.K}), q.w, q.scales, random_f32(r, Shape{s.N})},
                    {f32z(Shape{s.M, s.N})}, {s.gs}, {}, tol::reduction(s.K));
    if (!s.bias) c.in_absent = {false, false, false, true};
    check(c);
  }
}

TEST(CpuFast, LinearQ4gswBackward) {
  Rng r(12);
  for (const Q4Shape& s : kQ4Shapes) {
    Q4Weight q = random_q4(r, s.N, s.K, s.gs, s.M == 7);
    check(make(Op::linear_q4gsw_backward, q4_name(s), {random_f32(r, Shape{s.M, s.N}), q.w, q.scales},
               {f32z(Shape{s.M, s.K})}, {s.gs, s.K}, {}, tol::reduction(s.N)));
  }
}

TEST(CpuFast, Requant) {
  Rng r(13);
  struct S {
    int64_t N, K, gs;
  };
  for (S s : {S{768, 512, 64}, S{13, 37, 4}, S{64, 96, 32}, S{9, 130, 128}}) {
    q4::Geometry g(s.N, s.K, s.gs);
    HostTensor lat = random_f32(r, Shape{s.N, s.K}, -0.8f, 0.8f);
    HostTensor sc = random_f32(r, Shape{g.groups(), s.N}, 0.01f, 0.1f);
    sc.as<float>()[0] = 0.0f;                  // a zero scale
    lat.as<float>()[1] = kNaN;                 // NaN latent
    lat.as<float>()[2] = sc.as<float>()[2] * 2.5f;  // a tie
    OpCase c = make(Op::q4gsw_requant, "N" + std::to_string(s.N) + "_K" + std::to_string(s.K), {lat, sc},
                    {zeros(Shape{g.words()}, DType::u32), zeros(lat.shape(), DType::f32)}, {s.gs}, {}, tol::exact);
    c.out_alias = {-1, 0};  // the latent, clamped in place (about half of these latents are out of range)
    check(c);
  }
}

// ---- dense products ----

TEST(CpuFast, MmAllTransposes) {
  Rng r(14);
  struct S {
    int64_t M, N, K;
  };
  for (S s : {S{200, 150, 70}, S{3, 5, 2}, S{1, 300, 257}, S{130, 1, 33}, S{4, 3, 0}})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        Shape sa = ta ? Shape{s.K, s.M} : Shape{s.M, s.K}, sb = tb ? Shape{s.N, s.K} : Shape{s.K, s.N};
        check(make(Op::mm, "M" + std::to_string(s.M) + "_N" + std::to_string(s.N) + "_K" + std::to_string(s.K) + "_t" +
                               std::to_string(ta) + std::to_string(tb),
                   {random_f32(r, sa), random_f32(r, sb)}, {f32z(Shape{s.M, s.N})}, {ta, tb}, {0.5f},
                   tol::reduction(s.K)));
      }
}

TEST(CpuFast, Bmm) {
  Rng r(15);
  // Attention-like (many small products) and two large ones (tiled one after another).
  check(make(Op::bmm, "b6_33x17x20", {random_f32(r, Shape{6, 33, 17}), random_f32(r, Shape{6, 20, 17})},
             {f32z(Shape{6, 33, 20})}, {0, 1}, {0.125f}, tol::reduction(17)));
  check(make(Op::bmm, "b2x4_64x32x64_ta", {random_f32(r, Shape{2, 4, 32, 64}), random_f32(r, Shape{2, 4, 32, 64})},
             {f32z(Shape{2, 4, 64, 64})}, {1, 0}, {1.0f}, tol::reduction(32)));
  check(make(Op::bmm, "b2_300x280x260", {random_f32(r, Shape{2, 300, 260}), random_f32(r, Shape{2, 260, 280})},
             {f32z(Shape{2, 300, 280})}, {0, 0}, {2.0f}, tol::reduction(260)));
}

TEST(CpuFast, LinearAndDw) {
  Rng r(16);
  for (bool bias : {true, false}) {
    OpCase c = make(Op::linear, bias ? "bias" : "nobias", {random_f32(r, Shape{2, 65, 70}), random_f32(r, Shape{90, 70}),
                    random_f32(r, Shape{90})}, {f32z(Shape{2, 65, 90})}, {}, {}, tol::reduction(70));
    if (!bias) c.in_absent = {false, false, true};
    check(c);
  }
  for (int acc : {0, 1}) {
    check(make(Op::linear_dW, "M300_N200_K130_acc" + std::to_string(acc),
               {random_f32(r, Shape{300, 200}), random_f32(r, Shape{300, 130})}, {random_f32(r, Shape{200, 130})}, {acc}, {},
               tol::reduction(301)));
    check(make(Op::linear_dW, "M2048_N128_K384_acc" + std::to_string(acc),  // the mini step's down projection
               {random_f32(r, Shape{16, 128, 128}), random_f32(r, Shape{16, 128, 384})}, {random_f32(r, Shape{128, 384})},
               {acc}, {}, tol::reduction(2049)));
    check(make(Op::linear_dW, "M512_N64_K1024_acc" + std::to_string(acc),
               {random_f32(r, Shape{4, 128, 64}), random_f32(r, Shape{4, 128, 1024})}, {random_f32(r, Shape{64, 1024})},
               {acc}, {}, tol::reduction(513)));
  }
}

// ---- fused cross-entropy and the optimizer ----

TEST(CpuFast, FusedCe) {
  Rng r(17);
  {  // the benchmark shape, some rows ignored
    HostTensor labels = random_i32(r, Shape{512}, 0, 8191);
    for (int i = 0; i < 512; i += 37) labels.as<int32_t>()[i] = -100;
    check(make(Op::fused_ce, "R512_V8192", {random_f32(r, Shape{512, 8192}, -6, 6), labels},
               {f32z(Shape{}), f32z(Shape{512, 8192})}, {}, {480.0f}, tol::cross_entropy(512, 8192)));
  }
  // Special rows: NaN, +inf, all -inf, some -inf, huge logits, label out of range, ignored; in place.
  const int64_t R = 10, V = 3001;
  HostTensor lg = random_f32(r, Shape{R, V}, -10, 10);
  float* x = lg.as<float>();
  x[0 * V + 5] = kNaN;
  x[1 * V + 7] = kInf;
  for (int64_t j = 0; j < V; ++j) x[2 * V + j] = -kInf;
  for (int64_t j = 0; j < V; j += 3) x[3 * V + j] = -kInf;
  for (int64_t j = 0; j < V; ++j) x[4 * V + j] += 1000.0f;
  HostTensor labels = HostTensor::from(Shape{R}, DType::i32, std::vector<int32_t>{1, 2, 3, 4, 5, 3001, -1, 8, 3000, 0});
  OpCase c = make(Op::fused_ce, "special_rows", {lg, labels}, {f32z(Shape{}), f32z(Shape{R, V})}, {}, {8.0f}, tol::cross_entropy(R, V));
  check(c);
  c.name = "special_rows_in_place";
  c.out_alias = {-1, 0};
  check(c);
  // Without the poisoned rows the loss is finite and must match too.
  HostTensor lab2 = HostTensor::from(Shape{R}, DType::i32, std::vector<int32_t>{-1, -1, -1, 4, 5, 17, -1, 8, 3000, 0});
  c = make(Op::fused_ce, "finite_rows_in_place", {lg, lab2}, {f32z(Shape{}), f32z(Shape{R, V})}, {}, {6.0f}, tol::cross_entropy(R, V));
  c.out_alias = {-1, 0};
  check(c);
}

TEST(CpuFast, AdamwBitIdentical) {
  Rng r(18);
  const Shape s{100003};
  HostTensor scale(Shape{}, DType::f32);
  scale.as<float>()[0] = 0.37f;
  for (bool scaled : {false, true}) {
    std::vector<HostTensor> in = {random_f32(r, s), random_f32(r, s, -0.1f, 0.1f), random_f32(r, s, 0, 0.01f),
                                  random_f32(r, s)};
    if (scaled) in.push_back(scale);
    OpCase c = make(Op::adamw_step, scaled ? "n100003_scaled" : "n100003", in, {f32z(s), f32z(s), f32z(s), f32z(s)}, {},
                    {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.271f, 0.0975f}, tol::exact);
    c.out_alias = {0, 1, 2, 3};
    check(c);
  }
}

// The fused update of a 4-bit weight, bit for bit, on shapes whose 8-row blocks spread over the threads.
TEST(CpuFast, AdamwQ4gswStepBitIdentical) {
  Rng r(23);
  HostTensor scale(Shape{}, DType::f32);
  scale.as<float>()[0] = 0.37f;
  struct S {
    int64_t N, K, gs;
  };
  for (S sh : {S{768, 512, 64}, S{13, 37, 4}, S{129, 130, 128}})
    for (bool scaled : {false, true}) {
      const Shape s{sh.N, sh.K};
      q4::Geometry g(sh.N, sh.K, sh.gs);
      std::vector<HostTensor> in = {random_f32(r, s, -0.8f, 0.8f), random_f32(r, s, -0.1f, 0.1f),
                                    random_f32(r, s, 0, 0.01f), random_f32(r, s),
                                    random_f32(r, Shape{g.groups(), sh.N}, 0.01f, 0.1f)};
      if (scaled) in.push_back(scale);
      OpCase c = make(Op::adamw_q4gsw_step, "N" + std::to_string(sh.N) + "_K" + std::to_string(sh.K) + (scaled ? "_scaled" : ""),
                      in, {f32z(s), f32z(s), f32z(s), f32z(s), zeros(Shape{g.words()}, DType::u32)}, {sh.gs},
                      {1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.271f, 0.0975f}, tol::exact);
      c.out_alias = {0, 1, 2, 3, -1};
      check(c);
    }
}

TEST(CpuFast, GradNorm) {
  Rng r(19);
  check(make(Op::grad_norm, "three", {random_f32(r, Shape{200000}), random_f32(r, Shape{7}), random_f32(r, Shape{70, 1000})},
             {f32z(Shape{})}, {}, {}, tol::reduction(270007)));
}

// ---- Llama block ----

TEST(CpuFast, RmsNorm) {
  Rng r(20);
  for (int64_t D : {384, 7}) {
    Shape s{3, 100, D};
    HostTensor x = random_f32(r, s, -2, 2), w = random_f32(r, Shape{D});
    auto fwd = make(Op::rms_norm, "D" + std::to_string(D), {x, w}, {f32z(s), f32z(Shape{300})}, {}, {1e-5f},
                    tol::reduction(D));
    check(fwd);
    HostTensor rstd = run_reference(fwd)[1];
    for (int acc : {0, 1})
      check(make(Op::rms_norm_backward, "D" + std::to_string(D) + "_acc" + std::to_string(acc),
                 {random_f32(r, s), x, w, rstd}, {f32z(s), random_f32(r, Shape{D})}, {acc}, {}, tol::reduction(300)));
  }
}

TEST(CpuFast, SoftmaxFamily) {
  Rng r(21);
  HostTensor x = random_f32(r, Shape{4, 25, 1000}, -8, 8);
  x.as<float>()[3] = -kInf;                                         // a masked entry: fine
  x.as<float>()[1000 + 4] = kNaN;                                   // row 1: NaN
  x.as<float>()[2000 + 9] = kInf;                                   // row 2: +inf
  for (int j = 0; j < 1000; ++j) x.as<float>()[3000 + j] = -kInf;  // row 3: all -inf
  const Shape s = x.shape();
  check(make(Op::softmax, "rows100_n1000", {x}, {f32z(s)}, {-1}, {}, tol::transcendental));
  check(make(Op::log_softmax, "rows100_n1000", {x}, {f32z(s)}, {-1}, {}, tol::transcendental));
  HostTensor y = run_reference(make(Op::softmax, "", {random_f32(r, s, -3, 3)}, {f32z(s)}, {-1}, {}, tol::exact))[0];
  check(make(Op::softmax_backward, "rows100_n1000", {y, random_f32(r, s)}, {f32z(s)}, {-1}, {}, tol::reduction(1000)));
  check(make(Op::causal_softmax, "b2h3_T50_S70", {random_f32(r, Shape{2, 3, 50, 70}, -5, 5)}, {f32z(Shape{2, 3, 50, 70})},
             {}, {0.125f}, tol::transcendental));
}

// Several blocks of 64 queries and of 256 keys (the online softmax across key blocks), a KV cache (S > T),
// grouped heads, and a NaN query row (its row of out and lse is NaN, every other row is unaffected).
TEST(CpuFast, Attention) {
  Rng r(22);
  struct Shp {
    int64_t B, T, S, H, KV, hd;
  };
  for (Shp a : {Shp{2, 200, 200, 3, 1, 32}, Shp{1, 70, 600, 4, 2, 16}, Shp{1, 300, 300, 2, 2, 20}}) {
    const Shape qs{a.B, a.T, a.H, a.hd}, ks{a.B, a.S, a.KV, a.hd}, ls{a.B, a.H, a.T};
    const std::string name = "T" + std::to_string(a.T) + "_S" + std::to_string(a.S) + "_hd" + std::to_string(a.hd);
    HostTensor q = random_f32(r, qs, -2, 2), k = random_f32(r, ks, -2, 2), v = random_f32(r, ks);
    const float scale = 1.0f / std::sqrt(static_cast<float>(a.hd));
    const Tolerance t{1e-5, 1e-4};
    HostTensor qn = q;
    qn.as<float>()[5 * a.H * a.hd + 3] = kNaN;  // query 5 of head 0
    check(make(Op::attention, name + "_nan_row", {qn, k, v}, {f32z(qs), f32z(ls)}, {}, {scale}, t));
    auto fwd = run_reference(make(Op::attention, "", {q, k, v}, {f32z(qs), f32z(ls)}, {}, {scale}, tol::exact));
    // dq, dk, dv start as garbage: the kernel overwrites them.
    check(make(Op::attention_backward, name, {random_f32(r, qs), q, k, v, fwd[0], fwd[1]},
               {random_f32(r, qs), random_f32(r, ks), random_f32(r, ks)}, {}, {scale}, Tolerance{1e-4, 1e-3}));
  }
}

// Packed samples (pos): key loops that start past 0 and at no block edge, boundaries at the 64-query and
// 256-key block edges, rows packed differently, every token alone, and positions no packing makes.
TEST(CpuFast, AttentionPacked) {
  Rng r(25);
  struct Shp {
    int64_t B, T, H, KV, hd;
    std::vector<std::vector<int64_t>> lengths;  // empty: random positions in [-3, T]
  };
  const std::vector<Shp> shapes = {{2, 200, 3, 1, 32, {{7, 1, 30, 90, 72}, {200}}},
                                   {1, 600, 2, 2, 20, {{64, 192, 1, 300, 43}}},
                                   {1, 130, 2, 1, 16, {{1}}},
                                   {2, 300, 2, 1, 16, {}}};
  for (const Shp& a : shapes) {
    const Shape qs{a.B, a.T, a.H, a.hd}, ks{a.B, a.T, a.KV, a.hd}, ls{a.B, a.H, a.T};
    const std::string name = "packed_T" + std::to_string(a.T) + "_hd" + std::to_string(a.hd);
    HostTensor q = random_f32(r, qs, -2, 2), k = random_f32(r, ks, -2, 2), v = random_f32(r, ks);
    HostTensor pos = a.lengths.empty() ? random_i32(r, Shape{a.B, a.T}, -3, static_cast<int32_t>(a.T))
                                       : packed_positions(a.B, a.T, a.lengths);
    const float scale = 1.0f / std::sqrt(static_cast<float>(a.hd));
    check(make(Op::attention, name, {q, k, v, pos}, {f32z(qs), f32z(ls)}, {}, {scale}, Tolerance{1e-5, 1e-4}));
    auto fwd = run_reference(make(Op::attention, "", {q, k, v, pos}, {f32z(qs), f32z(ls)}, {}, {scale}, tol::exact));
    check(make(Op::attention_backward, name, {random_f32(r, qs), q, k, v, fwd[0], fwd[1], pos},
               {random_f32(r, qs), random_f32(r, ks), random_f32(r, ks)}, {}, {scale}, Tolerance{1e-4, 1e-3}));
  }
}

TEST(CpuFast, SiluMul) {
  Rng r(22);
  const Shape s{50021};
  HostTensor g = random_f32(r, s, -20, 20);
  const float specials[] = {-kInf, kInf, kNaN, -100.0f, 100.0f, -88.5f, 88.5f, 0.0f, -0.0f, 17.0f};
  for (int i = 0; i < 10; ++i) g.as<float>()[i * 7] = specials[i];
  HostTensor u = random_f32(r, s), dh = random_f32(r, s);
  check(make(Op::silu_mul, "n50021", {g, u}, {f32z(s)}, {}, {}, tol::elementwise));
  check(make(Op::silu_mul_backward, "n50021", {dh, g, u}, {f32z(s), f32z(s)}, {}, {}, tol::elementwise));
}

TEST(CpuFast, RopeBitIdentical) {
  Rng r(23);
  for (Shape s : {Shape{2, 64, 4, 32}, Shape{5, 3, 6}}) {
    check(make(Op::rope, "shape" + s.str(), {random_f32(r, s)}, {f32z(s)}, {}, {10000.0f, 5.0f}, tol::exact));
    check(make(Op::rope_backward, "shape" + s.str(), {random_f32(r, s)}, {f32z(s)}, {}, {500000.0f, 0.0f}, tol::exact));
  }
  // The angle tables are kept between calls: another offset or theta at the same shape must not reuse them.
  const Shape s{1, 9, 2, 16};
  for (float offset : {0.0f, 3.0f, 0.0f})
    for (float theta : {10000.0f, 20.0f})
      check(make(Op::rope, "offset" + std::to_string(offset) + "_theta" + std::to_string(theta), {random_f32(r, s)},
                 {f32z(s)}, {}, {theta, offset}, tol::exact));
  // With freqs: the tables are keyed by their values too (same shape, theta and offset, other frequencies).
  for (int k = 0; k < 3; ++k) {
    HostTensor f = random_f32(r, Shape{s.last() / 2}, 0.0f, k == 2 ? 3.0f : 1.0f);
    check(make(Op::rope, "freqs" + std::to_string(k), {random_f32(r, s), f}, {f32z(s)}, {}, {10000.0f, 4.0f}, tol::exact));
    check(make(Op::rope_backward, "freqs" + std::to_string(k), {random_f32(r, s), f}, {f32z(s)}, {}, {10000.0f, 4.0f},
               tol::exact));
  }
  // Packed positions index the same tables; positions outside [0, T) (no packing makes them) are computed
  // on the spot.
  const Shape ps{3, 50, 2, 16};
  HostTensor f = random_f32(r, Shape{ps.last() / 2}, 0.0f, 1.0f);
  HostTensor odd = random_i32(r, Shape{3, 50}, -5, 80);
  for (const HostTensor& pos : {packed_positions(3, 50, {{1, 20, 29}, {50}, {7}}), odd})
    for (bool freqs : {false, true})
      for (Op op : {Op::rope, Op::rope_backward}) {
        OpCase c = make(op, std::string("pos") + (freqs ? "_freqs" : ""), {random_f32(r, ps), f, pos}, {f32z(ps)}, {},
                        {10000.0f, 2.0f}, tol::exact);
        c.in_absent = {false, !freqs, false};
        check(c);
      }
}

TEST(CpuFast, EmbeddingBitIdentical) {
  Rng r(24);
  HostTensor idx = random_i32(r, Shape{4, 125}, -3, 102);  // some outside [0, 100)
  HostTensor w = random_f32(r, Shape{100, 70});
  check(make(Op::embedding, "V100_D70", {w, idx}, {f32z(Shape{4, 125, 70})}, {}, {}, tol::exact));
  for (int acc : {0, 1}) {
    OpCase c = make(Op::embedding_backward, "V100_D70_acc" + std::to_string(acc), {random_f32(r, Shape{4, 125, 70}), idx},
                    {random_f32(r, Shape{100, 70})}, {acc}, {}, tol::exact);
    check(c);
  }
}

// ---- elementwise and copies ----

TEST(CpuFast, ElementwiseBitIdentical) {
  Rng r(25);
  const Shape s{3, 50, 70};
  for (Op op : {Op::add, Op::sub, Op::mul}) {
    std::vector<float> f = op == Op::mul ? std::vector<float>{} : std::vector<float>{0.75f};
    check(make(op, "same", {random_f32(r, s), random_f32(r, s)}, {f32z(s)}, {}, f, tol::exact));
    check(make(op, "row_bcast", {random_f32(r, s), random_f32(r, Shape{70})}, {f32z(s)}, {}, f, tol::exact));
    check(make(op, "mid_bcast", {random_f32(r, s), random_f32(r, Shape{50, 1})}, {f32z(s)}, {}, f, tol::exact));
    check(make(op, "a_bcast", {random_f32(r, Shape{50, 70}), random_f32(r, s)}, {f32z(s)}, {}, f, tol::exact));
    OpCase c = make(op, "in_place", {random_f32(r, s), random_f32(r, s)}, {f32z(s)}, {}, f, tol::exact);
    c.out_alias = {0};
    check(c);
  }
  check(make(Op::scale, "n", {random_f32(r, s)}, {f32z(s)}, {}, {-1.5f}, tol::exact));
}

TEST(CpuFast, PermuteBitIdentical) {
  Rng r(26);
  HostTensor x = random_f32(r, Shape{4, 5, 6, 7});
  check(make(Op::permute_copy, "0213", {x}, {f32z(Shape{4, 6, 5, 7})}, {0, 2, 1, 3}, {}, tol::exact));
  check(make(Op::permute_copy, "3102", {x}, {f32z(Shape{7, 5, 4, 6})}, {3, 1, 0, 2}, {}, tol::exact));
  HostTensor xi = random_i32(r, Shape{9, 11}, -1000, 1000);
  check(make(Op::permute_copy, "i32_10", {xi}, {zeros(Shape{11, 9}, DType::i32)}, {-1, 0}, {}, tol::exact));
  HostTensor xb = random_bool(r, Shape{3, 4, 5});
  check(make(Op::permute_copy, "bool_201", {xb}, {zeros(Shape{5, 3, 4}, DType::boolean)}, {2, 0, 1}, {}, tol::exact));
}

// EDGETRAIN_CPU_PROFILE=FILE: the backend times every replayed call and writes a table by op and kernel.
TEST(CpuFast, ProfileReportNamesEveryOp) {
  const std::string path = ::testing::TempDir() + "edgetrain_cpu_profile_" + std::to_string(::getpid()) + ".txt";
  ::setenv("EDGETRAIN_CPU_PROFILE", path.c_str(), 1);
  {
    cpu::CpuBackend b(BackendOptions{1, "", false, false});
    ::unsetenv("EDGETRAIN_CPU_PROFILE");
    ASSERT_NE(b.profiler(), nullptr);
    Rng r(5);
    OpCase c = make(Op::mm, "M8_N8_K8", {random_f32(r, Shape{8, 8}), random_f32(r, Shape{8, 8})}, {f32z(Shape{8, 8})},
                    {0, 0}, {1.0f}, Tolerance{1e-6, 1e-5});
    run_on(b, c);
  }
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_NE(ss.str().find("edgetrain cpu profile"), std::string::npos) << ss.str();
  EXPECT_NE(ss.str().find("mm (fast)"), std::string::npos) << ss.str();
  std::remove(path.c_str());
}

}  // namespace
}  // namespace edgetrain::test
