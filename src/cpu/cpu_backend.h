// The CPU backend: tensors in host memory; each op runs a fast kernel where one is registered
// (threads + OpenBLAS) and the reference otherwise.
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>

#include "cpu/profile.h"
#include "cpu/threads.h"
#include "edgetrain/backends.h"
#include "ref/ref.h"

namespace edgetrain::cpu {

// A fast kernel for one op; same contract as the reference function.
using Kernel = void (*)(const ref::Call&);
// The fast kernel registered for op, or nullptr (then the reference runs).
Kernel fast_kernel(Op op);
// Which fast kernels run, for the device name: ours (AVX-512 or portable) and OpenBLAS's own choice.
std::string fast_kernels_name();

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(const BackendOptions& opts);
  ~CpuBackend() override;
  std::string name() const override { return "cpu"; }
  std::string device_name() const override;
  bool supports(Op) const override { return true; }
  uint64_t memory_capacity() const override;
  Backend& host_storage() override { return *this; }  // its memory is the host's
  std::unique_ptr<Program> new_program() override;
  void release(uint64_t id) override;

  // Host address of a tensor's memory (valid while the tensor lives).
  void* host_ptr(const Tensor& t);
  ref::Call resolve(const OpCall& c, const std::vector<float>& slot_values);
  // Use the reference for every op (for tests of the fast kernels against the reference).
  void set_reference_only(bool v) { reference_only_ = v; }
  bool reference_only() const { return reference_only_; }

 protected:
  uint64_t allocate(size_t bytes) override;
  void write(uint64_t id, const void* data, size_t bytes) override;
  void read(uint64_t id, void* data, size_t bytes) override;

 private:
  struct Block {
    void* ptr;
    size_t bytes;
  };
  std::mutex mu_;
  std::unordered_map<uint64_t, Block> blocks_;
  uint64_t next_id_ = 1;
  bool reference_only_ = false;

 public:
  Profiler* profiler() const { return profiler_.get(); }

 private:
  std::unique_ptr<Profiler> profiler_ = Profiler::from_env();  // EDGETRAIN_CPU_PROFILE
};

}  // namespace edgetrain::cpu
