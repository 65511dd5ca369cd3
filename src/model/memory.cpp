// What training a model takes in backend memory, known before anything is allocated: the model is built
// and its programs recorded on a backend that only counts bytes (MeasuringBackend). The count is exact for
// the tensors (the same code allocates them on a real backend), so no formula has to follow the step's
// code; a device's own staging buffers and pipelines come on top (small: a few MiB).
#include <algorithm>
#include <cstring>

#include "edgetrain/model.h"
#include "model/model_impl.h"

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
  uint64_t binding_alignment() const override { return device.binding_alignment; }
  // Frozen masters count apart, on a second measuring backend, where the device keeps them on the host.
  Backend& host_storage() override {
    if (!device.frozen_on_host) return *this;
    if (!host) host = std::make_unique<MeasuringBackend>();
    return *host;
  }
  TargetDevice device;
  std::unique_ptr<MeasuringBackend> host;
  // The largest tensor any recorded call binds, and which.
  uint64_t largest = 0;
  std::string largest_name;
  std::shared_ptr<Storage> largest_storage;

 protected:
  uint64_t device_binding_bytes() const override { return device.max_binding_bytes; }
  uint64_t allocate(size_t) override { return ++next_id_; }
  void write(uint64_t, const void*, size_t) override {}
  void read(uint64_t, void* data, size_t bytes) override { std::memset(data, 0, bytes); }

 private:
  class NullProgram : public Program {
   public:
    using Program::Program;

   protected:
    void on_finalize() override {
      auto& mb = static_cast<MeasuringBackend&>(backend());
      for (const OpCall& c : calls())
        for (int out = 0; out < 2; ++out) {
          const std::vector<Tensor>& ts = out ? c.out : c.in;
          for (size_t i = 0; i < ts.size(); ++i)
            if (ts[i].defined() && ts[i].nbytes() > mb.largest) {
              mb.largest = ts[i].nbytes();
              mb.largest_name = std::string(op_name(c.op)) + (out ? "'s output " : "'s input ") + std::to_string(i) +
                                " " + ts[i].str();
              mb.largest_storage = ts[i].storage();
            }
        }
    }
    void execute() override {}
  };
  uint64_t next_id_ = 0;
};

}  // namespace

TargetDevice target_device(Backend& b) { return {b.max_binding_bytes(), b.binding_alignment(), &b.host_storage() != &b}; }

MemoryEstimate estimate_training_memory(const ModelConfig& cfg, int64_t batch, int64_t seq, Precision precision,
                                        bool checkpoint_activations, TargetDevice device) {
  MeasuringBackend b;
  b.device = device;
  Model m(b, cfg);
  m.set_precision(precision);
  m.set_activation_checkpointing(checkpoint_activations);
  MemoryEstimate e;
  for (const Param& p : m.params()) {
    for (const Tensor* t : {&p.value, &p.codes, &p.scales})
      if (t->defined() && t->backend() == &b) e.weights += t->nbytes();
    for (const Tensor* t : {&p.grad, &p.m, &p.v})
      if (t->defined()) e.optimizer += t->nbytes();
  }
  if (b.host) e.host = b.host->tensor_memory().peak;
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
  e.vocab_parts = vocab_parts(b, cfg.vocab, cfg.dim, batch * seq);
  e.largest_binding = b.largest;
  e.largest_binding_name = b.largest_name;
  for (const Param& p : m.params())
    for (const Tensor* t : {&p.value, &p.codes, &p.scales, &p.grad, &p.m, &p.v})
      e.largest_binding_is_weight |= t->defined() && t->storage() == b.largest_storage;
  return e;
}

std::string format_bytes(uint64_t bytes) {
  char buf[32];
  if (bytes >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / double(1ull << 30));
  else if (bytes >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / double(1ull << 20));
  else std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024.0);
  return buf;
}

}  // namespace edgetrain
