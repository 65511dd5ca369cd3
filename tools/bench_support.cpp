// The shared parts of `edgetrain bench` (bench.h): replay timing and statistics, the peer's figures, the report.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>

#include "edgetrain/error.h"
#include "tools/bench.h"

namespace edgetrain::cli::bench {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

Stats stats(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.n = static_cast<int>(v.size());
  s.min = v.front();
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  return s;
}

namespace {

// A GPU left idle for about a second (a case's inputs made on the host, its programs recorded) drops its
// clocks, and after load resumes it takes ~1.5-2 s to come back to full power; replays timed in between run
// up to 3x slow (H200, twenty-seventh session, call 5: the SM clock at 345 MHz ~1 s after the last work,
// the power at full load ~1.7 s after it resumed; `mm` 4096^3 fp16, the first case, 1.32 ms median vs 0.61
// minimum, on the device). So after a gap of more than kIdleGap since the last replay the program is replayed,
// untimed, for kRamp first. Only on a hardware GPU (set_ramp_after_idle): the CPU and software devices
// have no such governor at this scale.
constexpr double kIdleGap = 0.5, kRamp = 2.0;
Clock::time_point last_replay_end{};
bool ramp_on = false;

void ramp_after_idle(Program& prog) {
  if (!ramp_on) return;
  if (last_replay_end != Clock::time_point{} && seconds_since(last_replay_end) < kIdleGap) return;
  const auto t0 = Clock::now();
  while (seconds_since(t0) < kRamp) prog.replay();
}

}  // namespace

void set_ramp_after_idle(bool on) { ramp_on = on; }

std::vector<double> time_replays(Program& prog, int warmup, int reps, double budget, std::vector<double>* device) {
  ramp_after_idle(prog);
  auto start = Clock::now();
  for (int i = 0; i < warmup && (i == 0 || seconds_since(start) < budget / 4); ++i) prog.replay();
  std::vector<double> t;
  start = Clock::now();
  for (int i = 0; i < reps; ++i) {
    if (i >= 1 && seconds_since(start) > budget) break;
    auto t0 = Clock::now();
    prog.replay();
    t.push_back(seconds_since(t0));
    if (device && prog.device_seconds() >= 0) device->push_back(prog.device_seconds());
  }
  last_replay_end = Clock::now();
  return t;
}

const json* Peer::op(const std::string& id) const {
  if (!loaded || !doc.contains("cases") || !doc["cases"].contains(id)) return nullptr;
  const json& e = doc["cases"][id];
  return e.contains("ms") && e["ms"].is_number() ? &e : nullptr;
}
const json* Peer::step(const std::string& id) const {
  if (!loaded || !doc.contains("step") || !doc["step"].contains(id)) return nullptr;
  return &doc["step"][id];
}

Peer load_peer(const std::string& file) {
  Peer p;
  if (file.empty()) return p;
  std::ifstream in(file);
  ET_CHECK_KIND(ErrorKind::io, in.good(), "bench: cannot read --peer '", file, "'");
  try {
    p.doc = json::parse(in);
  } catch (const std::exception& e) {
    fail("bench: --peer '", file, "' is not valid JSON: ", e.what());
  }
  p.loaded = true;
  return p;
}

void Report::save() const {
  if (file.empty()) return;
  std::ofstream out(file + ".tmp");
  out << doc.dump(2) << "\n";
  out.close();
  ET_CHECK_KIND(ErrorKind::io, out.good(), "bench: cannot write '", file, "'");
  std::rename((file + ".tmp").c_str(), file.c_str());
}

}  // namespace edgetrain::cli::bench
