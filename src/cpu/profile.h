// Per-op profile of CPU programs (EDGETRAIN_CPU_PROFILE=FILE; a separate switch from the GPU profilers'
// EDGETRAIN_PROFILE, so one process can profile both without the reports overwriting each other): every
// replayed call is timed, grouped by op and by which kernel ran it (fast or reference), and a table is
// written to FILE ("-" for stderr) every few seconds and when the backend is destroyed. Each call gets its
// wall-clock time and the CPU time of the calling thread: with --threads 1 the latter is the op's work, and
// it barely moves when other processes share the cores (wall-clock time then does).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace edgetrain::cpu {

class Profiler {
 public:
  static std::unique_ptr<Profiler> from_env();  // nullptr unless EDGETRAIN_CPU_PROFILE is set
  ~Profiler();                                   // writes the report
  // One call of `key` took wall_ns of wall-clock time and cpu_ns of the calling thread's CPU time.
  void add(const std::string& key, double wall_ns, double cpu_ns);
  std::string report() const;

 private:
  explicit Profiler(std::string path) : path_(std::move(path)), last_write_(std::chrono::steady_clock::now()) {}
  void write_report();
  struct Entry {
    double ns = 0, cpu_ns = 0;
    uint64_t calls = 0;
  };
  std::string path_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;
  std::chrono::steady_clock::time_point last_write_;
};

}  // namespace edgetrain::cpu
