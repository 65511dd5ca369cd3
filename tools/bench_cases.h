// The benchmark cases of `edgetrain bench` (bench_cases.cpp), separate from the runner that times them
// (bench.cpp). Each case names its op by the catalogue's Op, so the list follows ops.inc.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "edgetrain/graph.h"

namespace edgetrain::cli {

// A fast generator for the cases' random data (the large cases fill GiBs).
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {  // xorshift64*
    s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
    return s * 0x2545F4914F6CDD1Dull;
  }
  float uniform(float lo, float hi) { return lo + (hi - lo) * static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }
};

struct Case {
  Case(Op op_, std::string shape_, std::string unit_, double work_, std::string model_,
       std::function<OpCall(Backend&, Rng&)> make_, std::string label_ = "")
      : op(op_), shape(std::move(shape_)), unit(std::move(unit_)), work(work_), model(std::move(model_)),
        make(std::move(make_)), label(std::move(label_)) {}
  Op op;              // the op timed
  std::string shape;  // "M4096_N2048_K2048": with name(), the id shared with bench/peer_torch.py
  std::string unit;   // "GFLOP/s" or "GB/s"
  double work = 0;    // flops or bytes of one invocation
  std::string model;  // how `work` is counted
  std::function<OpCall(Backend&, Rng&)> make;
  std::string label;  // the id's op part when not the catalogue name (dim_order_copy f32->f32 is "copy")
  std::string name() const { return label.empty() ? op_name(op) : label; }  // what --ops matches
  std::string id() const { return name() + ":" + shape; }
};

// Every case of a size: small (CPU-friendly, <= 512) or realistic (GPUs).
std::vector<Case> bench_cases(bool small);

// "M4096_N2048_K2048" from {{"M", 4096}, {"N", 2048}, {"K", 2048}}.
std::string dims(std::initializer_list<std::pair<const char*, int64_t>> d);

}  // namespace edgetrain::cli
