// Helpers shared by the model tests (test_model.cpp, test_gqa.cpp): side-by-side training of a CPU and a
// device model, and a small text corpus on disk.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "edgetrain/model.h"
#include "edgetrain/trainer.h"
#include "harness/op_case.h"

namespace edgetrain::test {

// The tiny preset in `mode`; a vocab > 0 replaces its vocabulary (a small one keeps the head cheap).
inline ModelConfig tiny_config(TrainMode mode, int64_t vocab = 0) {
  ModelConfig c = ModelConfig::preset("tiny");
  c.mode = mode;
  if (vocab > 0) c.vocab = vocab;
  return c;
}

// Two models, one on the CPU backend and one on a device backend, trained side by side on the same batches:
// the first step's gradients and every step's loss must agree. make_batch(step) returns something with tokens, labels, B and T.
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

// Moves 4-bit linears' masters 10 to 60 scales out (signs kept) and re-derives the codes from them
// (Model::requantize, which does not clamp), as checkpoints of versions before masters were kept in range
// have them after long QAT. keep_codes: only masters whose codes are already saturated (-8 or 7) move, so
// the model stays the same and only its masters stop describing it; otherwise a third of all masters move,
// the codes saturate where they went and the model changes. Returns the share of masters out of range.
inline double plant_master_drift(Model& m, bool keep_codes = false) {
  for (Param& p : m.params()) {
    if (!p.quantized()) continue;
    auto w = m.backend().to_vector<float>(p.value);
    auto s = m.backend().to_vector<float>(p.scales);
    const int64_t N = p.value.shape()[0], K = p.value.shape()[1], gs = m.config().group_size;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        float& x = w[n * K + k];
        const float sc = s[(k / gs) * N + n];
        const uint8_t code = q4::requant_code(x, sc);
        if (keep_codes ? (code == 0 || code == 15) && sc > 0 : (n * 7 + k * 3) % 3 == 0)
          x = std::copysign(static_cast<float>(10 + (n + k) % 50), keep_codes ? static_cast<float>(code) - 8 : x) * sc;
      }
    m.backend().upload(p.value, w.data(), w.size() * sizeof(float));
  }
  m.requantize();
  const q4::RangeStats r = m.range_stats();
  return static_cast<double>(r.outside) / static_cast<double>(r.total);
}

// A 400-line text file in the temp folder, written once per process (named by the pid: CTest runs test
// processes in parallel) and removed when the process exits; its path.
inline std::string small_corpus() {
  struct File {
    std::string path;
    File() : path((std::filesystem::temp_directory_path() /
                   ("edgetrain_test_corpus_" + std::to_string(::getpid()) + ".txt")).string()) {
      std::ofstream f(path);
      const char* lines[] = {"In the beginning God created the heaven and the earth.\n",
                             "And the earth was without form, and void.\n",
                             "And God said, Let there be light: and there was light.\n",
                             "And God saw the light, that it was good.\n"};
      for (int i = 0; i < 400; ++i) f << lines[i % 4];
    }
    ~File() {
      std::error_code ec;
      std::filesystem::remove(path, ec);
    }
  };
  static File file;
  return file.path;
}

// Trainer options for a quick CPU run of `tiny` on small_corpus(): 40 steps, evaluation every 20,
// checkpoints every 10, no progress output.
inline TrainOptions quick_options(const std::string& out) {
  TrainOptions o;
  o.corpus = small_corpus();
  o.out_dir = out;
  o.backend = "cpu";
  o.model = ModelConfig::preset("tiny");
  o.batch = 4;
  o.seq = 32;
  o.optim.lr = 1e-2f;
  o.optim.warmup_steps = 5;
  o.optim.total_steps = 40;
  o.eval_every = 20;
  o.eval_batches = 2;
  o.checkpoint_every = 10;
  o.sample_tokens = 20;
  o.progress = false;
  return o;
}

}  // namespace edgetrain::test
