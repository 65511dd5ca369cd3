// CPU backend: host allocations (64-byte aligned), programs that run fast kernels or the reference.
#include "cpu/cpu_backend.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <thread>

namespace edgetrain::cpu {

CpuBackend::CpuBackend(const BackendOptions& opts) {
  set_threads(opts.threads > 0 ? opts.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

CpuBackend::~CpuBackend() {
  for (auto& [id, b] : blocks_) std::free(b.ptr);
}

// MemAvailable of /proc/meminfo (the memory the kernel can give without swapping), plus what this
// backend's tensors hold already (they are part of a run's need); 0 where /proc/meminfo is absent.
uint64_t CpuBackend::memory_capacity() const {
  std::ifstream f("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (f >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024 + tensor_memory().in_use;
  return 0;
}

// The CPU model, the worker count and which kernels run (fast_kernels_name).
std::string CpuBackend::device_name() const {
  const std::string how = std::to_string(threads()) + " threads, " + fast_kernels_name();
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      if (p != std::string::npos) return line.substr(p + 2) + " (" + how + ")";
    }
  return "cpu (" + how + ")";
}

uint64_t CpuBackend::allocate(size_t bytes) {
  size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  ET_CHECK_KIND(ErrorKind::device, p, "cpu: out of memory allocating ", bytes, " bytes");
  std::memset(p, 0, rounded);
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t id = next_id_++;
  blocks_[id] = {p, bytes};
  return id;
}

void CpuBackend::release(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blocks_.find(id);
  if (it == blocks_.end()) return;
  std::free(it->second.ptr);
  blocks_.erase(it);
}

void CpuBackend::write(uint64_t id, const void* data, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  std::memcpy(blocks_.at(id).ptr, data, bytes);
}

void CpuBackend::read(uint64_t id, void* data, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  std::memcpy(data, blocks_.at(id).ptr, bytes);
}

void* CpuBackend::host_ptr(const Tensor& t) {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<char*>(blocks_.at(t.id()).ptr) + t.offset();
}

ref::Call CpuBackend::resolve(const OpCall& c, const std::vector<float>& slots) {
  ref::Call r{c.op, {}, {}, c.ints, {}};
  for (const Tensor& t : c.in)
    r.in.push_back(t.defined() ? ref::View{host_ptr(t), t.shape(), t.dtype()} : ref::View{});
  for (const Tensor& t : c.out) r.out.push_back(ref::View{host_ptr(t), t.shape(), t.dtype()});
  for (const Scalar& s : c.floats) r.floats.push_back(s.is_slot() ? slots.at(s.slot) : s.value);
  return r;
}

namespace {
double thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return 1e9 * static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec);
}

class CpuProgram : public Program {
 public:
  explicit CpuProgram(CpuBackend& b) : Program(b), cpu_(b) {}

 protected:
  void on_finalize() override {
    // Resolve host pointers once; only float slots change between replays.
    for (const OpCall& c : calls()) resolved_.push_back(cpu_.resolve(c, slot_values()));
  }
  void execute() override {
    const auto& cs = calls();
    for (size_t i = 0; i < cs.size(); ++i) {
      ref::Call& r = resolved_[i];
      for (size_t j = 0; j < cs[i].floats.size(); ++j) r.floats[j] = resolve(cs[i].floats[j]);
      Kernel k = cpu_.reference_only() ? nullptr : fast_kernel(r.op);
      Profiler* prof = cpu_.profiler();
      const auto t0 = prof ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
      const double c0 = prof ? thread_cpu_ns() : 0;
      if (k) k(r);
      else ref::run(r);
      if (prof)
        prof->add(std::string(op_name(r.op)) + (k ? " (fast)" : " (reference)"),
                  std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count(),
                  thread_cpu_ns() - c0);
    }
  }

 private:
  CpuBackend& cpu_;
  std::vector<ref::Call> resolved_;
};
}  // namespace

std::unique_ptr<Program> CpuBackend::new_program() { return std::make_unique<CpuProgram>(*this); }

}  // namespace edgetrain::cpu

namespace edgetrain {
std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& opts) {
  return std::make_unique<cpu::CpuBackend>(opts);
}
}  // namespace edgetrain
