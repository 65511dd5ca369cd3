// Catalogue metadata parsed from ops.inc.
#include "edgetrain/ops.h"

#include <cstdint>

#include "edgetrain/error.h"

namespace edgetrain {

size_t ArgList::min_count() const { return required; }
size_t ArgList::max_count() const { return last_variadic ? SIZE_MAX : names.size(); }

static ArgList parse_args(const char* spec) {
  ArgList a;
  std::string cur;
  auto flush = [&] {
    if (cur.empty()) return;
    const bool accumulating = cur.back() == '+';
    if (accumulating) cur.pop_back();
    if (cur.size() > 3 && cur.compare(cur.size() - 3, 3, "...") == 0) {
      a.last_variadic = true;
      cur.resize(cur.size() - 3);
      a.required = a.names.size() + 1;  // one or more
    } else if (cur.back() == '?') {
      a.last_optional = true;
      cur.pop_back();
    } else {
      ET_CHECK(!a.last_optional, "ops.inc: required argument '", cur, "' after an optional one");
      a.required = a.names.size() + 1;
    }
    a.names.push_back(cur);
    a.accumulating.push_back(accumulating);
    cur.clear();
  };
  for (const char* p = spec; *p; ++p) {
    if (*p == ',') flush();
    else if (*p != ' ') cur += *p;
  }
  flush();
  return a;
}

const std::vector<OpInfo>& all_ops() {
  static const std::vector<OpInfo> ops = {
#define ET_OP(name, family, inputs, outputs, ints, floats, summary) \
  OpInfo{Op::name, #name, family, parse_args(inputs), parse_args(outputs), parse_args(ints), parse_args(floats), summary},
#include "edgetrain/ops.inc"
#undef ET_OP
  };
  return ops;
}

const OpInfo& op_info(Op op) {
  const auto& ops = all_ops();
  size_t i = static_cast<size_t>(op);
  ET_CHECK(i < ops.size(), "unknown op id ", i);
  return ops[i];
}

std::optional<Op> op_from_name(std::string_view name) {
  for (const auto& info : all_ops())
    if (name == info.name) return info.op;
  return std::nullopt;
}

}  // namespace edgetrain
