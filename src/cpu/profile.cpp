// The CPU program profiler (see profile.h).
#include "cpu/profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/report_file.h"

namespace edgetrain::cpu {

std::unique_ptr<Profiler> Profiler::from_env() {
  const char* env = std::getenv("EDGETRAIN_CPU_PROFILE");
  if (!env || !*env) return nullptr;
  return std::unique_ptr<Profiler>(new Profiler(env));
}

Profiler::~Profiler() { write_report(); }

void Profiler::add(const std::string& key, double ns, double cpu_ns) {
  bool write = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& e = entries_[key];
    e.ns += ns;
    e.cpu_ns += cpu_ns;
    ++e.calls;
    auto now = std::chrono::steady_clock::now();
    if (now - last_write_ > std::chrono::seconds(5)) {
      last_write_ = now;
      write = true;
    }
  }
  if (write) write_report();
}

std::string Profiler::report() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<std::string, Entry>> rows(entries_.begin(), entries_.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  double total = 0, cpu_total = 0;
  for (const auto& [k, e] : rows) total += e.ns, cpu_total += e.cpu_ns;
  std::string out = "edgetrain cpu profile: wall-clock time of every replayed call, " + std::to_string(total / 1e6) +
                    " ms in all; CPU time of the calling thread, " + std::to_string(cpu_total / 1e6) +
                    " ms\n       total ms       %     calls      mean us   thread cpu ms       %  op (kernel)\n";
  char line[256];
  for (const auto& [k, e] : rows) {
    std::snprintf(line, sizeof line, "%15.3f %6.2f%% %9llu %12.2f %15.3f %6.2f%%  %s\n", e.ns / 1e6,
                  total > 0 ? 100.0 * e.ns / total : 0.0, static_cast<unsigned long long>(e.calls),
                  e.calls ? e.ns / 1e3 / static_cast<double>(e.calls) : 0.0, e.cpu_ns / 1e6,
                  cpu_total > 0 ? 100.0 * e.cpu_ns / cpu_total : 0.0, k.c_str());
    out += line;
  }
  return out;
}

void Profiler::write_report() { write_report_file(path_, report(), "edgetrain cpu"); }

}  // namespace edgetrain::cpu
