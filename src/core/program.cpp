// Program bookkeeping shared by every backend: slots, recording with validation, replay.
#include <algorithm>

#include "edgetrain/backend.h"

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

void Program::finalize() {
  ET_CHECK(!finalized_, "program: finalize called twice");
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
  return Tensor(std::make_shared<Storage>(this, allocate(bytes), bytes), shape, dtype);
}

Tensor Backend::from_host(Shape shape, DType dtype, const void* data, size_t bytes) {
  Tensor t = zeros(shape, dtype);
  upload(t, data, bytes);
  return t;
}

void Backend::upload(const Tensor& t, const void* data, size_t bytes) {
  ET_CHECK(t.backend() == this, "upload: tensor ", t.str(), " belongs to another backend");
  ET_CHECK(bytes == t.nbytes(), "upload: ", bytes, " bytes given for tensor ", t.str(), " of ", t.nbytes(),
           " bytes");
  if (bytes) write(t.id(), data, bytes);
}

void Backend::download(const Tensor& t, void* data, size_t bytes) {
  ET_CHECK(t.backend() == this, "download: tensor ", t.str(), " belongs to another backend");
  ET_CHECK(bytes == t.nbytes(), "download: ", bytes, " bytes asked of tensor ", t.str(), " of ", t.nbytes(),
           " bytes");
  if (bytes) read(t.id(), data, bytes);
}

void Backend::run(OpCall call) {
  auto p = new_program();
  p->record(std::move(call));
  p->finalize();
  p->replay();
}

}  // namespace edgetrain
