// The cooperative-matrix-2 attention forward (src/vulkan/shaders/cm2/attention_cm2.comp) on the attention
// catalogue's f16 cases, against the CPU reference of the same call and of the fp32 call, with the
// catalogue's tolerances. Runs where the device has cooperative matrices 2 and the build has the kernel (an
// H200 with glslang 15 in .deps); skipped elsewhere (lavapipe has none). Its backend is made without the
// validation layer: Debian 12's layer (1.3.239) predates VK_NV_cooperative_matrix2 and cannot validate the
// kernel's SPIR-V; every other Vulkan test keeps the layer on. The profiler's report shows the kernel ran.
#include <gtest/gtest.h>

#include "edgetrain/backends.h"
#include "harness/op_case.h"

#ifdef EDGETRAIN_HAS_VULKAN
#include "vulkan/profile.h"
#include "vulkan/program.h"

namespace edgetrain::test {
namespace {

TEST(AttentionCm2, CatalogueF16Cases) {
  if (!vulkan_usable()) GTEST_SKIP() << "no usable Vulkan device";
  // No validation layer, see above.
  std::unique_ptr<Backend> be = make_profiled_backend("vulkan", ::testing::TempDir() + "edgetrain_cm2_profile.txt");
  auto& vb = dynamic_cast<vk::VulkanBackend&>(*be);
  if (!vb.context().limits().cm2)
    GTEST_SKIP() << "no cooperative matrices 2 on " << be->device_name()
                 << " (or the build has no glslang 15: scripts/setup.sh)";
  int eligible = 0;
  for (const OpCase& c : cases_for(Op::attention)) {
    if (!c.f16_vs_fp32) continue;  // the f16 twins only
    SCOPED_TRACE(c.name);
    eligible += c.in[0].shape()[3] % 16 == 0 ? 1 : 0;  // head dims the kernel takes; others keep the old path
    const auto got = run_on(*be, c);
    const auto want = run_reference(c);
    OpCase fp32 = c;
    fp32.ints.pop_back();
    const auto want32 = run_reference(fp32);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      const std::string diff = compare(got[i], want[i], c.tol);
      EXPECT_TRUE(diff.empty()) << "output " << i << " of " << c.name << ":\n" << diff;
      const std::string diff32 = compare(got[i], want32[i], *c.f16_vs_fp32);
      EXPECT_TRUE(diff32.empty()) << "output " << i << " of " << c.name << " against the fp32 call:\n" << diff32;
    }
  }
  EXPECT_GE(eligible, 15);
  const std::string report = vb.profiler()->report();
  EXPECT_NE(report.find("attention_cm2"), std::string::npos) << report;
}

}  // namespace
}  // namespace edgetrain::test
#endif
