// The cooperative-matrix-2 kernels (src/vulkan/shaders/cm2/) on the catalogue's f16 cases: the attention
// forward (attention_cm2.comp) and the fp16 GEMM (gemm_cm2.comp, forced onto every product and split-K
// wherever allowed), against the CPU reference of the same call and of the fp32 call, with the catalogue's
// tolerances. Runs where the device has cooperative matrices 2 and the build has the kernel (an
// H200 with glslang 15 in .deps); skipped elsewhere (lavapipe has none). Its backend is made without the
// validation layer: Debian 12's layer (1.3.239) predates VK_NV_cooperative_matrix2 and cannot validate the
// kernel's SPIR-V; every other Vulkan test keeps the layer on. The profiler's report shows the kernel ran.
#include <gtest/gtest.h>

#include "edgetrain/backends.h"
#include "harness/op_case.h"
#include "harness/scoped_env.h"

#ifdef EDGETRAIN_HAS_VULKAN
#include "vulkan/profile.h"
#include "vulkan/program.h"

namespace edgetrain::test {
namespace {

// A backend with cooperative matrices 2 (no validation layer, see above) that profiles its kernels into
// `profile`; null where there is none.
std::unique_ptr<Backend> cm2_backend(const std::string& profile) {
  if (!vulkan_usable()) return nullptr;
  std::unique_ptr<Backend> be = make_profiled_backend("vulkan", ::testing::TempDir() + profile);
  if (!dynamic_cast<vk::VulkanBackend&>(*be).context().limits().cm2) return nullptr;
  return be;
}
#define CM2_OR_SKIP(be)                                                                        \
  if (!(be)) GTEST_SKIP() << "no Vulkan device with cooperative matrices 2 (or the build has no " \
                             "glslang 15: scripts/setup.sh)";

// Runs every f16 twin of op's cases on be against the reference of the same call and of the fp32 call;
// returns how many ran.
int check_f16_cases(Backend& be, Op op) {
  int ran = 0;
  for (const OpCase& c : cases_for(op)) {
    if (!c.f16_vs_fp32) continue;  // the f16 twins only
    SCOPED_TRACE(c.name);
    expect_matches_reference(be, c);
    ++ran;
  }
  return ran;
}

TEST(AttentionCm2, CatalogueF16Cases) {
  std::unique_ptr<Backend> be = cm2_backend("edgetrain_cm2_attention_profile.txt");
  CM2_OR_SKIP(be)
  int eligible = 0;
  for (const OpCase& c : cases_for(Op::attention))
    if (c.f16_vs_fp32) eligible += c.in[0].shape()[3] % 16 == 0 ? 1 : 0;  // head dims the kernel takes
  check_f16_cases(*be, Op::attention);
  EXPECT_GE(eligible, 15);
  const std::string report = dynamic_cast<vk::VulkanBackend&>(*be).profiler()->report();
  EXPECT_NE(report.find("attention_cm2"), std::string::npos) << report;
}

// Every product with the f16 flag (mm, bmm, linear, linear_dW and the 4-bit GEMMs): the tensor-core path
// forced onto every shape (EDGETRAIN_VK_COOPMAT=all) takes gemm_cm2.comp, with split-K wherever allowed
// (EDGETRAIN_VK_GEMM_SPLITK=all): k-major and row-major parts, batches, bias, alpha, accumulation, partial
// tiles, whole tiles (tensor stores); a low-rank adapter's x A^T and dy B on it, its other narrow products on
// gemm_narrow.comp and gemm_shallow.comp.
TEST(GemmCm2, CatalogueF16Cases) {
  ScopedEnv coop("EDGETRAIN_VK_COOPMAT", "all"), split("EDGETRAIN_VK_GEMM_SPLITK", "all");
  std::unique_ptr<Backend> be = cm2_backend("edgetrain_cm2_gemm_profile.txt");
  CM2_OR_SKIP(be)
  int ran = 0;
  for (const OpInfo& info : all_ops())
    if (has_f16_flag(info.op) && info.op != Op::attention && info.op != Op::attention_backward) {
      SCOPED_TRACE(info.name);
      ran += check_f16_cases(*be, info.op);
    }
  EXPECT_GE(ran, 40);
  const std::string report = dynamic_cast<vk::VulkanBackend&>(*be).profiler()->report();
  EXPECT_NE(report.find("gemm_cm2"), std::string::npos) << report;
  EXPECT_EQ(report.find("gemm_coop "), std::string::npos) << "every product took gemm_cm2.comp:\n" << report;
}

}  // namespace
}  // namespace edgetrain::test
#endif
