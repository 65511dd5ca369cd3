// Two models, one on the CPU backend and one on a device backend, trained side by side on the same batches:
// the first step's gradients and every step's loss must agree. Shared by the model tests (test_model.cpp,
// test_gqa.cpp).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "edgetrain/model.h"
#include "harness/op_case.h"

namespace edgetrain::test {

// make_batch(step) returns something with tokens, labels, B and T.
template <class MakeBatch>
void expect_models_train_alike(Model& cpu, Model& dev, int steps, MakeBatch make_batch) {
  OptimConfig opt;
  opt.lr = 1e-2f;
  opt.warmup_steps = 0;
  opt.total_steps = steps;
  for (int step = 1; step <= steps; ++step) {
    auto b = make_batch(step);
    if (step == 1) {
      auto ga = cpu.gradients(b.tokens, b.labels, b.B, b.T), gd = dev.gradients(b.tokens, b.labels, b.B, b.T);
      for (auto& [pname, g] : ga) {
        HostTensor x = HostTensor::from(Shape{static_cast<int64_t>(g.size())}, DType::f32, gd.at(pname));
        HostTensor y = HostTensor::from(Shape{static_cast<int64_t>(g.size())}, DType::f32, g);
        std::string diff = compare(x, y, Tolerance{1e-5, 1e-3});
        EXPECT_TRUE(diff.empty()) << pname << ":\n" << diff;
      }
    }
    int64_t valid = 0;
    for (int32_t l : b.labels) valid += l >= 0;
    float la = cpu.accumulate(b.tokens, b.labels, b.B, b.T, valid);
    float ld = dev.accumulate(b.tokens, b.labels, b.B, b.T, valid);
    EXPECT_NEAR(ld, la, 1e-4 + 1e-4 * std::fabs(la)) << "step " << step;
    cpu.update(opt, step);
    dev.update(opt, step);
  }
}

}  // namespace edgetrain::test
