// Which instruction-set path the CPU fast kernels take. The library is built for baseline x86-64 (or any
// other target); kernels written for AVX-512 live in their own files (avx512_*.cpp, compiled with AVX-512
// enabled, declared in avx512.h) and run only where the CPU and the OS support AVX-512 — checked once at run
// time. Elsewhere the portable kernels (4-lane vectors, OpenBLAS) run.
#pragma once

namespace edgetrain::cpu {

// True when the AVX-512 kernels are built in, the CPU has AVX-512 F/BW/DQ/VL, and neither the environment
// (EDGETRAIN_CPU_AVX512=0) nor set_avx512(false) turned them off.
bool use_avx512();
// Tests and measurements: run the portable kernels on an AVX-512 machine (false), or go back to what the
// CPU supports (true; has no effect where AVX-512 is absent).
void set_avx512(bool on);
// What the CPU path uses, for device names and reports: "AVX-512" or "portable".
const char* isa_name();

}  // namespace edgetrain::cpu
