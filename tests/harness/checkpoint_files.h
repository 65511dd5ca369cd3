// Checkpoint files as the fault tests handle them (test_reliability*.cpp): every F32 tensor finite, and a
// value poked into one tensor of a saved file.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "edgetrain/safetensors.h"

namespace edgetrain::test {

// Every F32 tensor of the file is finite (masters, scales, AdamW moments).
inline void expect_all_finite(const std::string& path) {
  auto r = safetensors::Reader::open(path);
  int checked = 0;
  for (const auto& t : r.tensors()) {
    if (t.dtype != "F32") continue;
    std::vector<float> v = r.to_f32(t.name);
    for (size_t i = 0; i < v.size(); ++i)
      ASSERT_TRUE(std::isfinite(v[i])) << path << ": tensor " << t.name << "[" << i << "] = " << v[i];
    ++checked;
  }
  EXPECT_GT(checked, 5);
}

// Rewrites the safetensors file at `path` with `value` poked into tensor `name` at index 1.
inline void poke(const std::string& path, const std::string& name, float value) {
  auto r = safetensors::Reader::open(path);
  safetensors::Writer w;
  for (const auto& [k, v] : r.metadata()) w.set_metadata(k, v);
  for (const auto& t : r.tensors()) {
    std::vector<uint8_t> bytes(r.data(t.name), r.data(t.name) + t.nbytes());
    if (t.name == name) {
      EXPECT_EQ(t.dtype, "F32");
      EXPECT_GE(t.nbytes(), 8u);
      std::memcpy(bytes.data() + 4, &value, 4);
    }
    w.add_owned(t.name, t.dtype, t.shape, std::move(bytes));
  }
  w.save(path);
}

}  // namespace edgetrain::test
