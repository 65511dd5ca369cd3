// GPU timestamp profiling of Vulkan programs, on only when env EDGETRAIN_PROFILE names a file (or "-" for
// stderr): a program brackets every dispatch with two timestamps, and after each replay keeps the measured
// times in its ProgramProfile; the report gives each dispatch's median over the latest replays, leaving out
// a program's first replay once there is a second (it touches memory for the first time, and the next ones
// may still be slower: an H200's base step 215, 88, then 53 ms). The Profiler writes the per-kernel tables
// (at backend destruction, and to a file at most once a second while replays run). When the variable is unset no Profiler exists and
// programs record and do exactly what they would without this file. EDGETRAIN_PROFILE_ORDER=1 adds every
// dispatch of each program in the order it runs (where a step's time goes, call by call).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "vulkan/context.h"

namespace edgetrain::vk {

// Measured times of one program: every replay's length, and each dispatch's time in the latest replays.
struct ProgramProfile {
  std::string label;              // "program of 1234 calls [embedding, rms_norm, ...]"
  std::vector<std::string> key;   // per dispatch: "kernel (op)"
  std::vector<std::string> call;  // per dispatch: the op call with shapes, and its grid
  std::vector<double> replay_ns;  // per replay: first start to last end
  std::deque<std::vector<double>> kept;  // per dispatch nanoseconds of the latest replays (at most kKeptReplays)
  std::vector<double> last_start_ns;     // per dispatch, in the latest replay: its start after the program's
};

class Profiler {
 public:
  // nullptr unless EDGETRAIN_PROFILE is set and the queue can write timestamps (else a note on stderr).
  static std::unique_ptr<Profiler> from_env(const Context& ctx);
  ~Profiler();  // writes the report

  // A new record for a program being finalized; the profiler keeps it after the program is gone.
  std::shared_ptr<ProgramProfile> add_program();

  static constexpr size_t kKeptReplays = 32;  // per program, for the medians
  // Reads the 2*n timestamps of a finished replay (a pool of Context::make_timestamp_pool) into p, then
  // maybe rewrites the report file.
  void collect(VkQueryPool pool, ProgramProfile& p);

  // The report of every program so far.
  std::string report() const;

 private:
  Profiler(std::string path, const Context& ctx);  // ctx outlives it (VulkanBackend's members)
  void write_report();

  std::string path_;
  const Context& ctx_;
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<ProgramProfile>> programs_;
  std::chrono::steady_clock::time_point last_write_;
  bool in_order_ = false;  // EDGETRAIN_PROFILE_ORDER: list every dispatch in program order too
};

}  // namespace edgetrain::vk
