// Every catalogue op, on every backend under test, against the CPU reference, on the cases the family
// test files register. An op with no cases fails: every op must be tested.
#include <gtest/gtest.h>

#include "harness/op_case.h"

namespace edgetrain::test {
namespace {

struct Param {
  std::string backend;
  Op op;
};
// Names the case in ctest/gtest listings instead of dumping the struct's bytes.
void PrintTo(const Param& p, std::ostream* os) { *os << p.backend << "/" << op_name(p.op); }

class OpVsReference : public ::testing::TestWithParam<Param> {};

TEST_P(OpVsReference, AllCases) {
  const Param& p = GetParam();
  Backend& b = backend_for_tests(p.backend);
  if (!b.supports(p.op)) GTEST_SKIP() << p.backend << " does not support " << op_name(p.op);
  auto cases = cases_for(p.op);
  ASSERT_FALSE(cases.empty()) << "no test cases registered for op " << op_name(p.op);
  for (const OpCase& c : cases) {
    SCOPED_TRACE(std::string(op_name(p.op)) + "/" + c.name);
    expect_matches_reference(b, c);
    if (HasFatalFailure()) return;  // an output count that differs ends the op's test
  }
}

std::vector<Param> all_params() {
  std::vector<Param> ps;
  for (const std::string& b : test_backends())
    for (const OpInfo& info : all_ops()) ps.push_back({b, info.op});
  return ps;
}

// The memory plan keeps the value of exactly the outputs an accumulate=1 call reads (ops.inc "name+"): an op
// with an accumulate int must mark them, and no other op may (a marked output costs a buffer of its own).
TEST(CatalogueMetadata, AccumulatingOpsMarkTheOutputsTheyRead) {
  int accumulating_ops = 0;
  for (const OpInfo& info : all_ops()) {
    bool has_int = false, marked = false;
    for (const std::string& n : info.ints.names) has_int |= n == "accumulate";
    for (bool a : info.outputs.accumulating) marked |= a;
    EXPECT_EQ(marked, has_int) << info.name;
    for (const std::vector<bool>* v : {&info.inputs.accumulating, &info.ints.accumulating, &info.floats.accumulating})
      for (bool a : *v) EXPECT_FALSE(a) << info.name << ": only outputs accumulate";
    accumulating_ops += has_int ? 1 : 0;
  }
  EXPECT_EQ(accumulating_ops, 6);  // linear_dW, logsumexp_rows, fused_ce_part, mm, rms_norm_backward, embedding_backward
  EXPECT_EQ(op_info(Op::rms_norm_backward).outputs.accumulating, (std::vector<bool>{false, true}));  // dx, dw+
}

INSTANTIATE_TEST_SUITE_P(Catalogue, OpVsReference, ::testing::ValuesIn(all_params()),
                         [](const ::testing::TestParamInfo<Param>& i) {
                           return i.param.backend + "_" + op_name(i.param.op);
                         });

}  // namespace
}  // namespace edgetrain::test
