// What training a model takes in backend memory, known before anything is allocated: the model is built
// and its programs recorded on a backend that only counts bytes (MeasuringBackend). The count is exact for
// the tensors (the same code allocates them on a real backend), so no formula has to follow the step's
// code; a device's own staging buffers and pipelines come on top (small: a few MiB).
#include <algorithm>
#include <cstring>

#include "edgetrain/model.h"

namespace edgetrain {
namespace {

// Allocates nothing, runs nothing, reads back zeros: the model records its programs as on any backend,
// and tensor_memory() says what they would take.
class MeasuringBackend : public Backend {
 public:
  std::string name() const override { return "measure"; }
  std::string device_name() const override { return "memory estimate"; }
  bool supports(Op) const override { return true; }
  std::unique_ptr<Program> new_program() override { return std::make_unique<NullProgram>(*this); }
  void release(uint64_t) override {}
  uint64_t largest = 0;  // bytes of the largest single tensor

 protected:
  uint64_t allocate(size_t bytes) override {
    largest = std::max<uint64_t>(largest, bytes);
    return ++next_id_;
  }
  void write(uint64_t, const void*, size_t) override {}
  void read(uint64_t, void* data, size_t bytes) override { std::memset(data, 0, bytes); }

 private:
  class NullProgram : public Program {
   public:
    using Program::Program;

   protected:
    void execute() override {}
  };
  uint64_t next_id_ = 0;
};

}  // namespace

MemoryEstimate estimate_training_memory(const ModelConfig& cfg, int64_t batch, int64_t seq, Precision precision,
                                        bool checkpoint_activations) {
  MeasuringBackend b;
  Model m(b, cfg);
  m.set_precision(precision);
  m.set_activation_checkpointing(checkpoint_activations);
  MemoryEstimate e;
  for (const Param& p : m.params()) {
    for (const Tensor* t : {&p.value, &p.codes, &p.scales})
      if (t->defined()) e.weights += t->nbytes();
    for (const Tensor* t : {&p.grad, &p.m, &p.v})
      if (t->defined()) e.optimizer += t->nbytes();
    if (p.value.nbytes() > e.largest_tensor) {
      e.largest_tensor = p.value.nbytes();
      e.largest_tensor_name = p.name;
    }
  }
  const uint64_t params = b.tensor_memory().in_use;  // rope frequencies and the like count as weights too
  e.weights += params - e.weights - e.optimizer;
  // One micro-batch of training, its update, and the evaluation at the same shape: every program a run
  // records, alive together (a Model keeps them).
  std::vector<int32_t> tokens(static_cast<size_t>(batch * seq), 0), labels(tokens.size(), 0);
  m.accumulate(tokens, labels, batch, seq, static_cast<int64_t>(labels.size()));
  m.update(OptimConfig{}, 1);
  const uint64_t after_step = b.tensor_memory().in_use;
  e.step = after_step - params;
  m.evaluate(tokens, labels, batch, seq);
  e.evaluation = b.tensor_memory().in_use - after_step;
  e.total = b.tensor_memory().peak;
  if (b.largest > e.largest_tensor) {  // an activation (the logits, usually) is the largest
    e.largest_tensor = b.largest;
    e.largest_tensor_name = "an activation of the step";
  }
  return e;
}

std::string format_bytes(uint64_t bytes) {
  char buf[32];
  if (bytes >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / double(1ull << 30));
  else std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / double(1ull << 20));
  return buf;
}

}  // namespace edgetrain
