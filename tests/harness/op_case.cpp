// The shared op-test harness (see op_case.h).
#include "harness/op_case.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "cpu/cpu_backend.h"
#include "edgetrain/backends.h"
#include "edgetrain/q4gsw.h"

namespace edgetrain::test {

Tolerance tol::reduction(int64_t n) {
  double s = std::sqrt(static_cast<double>(std::max<int64_t>(n, 1)));
  return {2e-6 * s, 2e-5 * s};
}

Tolerance tol::cross_entropy(int64_t R, int64_t V) {
  const Tolerance r = reduction(std::max(R, V));
  return {std::max(r.atol, transcendental.atol), std::max(r.rtol, transcendental.rtol)};
}

// Each fp16 operand carries a relative rounding error |d| <= u = 2^-11 (round to nearest; values below
// 2^-14 are off by at most 2^-25 absolute, negligible here), so one product a*b moves by at most
// (2u + u^2)|a b| <= 2.001 u mag. The errors of the K terms are independent and centred, so the sum's
// error has a standard deviation of at most sqrt(2/3) u sqrt(K) mag: atol = 4 u sqrt(K) mag is about five
// of those in the worst case (every |a b| = mag) and more for spread data, while rounding to bf16
// (u = 2^-8) would exceed it on most outputs. The fp32 summation tolerance comes on top.
Tolerance tol::f16_operands(int64_t K, double mag) {
  const double u = std::ldexp(1.0, -11), k = static_cast<double>(std::max<int64_t>(K, 1));
  const Tolerance sum = reduction(K);
  return {sum.atol + 4.0 * u * std::sqrt(k) * mag, sum.rtol};
}

void push_with_f16(std::vector<OpCase>& cases, OpCase c, int64_t K, double mag) {
  const Tolerance own = c.tol;
  push_with_f16(cases, std::move(c), own, tol::f16_operands(K, mag));
}

void push_with_f16(std::vector<OpCase>& cases, OpCase c, Tolerance own, Tolerance vs_fp32) {
  OpCase h = c;
  cases.push_back(std::move(c));
  h.name += "_f16";
  h.ints.push_back(1);
  h.tol = own;
  h.f16_vs_fp32 = vs_fp32;
  cases.push_back(std::move(h));
}

OpCase make_case(std::string name, Op op, std::vector<HostTensor> in, std::vector<HostTensor> out,
                 std::vector<int64_t> ints, std::vector<float> floats, Tolerance t) {
  OpCase c;
  c.name = std::move(name);
  c.op = op;
  c.in = std::move(in);
  c.out = std::move(out);
  c.ints = std::move(ints);
  c.floats = std::move(floats);
  c.tol = t;
  return c;
}

std::map<Op, std::vector<CaseGenerator>>& case_registry() {
  static std::map<Op, std::vector<CaseGenerator>> r;
  return r;
}

std::vector<OpCase> cases_for(Op op) {
  std::vector<OpCase> all;
  auto it = case_registry().find(op);
  if (it == case_registry().end()) return all;
  for (auto& g : it->second)
    for (auto& c : g()) all.push_back(std::move(c));
  return all;
}

std::vector<HostTensor> run_on(Backend& b, const OpCase& c) {
  OpCall call{c.op, {}, {}, c.ints, {}};
  for (size_t i = 0; i < c.in.size(); ++i) {
    bool absent = i < c.in_absent.size() && c.in_absent[i];
    call.in.push_back(absent ? Tensor() : b.from_host(c.in[i].shape(), c.in[i].dtype(), c.in[i].data(), c.in[i].nbytes()));
  }
  for (size_t i = 0; i < c.out.size(); ++i) {
    int alias = i < c.out_alias.size() ? c.out_alias[i] : -1;
    call.out.push_back(alias >= 0 ? call.in[alias]
                                  : b.from_host(c.out[i].shape(), c.out[i].dtype(), c.out[i].data(), c.out[i].nbytes()));
  }
  for (float f : c.floats) call.floats.push_back(f);
  std::vector<Tensor> outs = call.out;
  b.run(std::move(call));
  std::vector<HostTensor> res;
  for (const Tensor& t : outs) {
    HostTensor h(t.shape(), t.dtype());
    b.download(t, h.data(), h.nbytes());
    res.push_back(std::move(h));
  }
  return res;
}

std::vector<HostTensor> run_reference(const OpCase& c) {
  static auto ref_backend = [] {
    auto b = std::make_unique<cpu::CpuBackend>(BackendOptions{});  // all cores: the thread count is process-wide
    b->set_reference_only(true);
    return b;
  }();
  return run_on(*ref_backend, c);
}

std::string compare(const HostTensor& got, const HostTensor& want, Tolerance t) {
  std::ostringstream os;
  if (got.shape() != want.shape() || got.dtype() != want.dtype()) {
    os << "got " << dtype_name(got.dtype()) << got.shape().str() << ", want " << dtype_name(want.dtype())
       << want.shape().str();
    return os.str();
  }
  int bad = 0;
  int64_t n = got.numel();
  if (got.dtype() == DType::f32) {
    const float *g = got.as<float>(), *w = want.as<float>();
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      bool ok;
      if (std::isnan(w[i]) || std::isnan(g[i])) ok = std::isnan(w[i]) && std::isnan(g[i]);
      else if (std::isinf(w[i]) || std::isinf(g[i])) ok = g[i] == w[i];
      else ok = std::fabs(static_cast<double>(g[i]) - w[i]) <= t.atol + t.rtol * std::fabs(static_cast<double>(w[i]));
      if (!ok) {
        worst = std::max(worst, std::fabs(static_cast<double>(g[i]) - w[i]));
        if (bad++ < 5) os << "  [" << i << "] got " << g[i] << " want " << w[i] << "\n";
      }
    }
    if (bad) os << "  " << bad << " of " << n << " differ; largest difference " << worst << " (atol " << t.atol
                << ", rtol " << t.rtol << ")\n";
  } else {
    const unsigned char *g = static_cast<const unsigned char*>(got.data()),
                        *w = static_cast<const unsigned char*>(want.data());
    size_t es = dtype_size(got.dtype());
    for (int64_t i = 0; i < n; ++i)
      if (std::memcmp(g + i * es, w + i * es, es) != 0) {
        if (bad++ < 5) {
          uint32_t gv = 0, wv = 0;
          std::memcpy(&gv, g + i * es, es);
          std::memcpy(&wv, w + i * es, es);
          os << "  [" << i << "] got 0x" << std::hex << gv << " want 0x" << wv << std::dec << "\n";
        }
      }
    if (bad) os << "  " << bad << " of " << n << " elements differ (exact comparison)\n";
  }
  return os.str();
}

void expect_matches_reference(Backend& b, const OpCase& c) {
  const OpInfo& info = op_info(c.op);
  const auto want = run_reference(c);
  const auto got = run_on(b, c);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const std::string diff = compare(got[i], want[i], c.tol);
    EXPECT_TRUE(diff.empty()) << "output " << info.outputs.names[std::min(i, info.outputs.names.size() - 1)]
                              << " of case " << c.name << ":\n" << diff;
  }
  if (!c.f16_vs_fp32) return;
  OpCase fp32 = c;
  fp32.ints.pop_back();
  const auto want32 = run_reference(fp32);
  for (size_t i = 0; i < got.size(); ++i) {
    const std::string diff = compare(got[i], want32[i], *c.f16_vs_fp32);
    EXPECT_TRUE(diff.empty()) << "output " << i << " of case " << c.name << " against the fp32 call:\n" << diff;
  }
}

std::vector<std::string> test_backends() {
  std::vector<std::string> names;
  if (const char* env = std::getenv("EDGETRAIN_TEST_BACKENDS")) {
    std::stringstream ss(env);
    std::string item;
    while (std::getline(ss, item, ','))
      if (!item.empty()) names.push_back(item);
    return names;
  }
  names.push_back("cpu");
  for (const DeviceInfo& d : list_devices())
    if (d.backend != "cpu" && d.usable && std::find(names.begin(), names.end(), d.backend) == names.end())
      names.push_back(d.backend);
  return names;
}

// Device backends are released by a gtest environment's TearDown, before exit: destroying them from
// static destructors would run after GPU drivers' own exit handlers have torn the driver down.
std::map<std::string, std::unique_ptr<Backend>>& backend_cache() {
  static std::map<std::string, std::unique_ptr<Backend>> cache;
  return cache;
}

void release_test_backends() { backend_cache().clear(); }

namespace {
struct ReleaseBackends : ::testing::Environment {
  void TearDown() override { release_test_backends(); }
};
const auto* const g_release_env = ::testing::AddGlobalTestEnvironment(new ReleaseBackends);
}  // namespace

bool vulkan_usable() {
  for (const DeviceInfo& d : list_devices())
    if (d.backend == "vulkan" && d.usable) return true;
  return false;
}

std::unique_ptr<Backend> make_profiled_backend(const std::string& name, const std::string& path, bool in_order) {
  const char* var = name == "cpu" ? "EDGETRAIN_CPU_PROFILE" : "EDGETRAIN_PROFILE";
  ::setenv(var, path.c_str(), 1);
  if (in_order) ::setenv("EDGETRAIN_PROFILE_ORDER", "1", 1);
  auto unset = [var] {
    ::unsetenv(var);
    ::unsetenv("EDGETRAIN_PROFILE_ORDER");
  };
  std::unique_ptr<Backend> b;
  try {
    b = make_backend(name);
  } catch (...) {
    unset();
    throw;
  }
  unset();
  return b;
}

Backend& backend_for_tests(const std::string& name) {
  auto& b = backend_cache()[name];
  if (!b) {
    BackendOptions o;
    // EDGETRAIN_TEST_VALIDATION=0: without the validation layer, where the installed one predates an
    // extension under test (the KHR tensor-core kernel on the H200, whose carried layer is Debian 12's).
    const char* v = std::getenv("EDGETRAIN_TEST_VALIDATION");
    o.validation = !(v && std::string(v) == "0");
    if (const char* dev = std::getenv("EDGETRAIN_TEST_DEVICE")) o.device = dev;
    b = make_backend(name, o);
  }
  return *b;
}

HostTensor random_f32(Rng& r, Shape s, float lo, float hi) {
  HostTensor h(s, DType::f32);
  for (int64_t i = 0; i < h.numel(); ++i) h.as<float>()[i] = r.uniform(lo, hi);
  return h;
}

HostTensor random_i32(Rng& r, Shape s, int32_t lo, int32_t hi) {
  HostTensor h(s, DType::i32);
  for (int64_t i = 0; i < h.numel(); ++i) h.as<int32_t>()[i] = r.integer(lo, hi);
  return h;
}

HostTensor random_bool(Rng& r, Shape s) {
  HostTensor h(s, DType::boolean);
  for (int64_t i = 0; i < h.numel(); ++i) h.as<uint8_t>()[i] = static_cast<uint8_t>(r.integer(0, 1));
  return h;
}

HostTensor zeros(Shape s, DType t) { return HostTensor(s, t); }

HostTensor packed_positions(int64_t B, int64_t T, const std::vector<std::vector<int64_t>>& lengths) {
  HostTensor h(Shape{B, T}, DType::i32);
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<int64_t>& row = lengths[static_cast<size_t>(b) % lengths.size()];
    size_t sample = 0;
    int64_t p = 0;
    for (int64_t t = 0; t < T; ++t) {
      if (p == row[sample % row.size()]) {
        ++sample;
        p = 0;
      }
      h.as<int32_t>()[b * T + t] = static_cast<int32_t>(p++);
    }
  }
  return h;
}

HostTensor filled_f32(Shape s, float v) {
  HostTensor h(s, DType::f32);
  for (int64_t i = 0; i < h.numel(); ++i) h.as<float>()[i] = v;
  return h;
}

Q4Weight random_q4(Rng& r, int64_t N, int64_t K, int64_t gs, bool zero_scales) {
  q4::Geometry g(N, K, gs);
  Q4Weight q;
  q.codes.resize(static_cast<size_t>(N * K));
  for (auto& c : q.codes) c = static_cast<uint8_t>(r.integer(0, 15));
  auto words = q4::pack_w4x8(g, q.codes.data());
  q.w = HostTensor::from(Shape{g.words()}, DType::u32, words);
  q.scales = random_f32(r, Shape{g.groups(), N}, 0.01f, 0.1f);
  if (zero_scales)
    for (int64_t i = 0; i < q.scales.numel(); i += 3) q.scales.as<float>()[i] = 0.0f;
  return q;
}

}  // namespace edgetrain::test
