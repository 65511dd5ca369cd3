// The Op enum and catalogue metadata, generated from ops.inc (the single list of ops).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace edgetrain {

enum class Op : uint16_t {
#define ET_OP(name, family, inputs, outputs, ints, floats, summary) name,
#include "edgetrain/ops.inc"
#undef ET_OP
};

// One argument list of the catalogue ("x,w,scales,bias?"), parsed.
struct ArgList {
  std::vector<std::string> names;
  bool last_optional = false;  // "bias?": the last name is optional
  size_t required = 0;         // names before the first optional one (all of them when none is)
  bool last_variadic = false;  // "x..." (one or more)
  std::vector<bool> accumulating;  // outputs "dw+": read as well as written when the call's accumulate int is 1
  size_t min_count() const;
  size_t max_count() const;  // SIZE_MAX when variadic
};

struct OpInfo {
  Op op;
  const char* name;
  const char* family;
  ArgList inputs, outputs, ints, floats;
  const char* summary;
};

const std::vector<OpInfo>& all_ops();
const OpInfo& op_info(Op op);
inline const char* op_name(Op op) { return op_info(op).name; }
std::optional<Op> op_from_name(std::string_view name);

}  // namespace edgetrain
