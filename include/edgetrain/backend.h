// The backend interface: memory, upload/download, and programs that record op calls once and replay
// them with new per-step scalars. CPU, Vulkan and WebGPU implement it; everything above (model, trainer)
// talks only to this.
#pragma once

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "edgetrain/ops.h"
#include "edgetrain/tensor.h"

namespace edgetrain {

// A float argument of an op: a constant fixed at record time, or a named slot of the program whose value
// is set before each replay (learning rate, bias corrections, n_valid, positions...).
struct Scalar {
  float value = 0.0f;
  int slot = -1;  // >= 0: read Program slot `slot` at replay time
  Scalar(float v = 0.0f) : value(v) {}  // NOLINT: a plain float is a constant
  static Scalar from_slot(int s) {
    Scalar r;
    r.slot = s;
    return r;
  }
  bool is_slot() const { return slot >= 0; }
};

// One recorded op invocation. Outputs are allocated by the caller (Graph does it for you); in-place ops
// (adamw_step) name the same tensors as inputs and outputs.
struct OpCall {
  Op op;
  std::vector<Tensor> in;
  std::vector<Tensor> out;
  std::vector<int64_t> ints;
  std::vector<Scalar> floats;
  // Whether optional input i is given: calls may leave trailing optional inputs out or pass undefined tensors.
  bool has_in(size_t i) const { return i < in.size() && in[i].defined(); }
  std::string str() const;  // "linear_q4gsw(x f32[4, 8], ...) -> (f32[4, 16])" for messages
};

class Backend;

// Buffers that the planned tensors of several programs share (Program::share_memory): programs that never
// run at the same time (replay() returns when its work is done) — a model's training step, its update and
// its evaluation — then need the largest of their plans instead of the sum.
struct ProgramMemory {
  std::vector<Tensor> buffers;
};

// A recorded sequence of op calls (e.g. a whole training step). Record, finalize once, then replay as
// often as needed; between replays only slot values change. Tensors named in calls stay alive as long as
// the program does.
class Program {
 public:
  explicit Program(Backend& backend) : backend_(backend) {}
  virtual ~Program() = default;
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  // Declares a per-replay scalar with its initial value; use the returned Scalar as an op argument.
  Scalar slot(const std::string& name, float initial = 0.0f);
  void set(const Scalar& slot, float value);
  void set(const std::string& name, float value);
  float get(const Scalar& slot) const;

  // Validates the call against the catalogue (throws Error naming op and shapes), then appends it.
  void record(OpCall call);
  // A tensor whose memory the program allocates at finalize (Graph's outputs while recording).
  Tensor planned_tensor(Shape shape, DType dtype);
  // Before finalize: plan into `memory`'s buffers (adding what is missing) instead of buffers of its own.
  void share_memory(std::shared_ptr<ProgramMemory> memory) { shared_ = std::move(memory); }
  // Plans the planned tensors' memory (plan_memory), then prepares the backend's replay.
  void finalize();
  // Runs every recorded call in order with the current slot values; returns when the work is done.
  void replay();
  // The device's own time for the last replay, from its start to its end on the device (submission and
  // the host's wait left out); < 0 where the backend cannot tell (the CPU, WebGPU, a device without
  // timestamps, the profiler on).
  virtual double device_seconds() const { return -1; }

  bool finalized() const { return finalized_; }
  Backend& backend() const { return backend_; }
  const std::vector<OpCall>& calls() const { return calls_; }
  const std::vector<float>& slot_values() const { return slot_values_; }
  // The value of a float argument under the current slots.
  float resolve(const Scalar& s) const { return s.is_slot() ? slot_values_.at(s.slot) : s.value; }

 protected:
  virtual void on_finalize() {}  // build command buffers, pipelines...
  virtual void execute() = 0;    // run calls() with slot_values()

 private:
  void plan_memory();
  Backend& backend_;
  std::vector<std::weak_ptr<Storage>> planned_;  // every planned_tensor's storage
  std::vector<Tensor> arena_;                    // the buffers planned tensors share
  std::shared_ptr<ProgramMemory> shared_;        // or these, shared with other programs
  std::vector<OpCall> calls_;
  std::vector<std::string> slot_names_;
  std::vector<float> slot_values_;
  bool finalized_ = false;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;         // "cpu", "vulkan", "webgpu"
  virtual std::string device_name() const = 0;  // e.g. "llvmpipe (LLVM 15.0.6, 256 bits)"
  virtual bool supports(Op op) const = 0;
  // Whether GEMMs with fp16 operands (the f16 flag, --precision fp16) run faster here than fp32 ones, and
  // why, in one phrase (for --precision auto and `edgetrain info`). Every backend computes them; the
  // default says they are not faster. `offered` false: a run asking for fp16 gets fp32 here (WebGPU
  // without shader-f16), and `why` says so.
  struct Fp16Speed {
    bool fast = false;
    std::string why;
    bool offered = true;
  };
  virtual Fp16Speed fp16_speed() const;
  // The memory tensors may use here, in bytes, for the check before a run (0: unknown): the device-local
  // heap of a Vulkan device, the memory available to the process on the CPU.
  virtual uint64_t memory_capacity() const { return 0; }
  // The most bytes one kernel binding may cover (0: no limit): Vulkan's maxStorageBufferRange, WebGPU's
  // maxStorageBufferBindingSize (128 MiB on lavapipe, WebGPU's default and many phones). A tensor may be
  // larger (up to the device's largest allocation); kernels then take it a part at a time, as views
  // (Tensor::rows) whose byte offsets are multiples of binding_alignment().
  uint64_t max_binding_bytes() const;
  virtual uint64_t binding_alignment() const { return 64; }
  // Lowers max_binding_bytes below the device's own (BackendOptions::max_binding_bytes; 0: the device's).
  void cap_binding_bytes(uint64_t bytes) { binding_cap_ = bytes; }
  // The most buffers one kernel may bind (0: no limit): Vulkan's maxPerStageDescriptorStorageBuffers
  // (32 on lavapipe, fewer on some phones). A call binds its inputs, outputs, the scalar block and its
  // scratch buffers; ops that take any number of inputs (grad_norm) are split by Graph to stay under it.
  virtual uint32_t max_call_bindings() const { return 0; }
  // Where a model keeps tensors no kernel reads: a qlora model's frozen fp32 masters (its steps read the
  // 4-bit codes; the masters stay for checkpoints, export and a later change of mode — 3.9 GB of a
  // Llama-3.2-1B). A device backend keeps them in host memory (a CPU backend made on first use), the CPU
  // backend in itself. upload/download here take its tensors too; programs refuse them.
  virtual Backend& host_storage();
  // Bytes of the tensors alive on this backend now, and the most alive at once since it was created:
  // what the model, its recorded programs and their activations take (a backend's own staging buffers and
  // pipelines are not counted).
  struct TensorMemory {
    uint64_t in_use = 0, peak = 0;
  };
  TensorMemory tensor_memory() const { return tensor_memory_; }

  // New zero-filled tensor.
  Tensor zeros(Shape shape, DType dtype);
  Tensor from_host(Shape shape, DType dtype, const void* data, size_t bytes);
  template <typename T>
  Tensor from_vector(Shape shape, DType dtype, const std::vector<T>& v) {
    return from_host(shape, dtype, v.data(), v.size() * sizeof(T));
  }
  // bytes must equal t.nbytes(); t must belong to this backend or to its host_storage().
  void upload(const Tensor& t, const void* data, size_t bytes);
  void download(const Tensor& t, void* data, size_t bytes);
  template <typename T>
  std::vector<T> to_vector(const Tensor& t) {
    std::vector<T> v((t.nbytes() + sizeof(T) - 1) / sizeof(T));
    download(t, v.data(), t.nbytes());
    return v;
  }

  virtual std::unique_ptr<Program> new_program() = 0;
  // Eager convenience: validate, record into a one-call program and run it.
  virtual void run(OpCall call);

  // Called by Storage when the last Tensor of an allocation goes away: accounts its counted bytes, then
  // release(id).
  void free_storage(uint64_t id, size_t bytes) {
    tensor_memory_.in_use -= bytes;
    release(id);
  }
  virtual void release(uint64_t id) = 0;

 protected:
  virtual uint64_t device_binding_bytes() const { return 0; }  // the device's own limit (0: none)
  virtual uint64_t allocate(size_t bytes) = 0;  // zero-filled; bytes may be 0
  virtual void write(uint64_t id, const void* data, size_t bytes) = 0;
  virtual void read(uint64_t id, void* data, size_t bytes) = 0;

 private:
  TensorMemory tensor_memory_;
  uint64_t binding_cap_ = 0;
  std::unique_ptr<Backend> host_storage_;
};

// Validates a call against the catalogue: argument counts, dtypes, shapes, aliasing. Throws Error with a
// message naming the op and the shapes. Shared by every backend so misuse fails identically everywhere.
void check_call(const OpCall& call);

// Whether op takes the f16 flag (the matrix products and attention): its ints end with the optional "f16".
bool has_f16_flag(Op op);
// Whether a call asks for fp16 operands: its op takes the flag and it is given and 1 (ops.inc).
bool f16_operands(const OpCall& call);
// Asks for fp16 operands: an op with the flag gets its optional ints before it at their default (0), then
// the flag 1 (a bare push_back would land in an earlier optional int: mm's accumulate).
void set_f16_operands(OpCall& call);

// The outputs a call with these inputs and ints must have (shapes and dtypes), for allocation.
struct OutSpec {
  Shape shape;
  DType dtype;
};
std::vector<OutSpec> infer_outputs(Op op, const std::vector<Tensor>& in, const std::vector<int64_t>& ints);

}  // namespace edgetrain
