// Per-op wall-clock profile of CPU programs (EDGETRAIN_CPU_PROFILE=FILE; a separate switch from the GPU
// profilers' EDGETRAIN_PROFILE, so one process can profile both without the reports overwriting each other):
// every replayed call is timed, grouped by op and by which kernel ran it (fast or reference), and a table is
// written to FILE ("-" for stderr) every few seconds and when the backend is destroyed.
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
  void add(const std::string& key, double ns);   // one call of `key` took ns
  std::string report() const;

 private:
  explicit Profiler(std::string path) : path_(std::move(path)), last_write_(std::chrono::steady_clock::now()) {}
  void write_report();
  struct Entry {
    double ns = 0;
    uint64_t calls = 0;
  };
  std::string path_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;
  std::chrono::steady_clock::time_point last_write_;
};

}  // namespace edgetrain::cpu
