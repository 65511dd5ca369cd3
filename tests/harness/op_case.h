// The shared op-test harness: an OpCase is one call of one op on host data; the same cases run on every
// backend and are compared with the CPU reference. Backends join by being listed in test_backends().
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "edgetrain/backend.h"
#include "ref/ref.h"

namespace edgetrain::test {

using ref::HostTensor;

// |got - want| <= atol + rtol*|want| for f32 outputs; other dtypes compare exactly. In one place so the
// tolerances of every op are visible together.
struct Tolerance {
  double atol = 0.0, rtol = 0.0;
};
namespace tol {
inline constexpr Tolerance exact{0.0, 0.0};
inline constexpr Tolerance elementwise{1e-6, 1e-5};  // one or two roundings; transcendental functions
inline constexpr Tolerance transcendental{1e-5, 1e-4};
// A dot product / sum of n fp32 terms in another order: error grows like sqrt(n).
Tolerance reduction(int64_t n);
// A product with fp16 operands (the f16 flag) against the same product with fp32 operands, K terms whose
// products are bounded by mag in magnitude. The derivation is at the definition (op_case.cpp).
Tolerance f16_operands(int64_t K, double mag);
// Cross-entropy over R rows of V logits (fused_ce and its parts): exp/log (transcendental error) mixed with
// sums over V columns and R rows.
Tolerance cross_entropy(int64_t R, int64_t V);
}  // namespace tol

struct OpCase {
  std::string name;  // shown in failures, e.g. "M1_K33_N17_gs32"
  Op op;
  std::vector<HostTensor> in;
  std::vector<bool> in_absent;  // optional input i left out (in[i] then is a placeholder); may be empty
  std::vector<HostTensor> out;  // initial contents of the outputs (zeros unless the op accumulates)
  std::vector<int> out_alias;   // out i is input out_alias[i] (in-place ops); -1 or empty: own buffer
  std::vector<int64_t> ints;
  std::vector<float> floats;
  Tolerance tol = tol::elementwise;
  // Cases of the matrix products with the f16 flag set: the tolerance against the reference of the same
  // call without it (test_f16_gemm.cpp). `tol` compares them with the reference of the f16 call itself.
  std::optional<Tolerance> f16_vs_fp32;
};

// Appends c, then its twin with fp16 operands (the f16 flag appended to its ints, "_f16" to its name) that
// is also checked against the fp32 call with tol::f16_operands(K, mag).
void push_with_f16(std::vector<OpCase>& cases, OpCase c, int64_t K, double mag = 1.0);
// The same with the twin's tolerances given: against its own reference (own) and the fp32 call's (vs_fp32).
void push_with_f16(std::vector<OpCase>& cases, OpCase c, Tolerance own, Tolerance vs_fp32);

// An OpCase from its parts (outputs start with the given contents).
OpCase make_case(std::string name, Op op, std::vector<HostTensor> in, std::vector<HostTensor> out,
                 std::vector<int64_t> ints, std::vector<float> floats, Tolerance t);

// Case generators register per op (from the family test files) with ET_OP_CASES.
using CaseGenerator = std::function<std::vector<OpCase>()>;
std::map<Op, std::vector<CaseGenerator>>& case_registry();
std::vector<OpCase> cases_for(Op op);
struct CaseRegistrar {
  CaseRegistrar(Op op, CaseGenerator g) { case_registry()[op].push_back(std::move(g)); }
};
#define ET_CAT2(a, b) a##b
#define ET_CAT(a, b) ET_CAT2(a, b)
#define ET_OP_CASES(op, fn) static ::edgetrain::test::CaseRegistrar ET_CAT(et_reg_, __LINE__)(::edgetrain::Op::op, fn)

// Builds the case's tensors on the backend, runs the op eagerly, returns the outputs.
std::vector<HostTensor> run_on(Backend& b, const OpCase& c);
// The CPU reference's outputs (reference kernels only, no fast paths).
std::vector<HostTensor> run_reference(const OpCase& c);
// Empty string when equal within tolerance; otherwise a description of the first mismatches.
std::string compare(const HostTensor& got, const HostTensor& want, Tolerance t);
// Runs c on b and expects every output within c.tol of the reference; an f16 twin's (fp16 operands, ops.inc)
// also within its stated bound of the same call in fp32 (tests/test_f16_gemm.cpp).
void expect_matches_reference(Backend& b, const OpCase& c);

// Backends under test: "cpu" always; "vulkan" and "webgpu" when compiled in and a device is present
// (EDGETRAIN_TEST_BACKENDS=cpu,vulkan overrides). Vulkan runs with the validation layer on.
std::vector<std::string> test_backends();
// Whether a Vulkan device is usable here (list_devices()).
bool vulkan_usable();
Backend& backend_for_tests(const std::string& name);
// A new backend `name` (no validation layer) that writes its per-kernel profile to `path` (EDGETRAIN_PROFILE,
// or EDGETRAIN_CPU_PROFILE for "cpu", set only while it starts; `in_order`: EDGETRAIN_PROFILE_ORDER=1 alike).
std::unique_ptr<Backend> make_profiled_backend(const std::string& name, const std::string& path, bool in_order = false);
// Destroys the cached test backends (done automatically when the test program ends).
void release_test_backends();

// Deterministic random data.
struct Rng {
  std::mt19937 gen;
  explicit Rng(uint32_t seed) : gen(seed) {}
  float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(gen); }
  int32_t integer(int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(gen); }
};
HostTensor random_f32(Rng& r, Shape s, float lo = -1.0f, float hi = 1.0f);
HostTensor random_i32(Rng& r, Shape s, int32_t lo, int32_t hi);
HostTensor random_bool(Rng& r, Shape s);
HostTensor zeros(Shape s, DType t);
// Positions of packed samples (rope's and attention's pos input), i32 [B, T]: row b holds samples of the
// lengths lengths[b % lengths.size()], in turn and cycled until T tokens (the last one cut at T), each
// numbered 0, 1, 2, ... from its first token.
HostTensor packed_positions(int64_t B, int64_t T, const std::vector<std::vector<int64_t>>& lengths);
HostTensor filled_f32(Shape s, float v);
// A q4gsw weight ready for the ops: random codes 0..15 packed as W_4X8, and random positive scales
// (a few exactly zero when zero_scales). Also returns the codes for checks.
struct Q4Weight {
  HostTensor w;       // u32 [words]
  HostTensor scales;  // f32 [G, N]
  std::vector<uint8_t> codes;
};
Q4Weight random_q4(Rng& r, int64_t N, int64_t K, int64_t group_size, bool zero_scales = false);

}  // namespace edgetrain::test
