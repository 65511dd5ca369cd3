// Program bookkeeping shared by every backend: slots, recording with validation, replay.
#include <algorithm>
#include <map>

#include "edgetrain/backend.h"
#include "edgetrain/backends.h"

namespace edgetrain {

std::string OpCall::str() const {
  const OpInfo& info = op_info(op);
  std::string s = std::string(info.name) + "(";
  for (size_t i = 0; i < in.size(); ++i) {
    const std::string& nm = info.inputs.names.empty() ? std::string("?")
                            : info.inputs.names[std::min(i, info.inputs.names.size() - 1)];
    s += (i ? ", " : "") + nm + " " + (in[i].defined() ? in[i].str() : std::string("<undefined>"));
  }
  for (size_t i = 0; i < ints.size(); ++i) s += ", " + std::to_string(ints[i]);
  s += ") -> (";
  for (size_t i = 0; i < out.size(); ++i)
    s += (i ? ", " : "") + (out[i].defined() ? out[i].str() : std::string("<undefined>"));
  return s + ")";
}

Scalar Program::slot(const std::string& name, float initial) {
  ET_CHECK(!finalized_, "program: cannot add slot '", name, "' after finalize");
  ET_CHECK(std::find(slot_names_.begin(), slot_names_.end(), name) == slot_names_.end(),
           "program: slot '", name, "' declared twice");
  slot_names_.push_back(name);
  slot_values_.push_back(initial);
  return Scalar::from_slot(static_cast<int>(slot_values_.size() - 1));
}

void Program::set(const Scalar& s, float value) {
  ET_CHECK(s.is_slot() && s.slot < static_cast<int>(slot_values_.size()), "program: set() on a non-slot");
  slot_values_[s.slot] = value;
}

void Program::set(const std::string& name, float value) {
  auto it = std::find(slot_names_.begin(), slot_names_.end(), name);
  ET_CHECK(it != slot_names_.end(), "program: no slot named '", name, "'");
  slot_values_[it - slot_names_.begin()] = value;
}

float Program::get(const Scalar& s) const { return resolve(s); }

void Program::record(OpCall call) {
  ET_CHECK(!finalized_, "program: cannot record ", op_name(call.op), " after finalize");
  check_call(call);
  // Backends bind inputs by position (outputs follow the inputs), so an omitted optional input is made
  // an explicit undefined tensor here: every backend then sees the catalogue's full input list.
  const OpInfo& info = op_info(call.op);
  if (info.inputs.last_optional && !info.inputs.last_variadic)
    while (call.in.size() < info.inputs.names.size()) call.in.emplace_back();
  for (const Tensor& t : call.in)
    ET_CHECK(!t.defined() || t.backend() == &backend_, op_name(call.op), ": input tensor ", t.str(),
             " belongs to another backend");
  for (const Tensor& t : call.out)
    ET_CHECK(t.backend() == &backend_, op_name(call.op), ": output tensor ", t.str(),
             " belongs to another backend");
  for (const Scalar& f : call.floats)
    ET_CHECK(!f.is_slot() || f.slot < static_cast<int>(slot_values_.size()), op_name(call.op),
             ": float argument names slot ", f.slot, " which this program does not have");
  calls_.push_back(std::move(call));
}

Tensor Program::planned_tensor(Shape shape, DType dtype) {
  ET_CHECK(!finalized_, "program: cannot plan a tensor after finalize");
  const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  auto s = std::make_shared<Storage>(&backend_, 0, bytes);
  s->planned = true;
  planned_.push_back(s);
  return Tensor(std::move(s), shape, dtype);
}

// Memory for the planned tensors, in call order: a tensor used only inside the program (nothing else holds
// it now) lives from the call that first writes it to the last call that reads it, and shares a buffer
// with tensors whose lives do not overlap (best fit among the free buffers, else a new one). A tensor held
// elsewhere (a loss read back, a tensor used by a later program), one first read before any call writes it
// (its value carries over from the previous replay), or one no call uses gets a buffer of its own, which it
// then owns. Every kernel sees the same values as with a buffer per tensor: the backends order every call
// after the previous one that uses the same buffer (Vulkan: a barrier before a call that reads or writes a
// buffer an unbarriered earlier call wrote, or writes one it read; a shared buffer is one buffer there),
// and no op reads what it did not write this replay.
// A training step's backward temporaries thus reuse each other's memory.
void Program::plan_memory() {
  struct Life {
    size_t first = 0, last = 0, refs = 0;  // calls; how many of their tensors name it
    bool carries = false;                  // first read before written: keeps last replay's value
    bool seen = false;
  };
  std::map<Storage*, Life> lives;
  for (size_t c = 0; c < calls_.size(); ++c) {
    const OpCall& call = calls_[c];
    bool accumulates = false;  // the outputs marked "+" in ops.inc read as well as written (accumulate = 1)
    const OpInfo& info = op_info(call.op);
    for (size_t i = 0; i < info.ints.names.size() && i < call.ints.size(); ++i)
      accumulates |= info.ints.names[i] == "accumulate" && call.ints[i] != 0;
    auto use = [&](const Tensor& t, bool read) {
      if (!t.defined() || !t.storage()->planned || t.storage()->id != 0) return;
      Life& l = lives[t.storage().get()];
      if (!l.seen) l = {c, c, 0, read, true};
      l.last = c;
      ++l.refs;
    };
    for (const Tensor& t : call.in) use(t, true);
    for (size_t i = 0; i < call.out.size(); ++i)
      use(call.out[i], accumulates && info.outputs.accumulating[std::min(i, info.outputs.accumulating.size() - 1)]);
  }
  // A buffer of its own, which s then owns (and frees when its last tensor goes).
  auto own = [&](Storage* s) {
    Tensor b = backend_.zeros(Shape{static_cast<int64_t>(s->bytes)}, DType::u8);
    Storage* bs = b.storage().get();
    s->id = bs->id;
    s->counted = bs->counted;
    bs->owns = false;
  };
  std::vector<std::pair<Life*, Storage*>> shared;
  for (const std::weak_ptr<Storage>& w : planned_) {
    const std::shared_ptr<Storage> s = w.lock();
    if (!s) continue;  // dropped before any call used it
    auto it = lives.find(s.get());
    // Held by nothing but the calls' tensors (use_count less the `s` just made)?
    const bool inside = it != lives.end() && static_cast<size_t>(s.use_count() - 1) == it->second.refs;
    if (!inside || it->second.carries) own(s.get());
    else shared.push_back({&it->second, s.get()});
  }
  std::sort(shared.begin(), shared.end(), [](const auto& a, const auto& b) { return a.first->first < b.first->first; });
  struct Buffer {
    Tensor t;
    int64_t busy_until = -1;  // the last call that uses it (-1: free from the start)
  };
  // A shared ProgramMemory's buffers are all free when this program starts: the programs sharing them
  // never run at the same time, and none keeps a value in them from one replay to the next.
  std::vector<Buffer> buffers;
  if (shared_)
    for (const Tensor& t : shared_->buffers) buffers.push_back({t, -1});
  const size_t reused = buffers.size();
  for (auto& [l, s] : shared) {
    Buffer* best = nullptr;
    for (Buffer& b : buffers)
      if (b.busy_until < static_cast<int64_t>(l->first) && b.t.nbytes() >= s->bytes &&
          (!best || b.t.nbytes() < best->t.nbytes()))
        best = &b;
    if (!best) {
      buffers.push_back({backend_.zeros(Shape{static_cast<int64_t>(s->bytes)}, DType::u8), -1});
      best = &buffers.back();
    }
    best->busy_until = static_cast<int64_t>(l->last);
    s->id = best->t.id();
    s->owns = false;
  }
  for (size_t i = reused; i < buffers.size(); ++i) (shared_ ? shared_->buffers : arena_).push_back(std::move(buffers[i].t));
  planned_.clear();
}

void Program::finalize() {
  ET_CHECK(!finalized_, "program: finalize called twice");
  plan_memory();
  on_finalize();
  finalized_ = true;
}

void Program::replay() {
  ET_CHECK(finalized_, "program: replay before finalize");
  execute();
}

Backend::Fp16Speed Backend::fp16_speed() const {
  return {false, "the " + name() + " backend has no fp16 GEMM units: fp16 operands are rounded, then multiplied in fp32"};
}

Tensor Backend::zeros(Shape shape, DType dtype) {
  size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  auto storage = std::make_shared<Storage>(this, allocate(bytes), bytes);
  storage->counted = true;
  Tensor t(std::move(storage), shape, dtype);
  tensor_memory_.in_use += bytes;
  tensor_memory_.peak = std::max(tensor_memory_.peak, tensor_memory_.in_use);
  return t;
}

Tensor Backend::from_host(Shape shape, DType dtype, const void* data, size_t bytes) {
  Tensor t = zeros(shape, dtype);
  upload(t, data, bytes);
  return t;
}

uint64_t Backend::max_binding_bytes() const {
  const uint64_t device = device_binding_bytes();
  if (binding_cap_ == 0) return device;
  return device == 0 ? binding_cap_ : std::min(device, binding_cap_);
}

Backend& Backend::host_storage() {
  if (!host_storage_) {
    BackendOptions one_thread;  // only memory and copies: no kernels run there
    one_thread.threads = 1;
    host_storage_ = make_cpu_backend(one_thread);
  }
  return *host_storage_;
}

void Backend::upload(const Tensor& t, const void* data, size_t bytes) {
  if (t.backend() != this && t.backend() == &host_storage()) return host_storage().upload(t, data, bytes);
  ET_CHECK(t.backend() == this, "upload: tensor ", t.str(), " belongs to another backend");
  ET_CHECK(bytes == t.nbytes(), "upload: ", bytes, " bytes given for tensor ", t.str(), " of ", t.nbytes(),
           " bytes");
  ET_CHECK(t.offset() == 0, "upload: tensor ", t.str(), " is a view of part of its memory; upload the whole tensor");
  if (bytes) write(t.id(), data, bytes);
}

void Backend::download(const Tensor& t, void* data, size_t bytes) {
  if (t.backend() != this && t.backend() == &host_storage()) return host_storage().download(t, data, bytes);
  ET_CHECK(t.backend() == this, "download: tensor ", t.str(), " belongs to another backend");
  ET_CHECK(bytes == t.nbytes(), "download: ", bytes, " bytes asked of tensor ", t.str(), " of ", t.nbytes(),
           " bytes");
  ET_CHECK(t.offset() == 0, "download: tensor ", t.str(), " is a view of part of its memory; download the whole tensor");
  if (bytes) read(t.id(), data, bytes);
}

void Backend::run(OpCall call) {
  auto p = new_program();
  p->record(std::move(call));
  p->finalize();
  p->replay();
}

}  // namespace edgetrain
