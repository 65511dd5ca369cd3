// check_call() and infer_outputs(): the op's counts, then its signature (signatures.h), then the outputs
// and what may share memory.
#include <algorithm>
#include <cstdint>

#include "core/signatures.h"
#include "edgetrain/backend.h"

namespace edgetrain {
namespace sig {

Shape with_last(const Shape& s, int64_t last) {
  int64_t d[kMaxRank];
  for (int i = 0; i < s.rank(); ++i) d[i] = s[i];
  d[s.rank() - 1] = last;
  return Shape::of(d, s.rank());
}

Shape append_dim(const Ctx& x, const Shape& s, int64_t last) {
  if (s.rank() >= kMaxRank) x.bad("result would exceed rank ", kMaxRank);
  int64_t d[kMaxRank];
  for (int i = 0; i < s.rank(); ++i) d[i] = s[i];
  d[s.rank()] = last;
  return Shape::of(d, s.rank() + 1);
}

Shape broadcast(const Ctx& x, const Shape& a, const Shape& b) {
  int r = std::max(a.rank(), b.rank());
  int64_t d[kMaxRank];
  for (int i = 0; i < r; ++i) {
    int ia = a.rank() - r + i, ib = b.rank() - r + i;
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) x.bad("shapes ", a.str(), " and ", b.str(), " do not broadcast");
    d[i] = da == 1 ? db : da;
  }
  return Shape::of(d, r);
}

// A part of a vocabulary: rows first .. first+Vp-1 of `total` (int arguments at fi and ti; ti < 0: no total).
// Token ids and labels are i32, so the whole vocabulary must be one too.
void vocab_part(const Ctx& x, int64_t Vp, size_t fi, int ti) {
  const int64_t first = x.ival(fi), total = ti >= 0 ? x.ival(static_cast<size_t>(ti)) : first + Vp;
  if (first < 0) x.bad("first must be >= 0, got ", first);
  if (total < first + Vp) x.bad("total = ", total, " must be >= first + Vp = ", first, " + ", Vp);
  if (total > INT32_MAX) x.bad("total = ", total, " exceeds the i32 ids (", INT32_MAX, ")");
}

}  // namespace sig

namespace {

using sig::Ctx;

void run_signature(Ctx& x) {
  switch (x.c.op) {
#define ET_OP(name, family, inputs, outputs, ints, floats, summary) \
  case Op::name:                                                   \
    sig::sig_##name(x);                                            \
    break;
#include "edgetrain/ops.inc"
#undef ET_OP
  }
}

void check_counts(const OpCall& c, const OpInfo& info, bool check_outputs) {
  auto count = [&](const char* what, size_t n, const ArgList& a) {
    if (n < a.min_count() || n > a.max_count())
      fail(info.name, ": expected ", a.min_count(),
           a.max_count() == a.min_count() ? std::string()
           : a.max_count() == SIZE_MAX    ? std::string(" or more")
                                          : cat(" to ", a.max_count()),
           " ", what, ", got ", n, " (call: ", c.str(), ")");
  };
  count("inputs", c.in.size(), info.inputs);
  if (check_outputs) count("outputs", c.out.size(), info.outputs);
  count("int arguments", c.ints.size(), info.ints);
  if (check_outputs) count("float arguments", c.floats.size(), info.floats);
  for (size_t i = 0; i < c.in.size(); ++i) {
    bool optional_slot = i >= info.inputs.min_count() && i < info.inputs.names.size() && info.inputs.last_optional;
    if (!c.in[i].defined() && !optional_slot) fail(info.name, ": input ", i, " is undefined");
  }
}

}  // namespace

void check_call(const OpCall& c) {
  const OpInfo& info = op_info(c.op);
  check_counts(c, info, true);
  for (size_t i = 0; i < c.out.size(); ++i)
    if (!c.out[i].defined()) fail(info.name, ": output ", i, " is undefined");
  Ctx x{c, info, {}, false, false};
  run_signature(x);
  if (x.outputs_given) return;
  for (size_t i = 0; i < x.expect.size(); ++i) {
    const Tensor& o = c.out[i];
    if (o.shape() != x.expect[i].shape || o.dtype() != x.expect[i].dtype)
      fail(info.name, ": output ", info.outputs.names[i], " must be ", dtype_name(x.expect[i].dtype),
           x.expect[i].shape.str(), ", got ", o.str(), " (call: ", c.str(), ")");
  }
  // An output may share memory with an input only where the op allows it.
  for (size_t i = 0; i < c.out.size(); ++i)
    for (size_t j = 0; j < c.in.size(); ++j) {
      if (!c.out[i].same_memory(c.in[j])) continue;
      bool elementwise = c.op == Op::scale || c.op == Op::add || c.op == Op::sub || c.op == Op::mul ||
                         c.op == Op::div;
      bool allowed = ((c.op == Op::adamw_step || c.op == Op::adamw_q4gsw_step) && i == j) || (c.op == Op::q4gsw_requant && i == 1 && j == 0) || (c.op == Op::fused_ce && i == 1 && j == 0) ||
                     (c.op == Op::fused_ce_part && i == 1 && j == 0) ||
                     (elementwise && c.in[j].shape() == c.out[i].shape());
      if (!allowed)
        fail(info.name, ": output ", i, " shares memory with input ", j, ", which this op does not allow");
    }
  for (size_t i = 0; i < c.out.size(); ++i)
    for (size_t j = i + 1; j < c.out.size(); ++j)
      if (c.out[i].same_memory(c.out[j])) fail(info.name, ": outputs ", i, " and ", j, " share memory");
}

bool has_f16_flag(Op op) {
  const ArgList& ints = op_info(op).ints;
  return ints.last_optional && !ints.names.empty() && ints.names.back() == "f16";
}

bool f16_operands(const OpCall& c) {
  return has_f16_flag(c.op) && c.ints.size() == op_info(c.op).ints.names.size() && c.ints.back() != 0;
}

void set_f16_operands(OpCall& c) {
  ET_CHECK(has_f16_flag(c.op), op_info(c.op).name, " takes no f16 flag");
  c.ints.resize(op_info(c.op).ints.names.size() - 1, 0);
  c.ints.push_back(1);
}

std::vector<OutSpec> infer_outputs(Op op, const std::vector<Tensor>& in, const std::vector<int64_t>& ints) {
  OpCall c{op, in, {}, ints, {}};
  const OpInfo& info = op_info(op);
  check_counts(c, info, false);
  Ctx x{c, info, {}, false, false};
  x.inferring = true;
  run_signature(x);
  return x.expect;
}

}  // namespace edgetrain
