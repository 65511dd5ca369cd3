// Run-time choice of the CPU kernels' instruction set (see isa.h).
#include "cpu/isa.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace edgetrain::cpu {
namespace {

bool cpu_has_avx512() {
#if defined(EDGETRAIN_AVX512_KERNELS) && (defined(__GNUC__) || defined(__clang__))
  // libgcc's checks include the OS's XSAVE state (XCR0): AVX-512 registers the kernel does not save are
  // reported as absent.
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}

bool env_allows() {
  const char* v = std::getenv("EDGETRAIN_CPU_AVX512");
  return v == nullptr || std::strcmp(v, "0") != 0;
}

const bool g_supported = cpu_has_avx512();
std::atomic<bool> g_on{g_supported && env_allows()};

}  // namespace

bool use_avx512() { return g_on.load(std::memory_order_relaxed); }
void set_avx512(bool on) { g_on.store(on && g_supported); }
const char* isa_name() { return use_avx512() ? "AVX-512" : "portable"; }

}  // namespace edgetrain::cpu
