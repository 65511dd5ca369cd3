#!/usr/bin/env bash
# One device call on the H200 (`device` tool): correctness of the Vulkan kernels (tensor-core path forced on
# every shape, then the defaults), the kernel benchmarks against PyTorch measured in the same call, and the
# base-preset training step. Writes everything under $OUT. Usage (from the repository root, with .gl/ and
# .devrun/ carried): source bench/h200/env.sh; bash bench/h200/run_perf.sh [tests|bench|step|all]...
set -u
what=${*:-all}
has() { [[ " $what " == *" $1 "* || " $what " == *" all "* ]]; }
B=.devrun
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
$B/edgetrain info > "$OUT/info.txt" 2>&1
if has tests; then
  EDGETRAIN_VK_COOPMAT=all EDGETRAIN_TEST_BACKENDS=cpu,vulkan timeout 240 $B/edgetrain_tests \
    --gtest_filter='Catalogue*:Backends*:Model.*:Misuse*' > "$OUT/tests_coopmat_all.txt" 2>&1
  echo "tests coopmat=all rc=$?" | tee -a "$OUT/summary.txt"
  EDGETRAIN_TEST_BACKENDS=cpu,vulkan,webgpu timeout 300 $B/edgetrain_tests \
    --gtest_filter='Catalogue*:Backends*:VulkanRuntime*:WebGpu*:Model.*:ModelGqa.*:Q4*:Misuse*:CpuFast*' > "$OUT/tests_default.txt" 2>&1
  echo "tests default rc=$?" | tee -a "$OUT/summary.txt"
  EDGETRAIN_WG_GEMM_BIG=all EDGETRAIN_TEST_BACKENDS=cpu,webgpu timeout 200 $B/edgetrain_tests \
    --gtest_filter='Catalogue*webgpu*:Backends*webgpu*' > "$OUT/tests_webgpu_big_all.txt" 2>&1
  echo "tests webgpu big-gemm=all rc=$?" | tee -a "$OUT/summary.txt"
fi
if has bench; then
  timeout 200 python3 $B/peer_torch.py --out "$OUT/peer.json" --size realistic > "$OUT/peer.txt" 2>&1
  echo "peer rc=$?" | tee -a "$OUT/summary.txt"
  timeout 200 $B/edgetrain bench --backend vulkan --size realistic --peer "$OUT/peer.json" --json "$OUT/vulkan.json" \
    > "$OUT/vulkan_bench.txt" 2>&1
  echo "vulkan bench rc=$?" | tee -a "$OUT/summary.txt"
  EDGETRAIN_VK_COOPMAT=0 timeout 120 $B/edgetrain bench --backend vulkan --size realistic --ops mm,linear_dW,linear_q4gsw,linear_q4gsw_backward \
    --json "$OUT/vulkan_fp32.json" > "$OUT/vulkan_fp32_bench.txt" 2>&1
  echo "vulkan fp32-only bench rc=$?" | tee -a "$OUT/summary.txt"
fi
if has webgpu; then
  timeout 200 $B/edgetrain bench --backend webgpu --size realistic --json "$OUT/webgpu.json" > "$OUT/webgpu_bench.txt" 2>&1
  echo "webgpu bench rc=$?" | tee -a "$OUT/summary.txt"
fi
if has step; then
  EDGETRAIN_PROFILE="$OUT/step_profile.txt" timeout 200 $B/edgetrain bench --backend vulkan --ops none --step base --mode qat \
    --batch 16 --seq 512 --steps 8 --json "$OUT/step.json" > "$OUT/step.txt" 2>&1
  echo "step rc=$?" | tee -a "$OUT/summary.txt"
fi
if has peerstep; then
  timeout 400 python3 $B/peer_torch.py --out "$OUT/peer_step.json" --cases none --step base --batch 16 --seq 512 --steps 8 \
    --compile > "$OUT/peer_step.txt" 2>&1
  echo "peer step rc=$?" | tee -a "$OUT/summary.txt"
fi
# The device tool returns a limited number of files: everything also goes into one archive.
tar -C "$OUT" -czf /tmp/run_perf.tgz . && mv /tmp/run_perf.tgz "$OUT/run_perf.tgz"
