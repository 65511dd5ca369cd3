// The parts of `edgetrain bench` that its op timing (bench.cpp) and its training-step timing
// (bench_step.cpp) share: the flags, replay timing and statistics, the peer's figures and the JSON report.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "edgetrain/backend.h"
#include "edgetrain/precision.h"

namespace edgetrain::cli::bench {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

struct Flags {
  std::string backend = "auto", device, size, ops, json_file, peer_file, step, mode = "qat", precision = "fp32";
  int reps = 20, warmup = 3, copies = 0, max_copies = 50, threads = 0;
  double target_ms = 25, case_seconds = 20, step_seconds = 120;
  int64_t batch = 16, seq = 0, steps = 20, group_size = 32, vocab = 0;
  bool list = false, checkpoint_activations = false;
};

double seconds_since(Clock::time_point t0);
// CPU time of the whole process (every thread): on a shared machine it moves much less than wall-clock time.
double process_cpu_seconds();

struct Stats {
  double median = 0, min = 0;
  int n = 0;
};
Stats stats(std::vector<double> v);

// Times `reps` replays of prog (after `warmup`, and after 2 s of untimed replays where the GPU has been idle
// for over half a second since the last timing: its clocks and power come back that slowly), stopping
// early once `budget` seconds are spent (at least one timed replay). Returns seconds per replay (wall time:
// submission, the device's work, the wait); with `device`, also the device's own time of each replay where
// the backend tells it (Program::device_seconds).
std::vector<double> time_replays(Program& prog, int warmup, int reps, double budget,
                                 std::vector<double>* device = nullptr);
// Whether time_replays keeps the device busy for 2 s after an idle gap (a hardware GPU's clocks; off by default).
void set_ramp_after_idle(bool on);

// A PyTorch peer's figures (bench/peer_torch.py), by case id.
struct Peer {
  json doc;
  bool loaded = false;
  const json* op(const std::string& id) const;
  const json* step(const std::string& id) const;
};
Peer load_peer(const std::string& file);

// Every number of the run, rewritten to `file` (when given) after each case.
struct Report {
  json doc;
  std::string file;
  void save() const;
};

// Times training steps of f.step (bench_step.cpp).
void run_step(Backend& b, const Flags& f, const Peer& peer, Report& rep, Precision precision);

}  // namespace edgetrain::cli::bench
