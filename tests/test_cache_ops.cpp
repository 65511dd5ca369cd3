// Cases for write_rows (the KV-cache append): offsets at the start, middle and end, rows falling off the
// end, a negative offset, and 1-byte dtypes.
#include "harness/op_case.h"

namespace edgetrain::test {
namespace {

std::vector<OpCase> write_rows_cases() {
  Rng r(7);
  std::vector<OpCase> cs;
  struct S { int64_t R, S, C; float off; DType t; const char* name; };
  for (auto s : {S{1, 8, 64, 0, DType::f32, "first_row"}, S{3, 8, 64, 5, DType::f32, "last_rows"},
                 S{4, 8, 33, 6, DType::f32, "past_end_dropped"}, S{2, 5, 7, -1, DType::f32, "negative_offset"},
                 S{5, 300, 129, 17.9f, DType::f32, "fractional_offset_truncates"},
                 S{3, 9, 5, 2, DType::i32, "i32"}, S{3, 9, 5, 4, DType::boolean, "bool_rows"}}) {
    OpCase c;
    c.name = s.name;
    c.op = Op::write_rows;
    if (s.t == DType::f32) c.in.push_back(random_f32(r, Shape{s.R, s.C}));
    else if (s.t == DType::i32) c.in.push_back(random_i32(r, Shape{s.R, s.C}, -100, 100));
    else c.in.push_back(random_bool(r, Shape{s.R, s.C}));
    // Existing cache contents must survive outside the written rows.
    if (s.t == DType::f32) c.out.push_back(random_f32(r, Shape{s.S, s.C}));
    else if (s.t == DType::i32) c.out.push_back(random_i32(r, Shape{s.S, s.C}, -100, 100));
    else c.out.push_back(random_bool(r, Shape{s.S, s.C}));
    c.floats = {s.off};
    c.tol = tol::exact;
    cs.push_back(std::move(c));
  }
  // A KV-cache shaped write: [1, T, H, D] into [1, S, H, D].
  OpCase kv;
  kv.name = "kv_cache_4d";
  kv.op = Op::write_rows;
  kv.in.push_back(random_f32(r, Shape{1, 2, 4, 16}));
  kv.out.push_back(random_f32(r, Shape{1, 10, 4, 16}));
  kv.floats = {0};
  kv.tol = tol::exact;
  // Rows are the product of all but the last dim, so a [1,T,H,D] tensor has T*H rows of D: write at
  // offset 3 tokens = 3*H rows.
  kv.floats = {12};
  cs.push_back(std::move(kv));
  return cs;
}

ET_OP_CASES(write_rows, write_rows_cases);

}  // namespace
}  // namespace edgetrain::test
