// A small fixed pool of worker threads for the CPU backend's parallel loops.
#include "cpu/threads.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace edgetrain::cpu {
namespace {

class Pool {
 public:
  explicit Pool(int n) {
    for (int i = 1; i < n; ++i) workers_.emplace_back([this, i] { loop(i); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(worker) on every worker (the caller is worker 0) and waits for all.
  void run(const std::function<void(int)>& fn) {
    if (workers_.empty()) {
      fn(0);
      return;
    }
    std::lock_guard<std::mutex> serial(run_mu_);  // one parallel region at a time
    {
      std::lock_guard<std::mutex> lock(mu_);
      fn_ = &fn;
      pending_ = static_cast<int>(workers_.size());
      ++generation_;
    }
    cv_.notify_all();
    fn(0);
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return pending_ == 0; });
    fn_ = nullptr;
  }

 private:
  void loop(int id) {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int)>* fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        fn = fn_;
      }
      (*fn)(id);
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mu_, run_mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int)>* fn_ = nullptr;
  int pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

std::mutex g_pool_mu;
std::unique_ptr<Pool> g_pool;
int g_threads = 1;

Pool& pool() {
  std::lock_guard<std::mutex> lock(g_pool_mu);
  if (!g_pool || g_pool->size() != g_threads) g_pool = std::make_unique<Pool>(g_threads);
  return *g_pool;
}

}  // namespace

void set_threads(int n) {
  std::lock_guard<std::mutex> lock(g_pool_mu);
  g_threads = std::max(1, n);
}

int threads() { return g_threads; }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  int t = static_cast<int>(std::min<int64_t>(threads(), std::max<int64_t>(1, n / std::max<int64_t>(grain, 1))));
  if (t <= 1) {
    body(0, n);
    return;
  }
  std::atomic<int64_t> next{0};
  int64_t chunk = std::max<int64_t>(grain, (n + 4 * t - 1) / (4 * t));
  pool().run([&](int) {
    for (;;) {
      int64_t b = next.fetch_add(chunk);
      if (b >= n) return;
      body(b, std::min(n, b + chunk));
    }
  });
}

}  // namespace edgetrain::cpu
