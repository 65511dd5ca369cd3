#!/usr/bin/env bash
# The tensor-core GEMMs through VK_KHR_cooperative_matrix (khr/gemm_coop_khr.comp) under CI: Mesa 26's
# lavapipe (.deps/mesa26, fetched by scripts/setup.sh from Debian 13 backports) offers the extension with
# 8x8x8 fp16 fragments in subgroups of 8, emulated on the CPU; the tensor-core path is forced on every
# product (EDGETRAIN_VK_COOPMAT=all) and the Vulkan catalogue, the backends' model and fp16 training tests,
# and the runtime tests run against the CPU reference, then the products with split-K forced, with Debian
# 13's validation layer on. Then WebGPU through Dawn on the same driver: its precision rule and the fp16
# products on subgroup matrices.
# Usage: khr_coop.sh EDGETRAIN_TESTS_BINARY. Exit 77 (skipped) where .deps/mesa26 is absent.
set -euo pipefail
tests=$1
run=${EDGETRAIN_DEPS:-$(cd "$(dirname "$0")/.." && pwd)/.deps}/mesa26/run
if [[ ! -x $run ]]; then
  echo "khr_coop: $run is absent (scripts/setup.sh could not fetch Mesa 26): skipped"
  exit 77
fi
export EDGETRAIN_VK_COOPMAT=all EDGETRAIN_TEST_BACKENDS=cpu,vulkan
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rc=0
"$run" "$tests" --gtest_filter='Catalogue*vulkan*:Backends*vulkan*:VulkanRuntime.*:F16*:Model.DeviceBackendsMatchCpu:*Fp16*:Precision.*' \
  2>&1 | tee "$log" || rc=$?
[[ $rc == 0 ]] || exit "$rc"
# The products again with split-K wherever allowed (up to 4 slices, then gemm_splitk_reduce.comp).
EDGETRAIN_VK_GEMM_SPLITK=all "$run" "$tests" \
  --gtest_filter='Catalogue*vulkan_mm:Catalogue*vulkan_bmm:Catalogue*vulkan_linear*'
# WebGPU through Dawn on the same lavapipe: an adapter with shader-f16, where --precision fp16 is taken
# (SwiftShader, the suite's WebGPU device, has none: fp32 there), and with f16 subgroup matrices (8x8x8),
# where the fp16 products run gemm_coop.wgsl, forced on every one, against the reference.
wlog=$(mktemp)
EDGETRAIN_WG_COOPMAT=all EDGETRAIN_TEST_BACKENDS=cpu,webgpu "$run" "$tests" \
  --gtest_filter='Precision.WebGpuTakesFp16OnlyWithShaderF16:WebGpuRuntime.Fp16Products*:Catalogue*webgpu_mm:Catalogue*webgpu_bmm:Catalogue*webgpu_linear*' \
  2>&1 | tee "$wlog" || rc=$?
[[ $rc == 0 ]] || exit "$rc"
if ! grep -q '^\[       OK \] WebGpuRuntime.Fp16ProductsTakeSubgroupMatricesWhereOffered' "$wlog"; then
  echo "khr_coop: Dawn offered no f16 subgroup matrices on Mesa 26's lavapipe: gemm_coop.wgsl was not tested"
  exit 1
fi
rm -f "$wlog"
# The path must be the one tested: this test runs only where the tensor-core GEMMs are taken (and would be
# skipped on a driver without the extension).
if ! grep -q '^\[       OK \] VulkanRuntime.StagedOperandIsReusedUntilItsSourceChanges' "$log"; then
  echo "khr_coop: the tensor-core GEMM path was not taken on $("$run" "$(dirname "$tests")/../edgetrain" info 2>&1 | grep -m1 'driver' || echo 'the device')"
  exit 1
fi
echo "khr_coop: the KHR tensor-core GEMMs passed on Mesa 26's lavapipe"
