// A small fixed pool of worker threads for the CPU backend's parallel loops; threads wait for work by
// spinning briefly, then sleeping.
#include "cpu/threads.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace edgetrain::cpu {
namespace {

// How long a thread waits by spinning before it sleeps on a condition variable: a training step replays a
// few hundred parallel loops back to back, microseconds to milliseconds apart, and a sleeping worker takes
// tens of microseconds to wake (a futex round trip) — on two cores, a large part of a small op. Measured on
// the 2-core machine (docs/PERFORMANCE.md): the mini step ~20% faster with the cores to itself, but 2-3x
// slower while other processes keep the cores busy (spinning threads spend the share of the CPU the
// working ones need). So threads spin only while the machine's load average leaves a core per thread of
// ours, and always sleep in the end.
constexpr std::chrono::microseconds kSpin{50};

int g_cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

// Whether spinning pays: the 1-minute load average (our own working threads included) below the cores
// plus a half, read from /proc/loadavg at most every half second; true where there is no such file.
bool spin_pays() {
  using std::chrono::milliseconds;
  static std::atomic<int64_t> next_check_ms{0};
  static std::atomic<bool> pays{true};
  const int64_t now =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  int64_t due = next_check_ms.load(std::memory_order_relaxed);
  if (now >= due && next_check_ms.compare_exchange_strong(due, now + 500)) {
    double load = 0;
    if (FILE* f = std::fopen("/proc/loadavg", "r")) {
      if (std::fscanf(f, "%lf", &load) == 1) pays.store(load < g_cores + 0.5, std::memory_order_relaxed);
      std::fclose(f);
    }
  }
  return pays.load(std::memory_order_relaxed);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until ready() or kSpin has passed (not at all when spinning does not pay); returns ready().
template <typename Ready>
bool spin_until(Ready ready) {
  if (!spin_pays()) return ready();
  const auto end = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (ready()) return true;
    if (i < 64) {
      cpu_relax();
    } else {
      std::this_thread::yield();
      if (std::chrono::steady_clock::now() > end) return ready();
    }
  }
}

class Pool {
 public:
  explicit Pool(int n) {
    for (int i = 1; i < n; ++i) workers_.emplace_back([this, i] { loop(i); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_.store(true);
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
    fn_ = &fn;
    pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(mu_);  // a worker about to sleep checks the generation under mu_
      generation_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    fn(0);
    if (!spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock<std::mutex> lock(mu_);
      done_cv_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
    }
    fn_ = nullptr;
  }

 private:
  void loop(int id) {
    uint64_t seen = 0;
    for (;;) {
      auto ready = [&] { return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen; };
      if (!spin_until(ready)) {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, ready);
      }
      if (stop_.load()) return;
      seen = generation_.load(std::memory_order_acquire);
      (*fn_)(id);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mu_);  // the caller may be checking pending_ under mu_
        done_cv_.notify_one();
      }
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mu_, run_mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int)>* fn_ = nullptr;
  std::atomic<int> pending_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
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
