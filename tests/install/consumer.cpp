// Uses the installed public API: a CPU backend, one op through Graph, checked against a hand result.
#include <cstdio>

#include "edgetrain/backends.h"
#include "edgetrain/graph.h"

int main() {
  auto b = edgetrain::make_cpu_backend();
  edgetrain::Graph g(*b);
  auto a = b->from_vector(edgetrain::Shape{2, 2}, edgetrain::DType::f32, std::vector<float>{1, 2, 3, 4});
  auto c = g.mm(a, a);  // [[7, 10], [15, 22]]
  auto v = b->to_vector<float>(c);
  bool ok = v == std::vector<float>{7, 10, 15, 22};
  std::printf("consumer: %s (%zu ops in the catalogue)\n", ok ? "ok" : "WRONG", edgetrain::all_ops().size());
  return ok ? 0 : 1;
}
