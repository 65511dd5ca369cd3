// The Vulkan GPU-timestamp profiler (see profile.h): query pools, reading results after a replay, and
// the report tables (per kernel and op, sorted by total time; the slowest single dispatches).
#include "vulkan/profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "core/report_file.h"

namespace edgetrain::vk {

std::unique_ptr<Profiler> Profiler::from_env(const Context& ctx) {
  const char* env = std::getenv("EDGETRAIN_PROFILE");
  if (!env || !*env) return nullptr;
  if (!ctx.timestamps()) {
    std::fprintf(stderr,
                 "edgetrain vulkan: EDGETRAIN_PROFILE is set but the compute queue of %s cannot write timestamps "
                 "(timestampValidBits %u, timestampComputeAndGraphics %u); profiling is off\n",
                 ctx.properties().deviceName, ctx.timestamp_bits(),
                 ctx.properties().limits.timestampComputeAndGraphics);
    return nullptr;
  }
  return std::unique_ptr<Profiler>(new Profiler(env, ctx));
}

Profiler::Profiler(std::string path, const Context& ctx)
    : path_(std::move(path)), ctx_(ctx), last_write_(std::chrono::steady_clock::now()) {
  const char* order = std::getenv("EDGETRAIN_PROFILE_ORDER");
  in_order_ = order && *order && std::string(order) != "0";
}

Profiler::~Profiler() { write_report(); }

std::shared_ptr<ProgramProfile> Profiler::add_program() {
  std::lock_guard<std::mutex> lock(mu_);
  programs_.push_back(std::make_shared<ProgramProfile>());
  return programs_.back();
}

void Profiler::collect(VkQueryPool pool, ProgramProfile& p) {
  const size_t n = p.key.size();
  if (n == 0) return;
  std::vector<uint64_t> ts(2 * n);
  check(vkGetQueryPoolResults(ctx_.device(), pool, 0, static_cast<uint32_t>(2 * n), ts.size() * sizeof(uint64_t), ts.data(),
                              sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
        "vkGetQueryPoolResults");
  bool write = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<double> ns(n);
    p.last_start_ns.resize(n);
    for (size_t i = 0; i < n; ++i) {
      ns[i] = ctx_.timestamp_ns(ts[2 * i], ts[2 * i + 1]);
      p.last_start_ns[i] = ctx_.timestamp_ns(ts[0], ts[2 * i]);
    }
    p.replay_ns.push_back(ctx_.timestamp_ns(ts[0], ts[2 * n - 1]));
    p.kept.push_back(std::move(ns));
    if (p.kept.size() > kKeptReplays) p.kept.pop_front();
    auto now = std::chrono::steady_clock::now();
    if (path_ != "-" && now - last_write_ >= std::chrono::seconds(1)) {
      last_write_ = now;
      write = true;
    }
  }
  if (write) write_report();
}

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

// What the report counts of a program: the kept replays but the program's first (once there is a second).
// Each dispatch's time is its median over them, and the program's its median replay length, both multiplied
// by the count so that sums over dispatches and replays keep their scale.
struct Summary {
  std::vector<double> ns;
  double total_ns = 0;
  size_t counted = 0, replays = 0;
  bool first_left_out = false;
};

Summary summarize(const ProgramProfile& p) {
  Summary s;
  s.replays = p.replay_ns.size();
  const size_t first_kept = s.replays - p.kept.size();  // index of kept[0] among all replays
  const size_t skip = first_kept == 0 && p.kept.size() >= 2 ? 1 : 0;
  s.first_left_out = s.replays >= 2;
  s.counted = p.kept.size() - skip;
  if (s.counted == 0) return s;
  s.ns.assign(p.key.size(), 0.0);
  std::vector<double> v(s.counted);
  for (size_t i = 0; i < s.ns.size(); ++i) {
    for (size_t r = 0; r < s.counted; ++r) v[r] = p.kept[skip + r][i];
    s.ns[i] = median(v) * static_cast<double>(s.counted);
  }
  std::vector<double> lengths(p.replay_ns.end() - static_cast<std::ptrdiff_t>(s.counted), p.replay_ns.end());
  s.total_ns = median(lengths) * static_cast<double>(s.counted);
  return s;
}

}  // namespace

std::string Profiler::report() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<const ProgramProfile*, Summary>> progs;
  double all_ns = 0;
  for (const auto& p : programs_) {
    Summary s = summarize(*p);
    if (s.counted == 0) continue;
    all_ns += s.total_ns;
    progs.emplace_back(p.get(), std::move(s));
  }
  std::stable_sort(progs.begin(), progs.end(),
                   [](const auto& a, const auto& b) { return a.second.total_ns > b.second.total_ns; });
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line,
                "edgetrain vulkan GPU profile: %zu programs replayed, %.3f ms of GPU time counted (timestamps around "
                "every dispatch; a dispatch's time includes waiting for the barrier before it)\n",
                progs.size(), all_ns * 1e-6);
  out += line;
  for (const auto& [p, s] : progs) {
    struct Row {
      double ns = 0;
      uint64_t calls = 0;
    };
    std::map<std::string, Row> rows;
    double sum_ns = 0;
    for (size_t i = 0; i < p->key.size(); ++i) {
      Row& r = rows[p->key[i]];
      r.ns += s.ns[i];
      r.calls += s.counted;
      sum_ns += s.ns[i];
    }
    std::vector<std::pair<std::string, Row>> sorted(rows.begin(), rows.end());
    std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
    const double tot = s.total_ns > 0 ? s.total_ns : 1;
    const double per = static_cast<double>(s.counted);
    out += "\n== " + p->label + "\n";
    std::snprintf(line, sizeof line,
                  "   %zu replays; medians of %zu%s: %.3f ms per replay, sum of dispatch times %.3f ms\n", s.replays,
                  s.counted, s.first_left_out ? " (the first replay left out)" : "", s.total_ns * 1e-6 / per,
                  sum_ns * 1e-6 / per);
    out += line;
    std::snprintf(line, sizeof line, "   %12s %7s %9s %12s  %s\n", "total ms", "%", "calls", "median us", "kernel (op)");
    out += line;
    for (const auto& [key, r] : sorted) {
      std::snprintf(line, sizeof line, "   %12.3f %6.2f%% %9llu %12.2f  %s\n", r.ns * 1e-6, 100.0 * r.ns / tot,
                    static_cast<unsigned long long>(r.calls), r.calls ? r.ns * 1e-3 / double(r.calls) : 0.0,
                    key.c_str());
      out += line;
    }
    // The slowest single dispatches, with their call (shapes) and grid.
    std::vector<size_t> idx(s.ns.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return s.ns[a] > s.ns[b]; });
    size_t show = std::min<size_t>(idx.size(), 15);
    out += "   slowest dispatches (median us per replay, % of program, call):\n";
    for (size_t j = 0; j < show; ++j) {
      size_t i = idx[j];
      std::snprintf(line, sizeof line, "   %12.2f %6.2f%%  %.400s\n", s.ns[i] * 1e-3 / per, 100.0 * s.ns[i] / tot,
                    p->call[i].c_str());
      out += line;
    }
    if (!in_order_) continue;
    out += "   each replay, first start to last end (ms):";
    for (size_t r = 0; r < p->replay_ns.size(); ++r) {
      if (p->replay_ns.size() > 24 && r == 8) {  // a long run: its first 8 and latest 16
        out += " ...";
        r = p->replay_ns.size() - 16;
      }
      std::snprintf(line, sizeof line, " %.3f", p->replay_ns[r] * 1e-6);
      out += line;
    }
    out += "\n   every dispatch in program order (index, median us per replay, start in the latest replay in ms, "
           "call):\n";
    for (size_t i = 0; i < s.ns.size(); ++i) {
      std::snprintf(line, sizeof line, "   %5zu %10.2f %9.3f  %.300s\n", i, s.ns[i] * 1e-3 / per,
                    i < p->last_start_ns.size() ? p->last_start_ns[i] * 1e-6 : 0.0, p->call[i].c_str());
      out += line;
    }
  }
  return out;
}

void Profiler::write_report() { write_report_file(path_, report(), "edgetrain vulkan"); }

}  // namespace edgetrain::vk
