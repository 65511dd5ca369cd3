// The phases of a training run that need no device (src/train/run.h), each on its own: option resolution
// for --resume and --init, the learning-rate schedule and the loop's cadence, and the training batches.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "edgetrain/backends.h"
#include "edgetrain/checkpoint.h"
#include "harness/model_helpers.h"
#include "harness/temp_files.h"
#include "train/run.h"

namespace edgetrain::test {
namespace {

namespace fs = std::filesystem;
using namespace edgetrain::training;

// A finished 3-step run of `tiny` with options unlike the defaults, to resume or --init from.
TrainOptions recorded_run(const std::string& out) {
  TrainOptions o = quick_options(out);
  o.optim.total_steps = 3;
  o.batch = 3;
  o.seq = 24;
  o.accum = 2;
  o.seed = 77;
  o.optim.lr = 5e-3f;
  o.optim.warmup_steps = 2;
  o.optim.weight_decay = 0.05f;
  o.eval_every = 1000;
  o.sample_tokens = 0;
  o.model.group_size = 64;
  train(o);
  return o;
}

TEST(TrainRun, ResumeTakesTheRecordedOptionsAndOnlyTheStepBudgetGrows) {
  TempDir dir("run", "resume");
  const TrainOptions rec = recorded_run(dir.str());
  TrainOptions given;  // what `train --resume --out DIR --steps N` passes: defaults everywhere else
  given.out_dir = dir.str();
  given.resume = true;
  given.backend = "cpu";
  given.optim.total_steps = 2;
  TrainOptions r = resolve_options(given);
  EXPECT_EQ(r.corpus, rec.corpus);
  EXPECT_EQ(r.tokenizer, "bytes");
  EXPECT_EQ(r.batch, 3);
  EXPECT_EQ(r.seq, 24);
  EXPECT_EQ(r.accum, 2);
  EXPECT_EQ(r.seed, 77u);
  EXPECT_EQ(r.optim.lr, 5e-3f);
  EXPECT_EQ(r.optim.warmup_steps, 2);
  EXPECT_EQ(r.optim.weight_decay, 0.05f);
  EXPECT_EQ(r.optim.total_steps, 3) << "a smaller --steps must not shrink the recorded budget";
  EXPECT_EQ(r.model.group_size, 64);
  EXPECT_EQ(r.model.to_json(), read_checkpoint_config(checkpoint_path(r)).to_json());
  given.optim.total_steps = 9;
  EXPECT_EQ(resolve_options(given).optim.total_steps, 9);

  given.out_dir = dir.str() + "/nowhere";
  try {
    resolve_options(given);
    ADD_FAILURE() << "--resume without a checkpoint was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--resume: no checkpoint at"), std::string::npos) << e.what();
  }
}

TEST(TrainRun, InitTakesTheFilesShapeWithThisRunsModeAndLora) {
  TempDir dir("run", "init");
  const TrainOptions rec = recorded_run(dir.str() + "/base");
  TrainOptions given;
  given.init = checkpoint_path(rec);
  given.corpus = rec.corpus;
  given.out_dir = dir.str() + "/ft";
  given.seq = 0;  // the CLI's "not given"
  given.model = ModelConfig::preset("mini");  // the CLI's default preset: the file's shape wins
  given.model.mode = TrainMode::qlora;
  given.model.group_size = 32;
  given.model.lora_rank = 4;
  given.model.lora_targets = "q,v";
  const TrainOptions r = resolve_options(given);
  const ModelConfig file = read_checkpoint_config(given.init);
  EXPECT_EQ(r.model.dim, file.dim);
  EXPECT_EQ(r.model.n_layers, file.n_layers);
  EXPECT_EQ(r.model.vocab, file.vocab);
  EXPECT_EQ(r.model.mode, TrainMode::qlora);
  EXPECT_EQ(r.model.group_size, 32);
  EXPECT_EQ(r.model.lora_rank, 4);
  EXPECT_EQ(r.model.lora_targets, "q,v");
  EXPECT_EQ(r.seq, std::min<int64_t>(128, file.max_seq));
  EXPECT_EQ(r.batch, given.batch) << "--init takes weights, not the training options";

  given.resume = true;
  try {
    resolve_options(given);
    ADD_FAILURE() << "--resume with --init was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--resume and --init cannot be combined"), std::string::npos) << e.what();
  }
}

// Warmup rises linearly to the peak, then a cosine falls to lr * min_lr_ratio at the last step.
TEST(TrainRun, LearningRateScheduleWarmsUpThenFollowsTheCosine) {
  OptimConfig s;
  s.lr = 1e-2f;
  s.min_lr_ratio = 0.1f;
  s.warmup_steps = 10;
  s.total_steps = 110;
  EXPECT_FLOAT_EQ(s.lr_at(1), 1e-3f);
  EXPECT_FLOAT_EQ(s.lr_at(5), 5e-3f);
  EXPECT_FLOAT_EQ(s.lr_at(10), 1e-2f);
  EXPECT_NEAR(s.lr_at(60), 1e-2 * (0.1 + 0.9 * 0.5), 1e-8);  // half way through the decay
  EXPECT_FLOAT_EQ(s.lr_at(110), 1e-3f);
  EXPECT_FLOAT_EQ(s.lr_at(500), 1e-3f) << "past the budget the floor holds";
  for (int64_t k = 11; k <= 110; ++k) EXPECT_LE(s.lr_at(k), s.lr_at(k - 1)) << "step " << k;
  s.warmup_steps = 0;
  EXPECT_FLOAT_EQ(s.lr_at(0), 1e-2f);
}

// Evaluations and checkpoints fall on multiples of their period and on the last step, whichever step the
// run started from: a resumed run evaluates and saves where the uninterrupted one did.
TEST(TrainRun, CadenceIsEveryNStepsAndTheLast) {
  TrainOptions o;
  o.optim.total_steps = 25;
  o.eval_every = 10;
  o.checkpoint_every = 7;
  o.log_every = 4;
  const Cadence c(o);
  std::vector<int64_t> evals, saves, logs;
  for (int64_t s = 1; s <= 25; ++s) {
    if (c.evaluates(s)) evals.push_back(s);
    if (c.checkpoints(s)) saves.push_back(s);
    if (c.logs(s)) logs.push_back(s);
  }
  EXPECT_EQ(evals, (std::vector<int64_t>{10, 20, 25}));
  EXPECT_EQ(saves, (std::vector<int64_t>{7, 14, 21, 25}));
  EXPECT_EQ(logs, (std::vector<int64_t>{4, 8, 12, 16, 20, 24}));
}

// The batches of a step depend on (seed, step, micro-batch) only, differ between those, and never read a
// token of the validation split. The corpus is numbered lines ("000123\n"), so a window's first full number
// says where it starts.
TEST(TrainRun, TrainingBatchesAreKeyedByStepAndStayInTheTrainingSplit) {
  TempDir dir("run", "batches");
  fs::create_directories(dir.path);
  const std::string corpus = dir.str() + "/numbers.txt";
  {
    std::ofstream f(corpus);
    char line[16];
    for (int i = 0; i < 3000; ++i) std::snprintf(line, sizeof line, "%06d\n", i), f << line;
  }
  TrainOptions o = quick_options(dir.str() + "/run");
  o.corpus = corpus;
  o.seq = 32;
  o.batch = 8;
  o.accum = 2;
  o = resolve_options(o);
  RunData d = open_data(o);
  ASSERT_EQ(d.size, 3000 * 7);
  ASSERT_GT(d.val_begin, o.seq + 1);
  std::vector<int32_t> t1, l1, t2, l2;
  std::set<std::vector<int32_t>> seen;
  int64_t max_end = 0;
  for (int64_t step = 1; step <= 300; ++step)
    for (int64_t micro = 0; micro < o.accum; ++micro) {
      training_batch(d, o, step, micro, t1, l1);
      ASSERT_EQ(t1.size(), static_cast<size_t>(o.batch * o.seq));
      seen.insert(t1);
      for (int64_t b = 0; b < o.batch; ++b) {
        const int32_t* w = &t1[static_cast<size_t>(b * o.seq)];
        int64_t nl = 0;
        while (w[nl] != '\n') ++nl;
        int64_t line = 0;
        for (int64_t k = nl + 1; k < nl + 7; ++k) line = line * 10 + (w[k] - '0');
        const int64_t start = line * 7 - nl - 1;
        for (int64_t t = 0; t < o.seq; ++t) {
          ASSERT_EQ(w[t], d.tokens->at(start + t));
          ASSERT_EQ(l1[static_cast<size_t>(b * o.seq + t)], d.tokens->at(start + t + 1)) << "labels: the next tokens";
        }
        max_end = std::max(max_end, start + o.seq);  // the position of the window's last label
      }
    }
  EXPECT_EQ(seen.size(), 600u) << "two (step, micro-batch) pairs gave the same batch";
  EXPECT_LT(max_end, d.val_begin) << "a window read the validation split";
  EXPECT_GT(max_end, d.val_begin - 200) << "the windows do not cover the training split";
  // The same step again, after others: the same batch.
  training_batch(d, o, 17, 1, t1, l1);
  training_batch(d, o, 3, 0, t2, l2);
  training_batch(d, o, 17, 1, t2, l2);
  EXPECT_EQ(t1, t2);
  EXPECT_EQ(l1, l2);
}

// TrainOptions::stop (the CLI's SIGINT/SIGTERM flag), set before the run: the first step completes, the
// checkpoint holds it, and the result says what stopped the run.
TEST(TrainRun, StopFlagEndsTheRunAfterTheStepUnderWay) {
  TempDir dir("run", "stop");
  TrainOptions o = quick_options(dir.str());
  o.checkpoint_every = 1000;
  std::atomic<int> stop{15};
  o.stop = &stop;
  const TrainResult r = train(o);
  EXPECT_EQ(r.stopped_by, 15);
  EXPECT_EQ(r.steps, 1);
  EXPECT_TRUE(r.sample.empty()) << "a stopped run writes no sample";
  auto backend = make_cpu_backend();
  Model m(*backend, read_checkpoint_config(r.checkpoint));
  load_checkpoint(r.checkpoint, m);
  EXPECT_EQ(m.steps_done, 1);
}

}  // namespace
}  // namespace edgetrain::test
