// Misuse of the training, GEMM and optimizer ops fails loudly: check_call (reached through Backend::run)
// raises edgetrain::Error naming the op and the offending shapes, and programs refuse out-of-order use.
#include <gtest/gtest.h>

#include "edgetrain/backends.h"
#include "edgetrain/graph.h"
#include "edgetrain/q4gsw.h"

namespace edgetrain {
namespace {

class Misuse : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> b = make_cpu_backend();
  Tensor f32(Shape s) { return b->zeros(s, DType::f32); }
  Tensor i32(Shape s) { return b->zeros(s, DType::i32); }
  Tensor q4w(int64_t N, int64_t K) { return b->zeros(Shape{q4::Geometry(N, K, 4).words()}, DType::u32); }

  // Runs the call and expects a misuse Error whose message contains every fragment (op name, shapes,
  // reason).
  void expect_error(OpCall call, std::vector<std::string> fragments) {
    std::string what = "(no error)";
    try {
      b->run(std::move(call));
    } catch (const Error& e) {
      what = e.what();
      EXPECT_EQ(e.kind(), ErrorKind::misuse) << what;
    }
    for (const std::string& f : fragments) EXPECT_NE(what.find(f), std::string::npos) << "missing '" << f << "' in: " << what;
  }
};

TEST_F(Misuse, LinearQ4gswWrongK) {
  // x has K = 8 but the words hold a K = 16 weight.
  expect_error({Op::linear_q4gsw, {f32({4, 8}), q4w(8, 16), f32({1, 8})}, {f32({4, 8})}, {32}, {}},
               {"linear_q4gsw", "f32[4, 8]", "u32[16]", "W_4X8 words"});
}

TEST_F(Misuse, LinearQ4gswWrongScalesShape) {
  // K = 8 with gs = 32 is one group; two rows of scales are wrong.
  expect_error({Op::linear_q4gsw, {f32({4, 8}), q4w(8, 8), f32({2, 8})}, {f32({4, 8})}, {32}, {}},
               {"linear_q4gsw", "= [1, 8]", "f32[2, 8]"});
}

TEST_F(Misuse, GroupSizeNotMultipleOf4) {
  expect_error({Op::linear_q4gsw, {f32({4, 8}), q4w(8, 8), f32({2, 8})}, {f32({4, 8})}, {6}, {}},
               {"linear_q4gsw", "group_size", "multiple of 4", "6"});
  Tensor lat = f32({8, 8});
  expect_error({Op::q4gsw_requant, {lat, f32({2, 8})}, {q4w(8, 8), lat}, {6}, {}},
               {"q4gsw_requant", "group_size", "6"});
}

TEST_F(Misuse, BackwardDyNotN) {
  expect_error({Op::linear_q4gsw_backward, {f32({4, 7}), q4w(8, 8), f32({1, 8})}, {f32({4, 8})}, {32, 8}, {}},
               {"linear_q4gsw_backward", "f32[4, 7]", "N = 8"});
}

TEST_F(Misuse, LinearDwRowMismatch) {
  expect_error({Op::linear_dW, {f32({4, 8}), f32({5, 3})}, {f32({8, 3})}, {0}, {}},
               {"linear_dW", "f32[4, 8]", "f32[5, 3]"});
}

TEST_F(Misuse, FusedCeLabels) {
  expect_error({Op::fused_ce, {f32({4, 10}), f32({4})}, {f32({}), f32({4, 10})}, {}, {Scalar(4.0f)}},
               {"fused_ce", "labels must be i32", "f32[4]"});
  expect_error({Op::fused_ce, {f32({4, 10}), i32({5})}, {f32({}), f32({4, 10})}, {}, {Scalar(4.0f)}},
               {"fused_ce", "labels must be [R] = [4]", "i32[5]"});
}

TEST_F(Misuse, VocabParts) {
  // A part must lie inside its table, and the table must fit the i32 ids.
  expect_error({Op::fused_ce_part, {f32({4, 10}), i32({4}), f32({4})}, {f32({}), f32({4, 10})}, {95, 100, 0}, {Scalar(4.0f)}},
               {"fused_ce_part", "total = 100 must be >= first + Vp = 95 + 10"});
  expect_error({Op::fused_ce_part, {f32({4, 10}), i32({4}), f32({4})}, {f32({}), f32({4, 10})}, {-1, 100, 0}, {Scalar(4.0f)}},
               {"fused_ce_part", "first must be >= 0"});
  expect_error({Op::fused_ce_part, {f32({4, 10}), i32({4}), f32({5})}, {f32({}), f32({4, 10})}, {0, 10, 0}, {Scalar(4.0f)}},
               {"fused_ce_part", "lse must be [R] = [4]", "f32[5]"});
  expect_error({Op::fused_ce_part, {f32({4, 10}), i32({4}), f32({4})}, {f32({}), f32({4, 10})}, {0, 10, 2}, {Scalar(4.0f)}},
               {"fused_ce_part", "accumulate must be 0 or 1"});
  expect_error({Op::logsumexp_rows, {f32({4, 10})}, {f32({5})}, {0}, {}}, {"logsumexp_rows", "output lse", "f32[5]"});
  expect_error({Op::embedding, {f32({10, 4}), i32({3})}, {f32({3, 4})}, {5}, {}},
               {"embedding", "give both first and total"});
  expect_error({Op::embedding, {f32({10, 4}), i32({3})}, {f32({3, 4})}, {0, int64_t(1) << 31}, {}},
               {"embedding", "exceeds the i32 ids"});
  expect_error({Op::embedding_backward, {f32({3, 4}), i32({3})}, {f32({10, 4})}, {0, -2}, {}},
               {"embedding_backward", "first must be >= 0"});
}

TEST_F(Misuse, WrongOutputShape) {
  expect_error({Op::linear, {f32({4, 8}), f32({6, 8})}, {f32({4, 5})}, {}, {}},
               {"linear", "f32[4, 6]", "f32[4, 5]"});
  Tensor lat = f32({8, 8});
  expect_error({Op::q4gsw_requant, {lat, f32({1, 8})}, {b->zeros(Shape{8}, DType::i32), lat}, {8}, {}},
               {"q4gsw_requant", "u32[8]", "i32[8]"});
  // The latent output must be the latent itself.
  expect_error({Op::q4gsw_requant, {lat, f32({1, 8})}, {q4w(8, 8), f32({8, 8})}, {8}, {}},
               {"q4gsw_requant", "output 1", "in place"});
}

TEST_F(Misuse, AdamwOutputsMustAliasInputs) {
  Tensor p = f32({10}), m = f32({10}), v = f32({10}), g = f32({10});
  std::vector<Scalar> hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0.1f, 0.001f};
  expect_error({Op::adamw_step, {p, m, v, g}, {p, m, f32({10}), g}, {}, hp}, {"adamw_step", "output 2", "in place"});
  expect_error({Op::adamw_step, {p, m, v, g}, {p, m, v, f32({10})}, {}, hp}, {"adamw_step", "output 3", "in place"});
  Tensor g11 = f32({11});
  expect_error({Op::adamw_step, {p, m, v, g11}, {p, m, v, g11}, {}, hp}, {"adamw_step", "grad", "f32[11]"});
  expect_error({Op::adamw_step, {p, m, v, g, f32({2})}, {p, m, v, g}, {}, hp},
               {"adamw_step", "grad_scale must hold one value", "f32[2]"});
}

TEST_F(Misuse, AdamwQ4gswStepNamesWhatIsWrong) {
  Tensor lat = f32({8, 8}), m = f32({8, 8}), v = f32({8, 8}), g = f32({8, 8}), sc = f32({1, 8});
  std::vector<Scalar> hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0.1f, 0.001f};
  expect_error({Op::adamw_q4gsw_step, {lat, m, v, g, sc}, {lat, m, f32({8, 8}), g, q4w(8, 8)}, {8}, hp},
               {"adamw_q4gsw_step", "output 2", "in place"});
  expect_error({Op::adamw_q4gsw_step, {lat, m, v, g, f32({2, 8})}, {lat, m, v, g, q4w(8, 8)}, {8}, hp},
               {"adamw_q4gsw_step", "scales must be [ceil(K/group_size), N] = [1, 8]", "f32[2, 8]"});
  Tensor m64 = f32({64});
  expect_error({Op::adamw_q4gsw_step, {lat, m64, v, g, sc}, {lat, m64, v, g, q4w(8, 8)}, {8}, hp},
               {"adamw_q4gsw_step", "m must have the latent's shape", "f32[64]"});
  expect_error({Op::adamw_q4gsw_step, {lat, m, v, g, sc}, {lat, m, v, g, q4w(8, 8)}, {6}, hp},
               {"adamw_q4gsw_step", "group_size", "6"});
  expect_error({Op::adamw_q4gsw_step, {lat, m, v, g, sc}, {lat, m, v, g, b->zeros(Shape{8}, DType::i32)}, {8}, hp},
               {"adamw_q4gsw_step", "u32[8]", "i32[8]"});
}

TEST_F(Misuse, BmmBatchMismatchAndContraction) {
  expect_error({Op::bmm, {f32({2, 3, 4}), f32({3, 4, 5})}, {f32({2, 3, 5})}, {0, 0}, {Scalar(1.0f)}},
               {"bmm", "batch dims differ", "f32[2, 3, 4]", "f32[3, 4, 5]"});
  expect_error({Op::mm, {f32({3, 4}), f32({5, 6})}, {f32({3, 6})}, {0, 0}, {Scalar(1.0f)}},
               {"mm", "K=4", "K=5"});
  expect_error({Op::mm, {f32({3, 4}), f32({4, 6})}, {f32({3, 6})}, {0, 2}, {Scalar(1.0f)}},
               {"mm", "trans_b must be 0 or 1"});
}

TEST_F(Misuse, WrongArgumentCounts) {
  expect_error({Op::mm, {f32({3, 4}), f32({4, 6})}, {f32({3, 6})}, {0}, {Scalar(1.0f)}},
               {"mm", "expected 2 to 4 int arguments, got 1"});
  Tensor p = f32({10});
  expect_error({Op::adamw_step, {p, f32({10}), f32({10}), f32({10})}, {p}, {}, {1e-3f, 0.9f, 0.999f}},
               {"adamw_step", "expected 4 outputs"});
  Tensor q = f32({10}), m = f32({10}), v = f32({10}), g = f32({10});
  expect_error({Op::adamw_step, {q, m, v, g}, {q, m, v, g}, {}, {1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0.1f}},
               {"adamw_step", "expected 7 float arguments, got 6"});
  expect_error({Op::linear, {f32({4, 8})}, {f32({4, 6})}, {}, {}}, {"linear", "expected 2 to 3 inputs, got 1"});
  expect_error({Op::grad_norm, {}, {f32({})}, {}, {}}, {"grad_norm", "inputs, got 0"});
  expect_error({Op::linear_q4gsw_backward, {f32({4, 8}), q4w(8, 8), f32({1, 8})}, {f32({4, 8})}, {32}, {}},
               {"linear_q4gsw_backward", "int arguments, got 1"});
}

TEST_F(Misuse, DtypesAndAliasing) {
  expect_error({Op::grad_norm, {f32({3}), i32({3})}, {f32({})}, {}, {}}, {"grad_norm", "i32[3]"});
  expect_error({Op::clip_coef, {f32({2})}, {f32({})}, {}, {Scalar(1.0f)}}, {"clip_coef", "f32[2]"});
  Tensor a = f32({4, 4});
  expect_error({Op::mm, {a, f32({4, 4})}, {a}, {0, 0}, {Scalar(1.0f)}}, {"mm", "shares memory with input 0"});
}

TEST_F(Misuse, ProgramOrder) {
  auto p = b->new_program();
  Tensor x = f32({2, 3}), w = f32({4, 3});
  EXPECT_THROW(p->replay(), Error);  // not finalized
  p->record({Op::linear, {x, w}, {f32({2, 4})}, {}, {}});
  p->finalize();
  try {
    p->record({Op::linear, {x, w}, {f32({2, 4})}, {}, {}});
    ADD_FAILURE() << "record after finalize did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("linear"), std::string::npos) << e.what();
  }
  EXPECT_THROW(p->finalize(), Error);
  EXPECT_THROW(p->set("no_such_slot", 1.0f), Error);
  EXPECT_NO_THROW(p->replay());
}

}  // namespace
}  // namespace edgetrain
