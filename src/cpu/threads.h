// Parallel loops for the CPU backend.
#pragma once

#include <cstdint>
#include <functional>

namespace edgetrain::cpu {

void set_threads(int n);
int threads();
// Calls body(begin, end) over [0, n) in chunks of at least `grain`, spread over the worker threads.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

}  // namespace edgetrain::cpu
