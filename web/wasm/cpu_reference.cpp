// The browser build's CPU backend runs the reference kernels only: the fast kernels need OpenBLAS and
// threads (src/cpu/*_kernels.cpp, threads.cpp are left out of this build), and a page without
// SharedArrayBuffer has neither. cpu_backend.cpp asks fast_kernel() per op; here the answer is always
// "none", and the parallel loops run on the calling thread.
#include "cpu/cpu_backend.h"
#include "cpu/threads.h"

namespace edgetrain::cpu {

Kernel fast_kernel(Op) { return nullptr; }
std::string fast_kernels_name() { return "reference kernels"; }

void set_threads(int) {}
int threads() { return 1; }
void parallel_for(int64_t n, int64_t, const std::function<void(int64_t, int64_t)>& body) {
  if (n > 0) body(0, n);
}

}  // namespace edgetrain::cpu
