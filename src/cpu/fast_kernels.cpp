// Registry of the CPU backend's fast kernels (threads + OpenBLAS). Ops without one run the reference.
#include "cpu/cpu_backend.h"

namespace edgetrain::cpu {

Kernel fast_kernel(Op op) {
  switch (op) {
    default:
      return nullptr;
  }
}

}  // namespace edgetrain::cpu
