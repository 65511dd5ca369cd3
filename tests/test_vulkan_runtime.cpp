// The Vulkan runtime: device listing and choice, memory round trips, validation-message capture,
// out-of-memory errors, requant bit-exactness where GPU division would round differently, exact denormal
// comparisons, larger shapes; recorded programs: test_vulkan_programs.cpp. Skipped when no Vulkan device
// is usable.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "edgetrain/backends.h"
#include "edgetrain/graph.h"
#include "edgetrain/q4gsw.h"
#include "harness/op_case.h"
#include "harness/scoped_env.h"

#ifdef EDGETRAIN_HAS_VULKAN
#include "harness/vulkan_test.h"
#include "vulkan/program.h"

namespace edgetrain::test {
namespace {

TEST(VulkanRuntime, ListsDevices) {
  auto devs = vk::list_vulkan_devices();  // never throws
  ASSERT_FALSE(devs.empty());
  NEED_VULKAN();
  for (const DeviceInfo& d : devs) {
    if (!d.usable) continue;
    EXPECT_EQ(d.backend, "vulkan");
    EXPECT_FALSE(d.name.empty());
    EXPECT_TRUE(d.kind == "discrete" || d.kind == "integrated" || d.kind == "software" || d.kind == "other") << d.kind;
    EXPECT_NE(d.details.find("subgroup"), std::string::npos) << d.details;
    EXPECT_NE(d.details.find("shared memory"), std::string::npos) << d.details;
  }
  EXPECT_FALSE(vb().device_name().empty());
}

TEST(VulkanRuntime, DeviceChoiceByNameAndIndex) {
  NEED_VULKAN();
  std::string name = vb().device_name();
  BackendOptions o;
  o.device = name.substr(0, 4);
  for (char& c : o.device) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));  // case-insensitive
  EXPECT_EQ(make_backend("vulkan", o)->device_name(), name);
  o.device = "no-such-device-xyz";
  try {
    make_backend("vulkan", o);
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-device-xyz"), std::string::npos) << e.what();
  }
  o.device = "999";
  EXPECT_THROW(make_backend("vulkan", o), Error);
}

TEST(VulkanRuntime, NoDriverIsReportedNotThrown) {
  ScopedEnv icd("VK_ICD_FILENAMES", "/nonexistent/edgetrain_icd.json");
  ScopedEnv drv("VK_DRIVER_FILES", "/nonexistent/edgetrain_icd.json");
  auto devs = vk::list_vulkan_devices();
  ASSERT_FALSE(devs.empty());
  for (const DeviceInfo& d : devs) EXPECT_FALSE(d.usable) << d.name << ": " << d.details;
  EXPECT_NE(devs[0].details.find("no Vulkan"), std::string::npos) << devs[0].details;
  EXPECT_THROW(make_backend("vulkan"), Error);
}

TEST(VulkanRuntime, MissingValidationLayerIsAClearError) {
  NEED_VULKAN();
  ScopedEnv path("VK_LAYER_PATH", "/nonexistent");
  ScopedEnv add("VK_ADD_LAYER_PATH", "/nonexistent");
  BackendOptions o;
  o.validation = true;
  try {
    make_backend("vulkan", o);
    GTEST_SKIP() << "the loader still found the validation layer";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("VK_LAYER_KHRONOS_validation"), std::string::npos) << e.what();
  }
}

TEST(VulkanRuntime, UploadDownloadRoundTrip) {
  NEED_VULKAN();
  Backend& b = vb();
  Rng r(7);
  for (int64_t n : {0, 1, 3, 5, 16, 17, 4099, (1 << 20) + 7}) {
    std::vector<uint8_t> data(static_cast<size_t>(n));
    for (auto& v : data) v = static_cast<uint8_t>(r.integer(0, 255));
    Tensor t = b.from_vector(Shape{n}, DType::u8, data);
    EXPECT_EQ(b.to_vector<uint8_t>(t), data) << "n=" << n;
  }
  // Fresh tensors read as zeros, also when they reuse memory that held data.
  for (int round = 0; round < 3; ++round) {
    {
      Tensor junk = b.from_vector(Shape{1000}, DType::f32, std::vector<float>(1000, 3.0f));
    }
    Tensor z = b.zeros(Shape{999}, DType::f32);
    for (float v : b.to_vector<float>(z)) ASSERT_EQ(v, 0.0f);
  }
  // Bigger than a 64 MiB block: its own allocation, uploaded in chunks.
  std::vector<float> big(size_t(20) << 20);
  for (size_t i = 0; i < big.size(); i += 4099) big[i] = static_cast<float>(i);
  Tensor tb = b.from_vector(Shape{static_cast<int64_t>(big.size())}, DType::f32, big);
  EXPECT_EQ(b.to_vector<float>(tb), big);
}

// Where the device has cooperative matrices, the probe ran at backend start: NVIDIA's (the one
// implementation of VK_NV_cooperative_matrix) must fit, or fp16 attention would leave the tensor cores.
TEST(VulkanRuntime, CoopLayoutProbeFitsWhereCooperativeMatricesExist) {
  NEED_VULKAN();
  vk::VulkanBackend& b = vb();
  if (!b.context().limits().coopmat) GTEST_SKIP() << "no cooperative matrices on " << b.device_name();
  const vk::EncodeContext e = b.encode_context();
  EXPECT_TRUE(e.coop_acc_known);
  const vk::CoopAccLayout l = vk::probe_coop_acc_layout(b);
  ASSERT_TRUE(l.known) << l.what;
  EXPECT_EQ(l.rows_high, e.coop_acc_rows_high);
  EXPECT_EQ(l.columns, e.coop_acc_columns);
}

TEST(VulkanRuntime, OutOfMemoryNamesTheSize) {
  NEED_VULKAN();
  const int64_t n = int64_t(1) << 48;  // 1 PiB of f32
  try {
    vb().zeros(Shape{n}, DType::f32);
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("out of device memory allocating " + std::to_string(n * 4) + " bytes"), std::string::npos) << m;
  }
  // The backend still works.
  Tensor t = vb().from_vector(Shape{2}, DType::f32, std::vector<float>{1, 2});
  EXPECT_EQ(vb().to_vector<float>(t), (std::vector<float>{1, 2}));
}

TEST(VulkanRuntime, ValidationErrorThrownAtSync) {
  NEED_VULKAN();
  vk::VulkanBackend& b = vb();
  if (!b.context().validation()) GTEST_SKIP() << "validation layer not enabled";
  Tensor t = b.from_vector(Shape{1}, DType::f32, std::vector<float>{1.0f});
  VkBufferCreateInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bi.size = 64;
  bi.usage = 0;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer buf = VK_NULL_HANDLE;
  auto create = reinterpret_cast<PFN_vkCreateBuffer>(b.context().device_proc("vkCreateBuffer"));
  auto destroy = reinterpret_cast<PFN_vkDestroyBuffer>(b.context().device_proc("vkDestroyBuffer"));
  ASSERT_TRUE(create && destroy);
  create(b.context().device(), &bi, nullptr, &buf);
  if (buf) destroy(b.context().device(), buf, nullptr);
  try {
    b.to_vector<float>(t);
    ADD_FAILURE() << "a validation error was not turned into an Error";
  } catch (const Error& e) {
    // The VUID as Debian 12's layer (1.3.239) and Debian 13's (1.4.309, tests/khr_coop.sh) name it.
    const std::string what = e.what();
    EXPECT_TRUE(what.find("VUID-VkBufferCreateInfo-usage") != std::string::npos ||
                what.find("VUID-VkBufferCreateInfo-None-09500") != std::string::npos)
        << what;
  }
  EXPECT_EQ(b.to_vector<float>(t), std::vector<float>{1.0f});  // messages were consumed; the backend works
}

// Requant where latent/s is within an ulp of a .5 tie with scales that are not powers of two: only a
// correctly rounded division gives the reference's codes.
TEST(VulkanRuntime, RequantBitExactNearTies) {
  NEED_VULKAN();
  const int64_t N = 37, K = 100, gs = 20;
  q4::Geometry g(N, K, gs);
  Rng r(5);
  HostTensor scales(Shape{g.groups(), N}, DType::f32), lat(Shape{N, K}, DType::f32);
  for (int64_t i = 0; i < scales.numel(); ++i) scales.as<float>()[i] = r.uniform(0.01f, 3.0f);
  scales.as<float>()[3] = std::numeric_limits<float>::denorm_min() * 3;
  scales.as<float>()[4] = -0.7f;
  scales.as<float>()[5] = std::numeric_limits<float>::infinity();
  scales.as<float>()[6] = std::numeric_limits<float>::quiet_NaN();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      float s = scales.as<float>()[(k / gs) * N + n];
      float h = static_cast<float>(r.integer(-10, 9)) + 0.5f;
      float v = h * s;  // rounded product: latent/s lands on or next to the tie
      int nudge = r.integer(-2, 2);
      for (; nudge > 0; --nudge) v = std::nextafter(v, std::numeric_limits<float>::infinity());
      for (; nudge < 0; ++nudge) v = std::nextafter(v, -std::numeric_limits<float>::infinity());
      if ((n * K + k) % 97 == 0) v = std::numeric_limits<float>::denorm_min() * static_cast<float>(r.integer(1, 9));
      lat.as<float>()[n * K + k] = v;
    }
  OpCase c;
  c.name = "near_ties";
  c.op = Op::q4gsw_requant;
  c.in = {lat, scales};
  c.out = {zeros(Shape{g.words()}, DType::u32), zeros(lat.shape(), DType::f32)};
  c.out_alias = {-1, 0};  // the latent, clamped in place
  c.ints = {gs};
  c.tol = tol::exact;
  auto want = run_reference(c);
  auto got = run_on(vb(), c);
  std::string d = compare(got[0], want[0], tol::exact);
  EXPECT_TRUE(d.empty()) << d;
}

// Comparisons where denormals meet zeros, on both sides: x denormal or +-0 against s = 0, -0, +-denormal,
// and i32 x against denormal s. Exact IEEE (the reference) never equates a denormal with 0; drivers that
// flush denormals in float compares do, so the kernel must decide on bit patterns.
TEST(VulkanRuntime, CompareDenormalsExactly) {
  NEED_VULKAN();
  const float dmin = std::numeric_limits<float>::denorm_min();
  const float dbig = std::nextafter(std::numeric_limits<float>::min(), 0.0f);  // largest denormal
  std::vector<float> xf = {0.0f, -0.0f, dmin, -dmin, 2 * dmin, dbig, -dbig, std::numeric_limits<float>::min(),
                           1.0f, -1.0f, std::numeric_limits<float>::quiet_NaN()};
  std::vector<int32_t> xi = {-2, -1, 0, 1, 2};
  const int64_t nf = static_cast<int64_t>(xf.size()), ni = static_cast<int64_t>(xi.size());
  for (Op op : {Op::eq, Op::ne, Op::lt, Op::le, Op::gt, Op::ge})
    for (float s : {0.0f, -0.0f, dmin, -dmin, 2 * dmin, dbig, -dbig}) {
      for (bool is_int : {false, true}) {
        OpCase c;
        c.name = std::string(op_name(op)) + (is_int ? "_i32" : "_f32");
        c.op = op;
        c.in = {is_int ? HostTensor::from(Shape{ni}, DType::i32, xi) : HostTensor::from(Shape{nf}, DType::f32, xf)};
        c.out = {zeros(Shape{is_int ? ni : nf}, DType::boolean)};
        c.floats = {s};
        c.tol = tol::exact;
        SCOPED_TRACE(c.name + " s=" + std::to_string(s) + (std::signbit(s) ? " (negative)" : ""));
        std::string d = compare(run_on(vb(), c)[0], run_reference(c)[0], tol::exact);
        EXPECT_TRUE(d.empty()) << d;
      }
    }
}

// Shapes past the tile edges and the gemv path with many columns, against the reference.
TEST(VulkanRuntime, LargerShapesMatchReference) {
  NEED_VULKAN();
  Rng r(9);
  std::vector<OpCase> cs;
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{1, 1000, 300}, {2, 200, 260}, {150, 130, 70}, {257, 140, 131}}) {
    Q4Weight q = random_q4(r, N, K, 32);
    OpCase f;
    f.name = "fwd";
    f.op = Op::linear_q4gsw;
    f.in = {random_f32(r, Shape{M, K}), q.w, q.scales, random_f32(r, Shape{N})};
    f.out = {zeros(Shape{M, N}, DType::f32)};
    f.ints = {32};
    f.tol = tol::reduction(K);
    cs.push_back(f);
    OpCase bw;
    bw.name = "bwd";
    bw.op = Op::linear_q4gsw_backward;
    bw.in = {random_f32(r, Shape{M, N}), q.w, q.scales};
    bw.out = {zeros(Shape{M, K}, DType::f32)};
    bw.ints = {32, K};
    bw.tol = tol::reduction(N);
    cs.push_back(bw);
  }
  // Products big enough for the 128x128 GEMM tiles, with ragged edges, every transpose and accumulate.
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const int64_t M = 200, N = 300, K = 70;
      OpCase mm;
      mm.name = "mm_200x300x70_ta" + std::to_string(ta) + "_tb" + std::to_string(tb);
      mm.op = Op::mm;
      mm.in = {random_f32(r, ta ? Shape{K, M} : Shape{M, K}), random_f32(r, tb ? Shape{N, K} : Shape{K, N})};
      mm.out = {zeros(Shape{M, N}, DType::f32)};
      mm.ints = {ta, tb};
      mm.floats = {ta ? 0.5f : 1.0f};
      mm.tol = tol::reduction(K);
      cs.push_back(mm);
    }
  {
    OpCase dw;
    dw.name = "linear_dW_M77_N130_K257_acc";
    dw.op = Op::linear_dW;
    dw.in = {random_f32(r, Shape{7, 11, 130}), random_f32(r, Shape{77, 257})};
    dw.out = {random_f32(r, Shape{130, 257})};
    dw.ints = {1};
    dw.tol = tol::reduction(78);
    cs.push_back(dw);
  }
  OpCase ad;
  ad.name = "adamw_70001";
  ad.op = Op::adamw_step;
  for (int i = 0; i < 4; ++i) ad.in.push_back(random_f32(r, Shape{70001}, 0.0f, 0.5f));
  ad.out = {zeros(Shape{70001}, DType::f32), zeros(Shape{70001}, DType::f32), zeros(Shape{70001}, DType::f32),
            zeros(Shape{70001}, DType::f32)};
  ad.out_alias = {0, 1, 2, 3};
  ad.floats = {1e-3f, 0.9f, 0.99f, 1e-8f, 0.1f, 0.19f, 0.0199f};
  ad.tol = tol::transcendental;
  cs.push_back(ad);
  for (const OpCase& c : cs) {
    SCOPED_TRACE(c.name);
    auto want = run_reference(c);
    auto got = run_on(vb(), c);
    for (size_t i = 0; i < got.size(); ++i) {
      std::string d = compare(got[i], want[i], c.tol);
      EXPECT_TRUE(d.empty()) << d;
    }
  }
}

}  // namespace
}  // namespace edgetrain::test
#endif  // EDGETRAIN_HAS_VULKAN
