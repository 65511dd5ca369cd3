// Sample packing at the model level (the positions argument of Model::accumulate, evaluate and gradients):
// samples of different lengths packed into sequences give the loss and the gradients of each sample in a
// sequence of its own (padded, padding labels -1), on every backend under test, for Llama, a Llama 3 with
// grouped-query attention and rope scaling, and qwen3, in fp32 and fp16. The same tokens as plain
// sequences (no positions) must give another loss, so an attention that ignored pos fails here; bad
// positions are refused with a message.
// Note: a model whose attention is masked right does not depend on rope's pos in exact arithmetic (rope
// makes q.k depend on the distance t - j only); the op tests (test_llama_ops.cpp) check rope's pos itself.
#include <gtest/gtest.h>

#include <cmath>

#include "edgetrain/backends.h"
#include "edgetrain/model.h"
#include "harness/error_of.h"
#include "harness/op_case.h"

namespace edgetrain::test {
namespace {

constexpr int64_t kVocab = 64;

std::vector<std::pair<std::string, ModelConfig>> variants() {
  ModelConfig llama = ModelConfig::preset("tiny");
  llama.mode = TrainMode::fp32;
  llama.vocab = kVocab;
  // All with heads of 16, so that the GPU backends compile one set of attention kernels for the three.
  ModelConfig l3 = llama;  // one kv head for two query heads, scaled rope
  l3.rope_theta = 500000.0f, l3.n_kv_heads = 1;
  l3.rope_factors = {1.0f, 1.0f, 2.5f, 8.0f, 8.0f, 8.0f, 8.0f, 8.0f};
  ModelConfig q3 = llama;
  q3.arch = "qwen3";
  return {{"llama", llama}, {"llama3_gqa", l3}, {"qwen3", q3}};
}

// One batch laid out two ways: `packed` holds the samples back to back in B rows of T tokens with their
// positions; `alone` holds each sample at the start of its own row of T tokens (padding: token 0, label -1).
struct Layout {
  std::vector<int32_t> tokens, labels, positions;
  int64_t B = 0, T = 0;
};
struct Batches {
  Layout packed, alone;
};

// Rows of samples of the given lengths (each row's lengths sum to T). A sample's labels are its next
// tokens, -1 at its last token (its next token belongs to the next sample).
Batches make_batches(uint32_t seed, const std::vector<std::vector<int64_t>>& rows, int64_t T) {
  Rng r(seed);
  Batches b;
  b.packed.B = static_cast<int64_t>(rows.size());
  b.packed.T = b.alone.T = T;
  for (const auto& row : rows) {
    int64_t used = 0;
    for (int64_t len : row) {
      std::vector<int32_t> tok;
      for (int64_t i = 0; i < len; ++i) tok.push_back(r.integer(0, kVocab - 1));
      for (int64_t i = 0; i < len; ++i) {
        const int32_t label = i + 1 < len ? tok[static_cast<size_t>(i + 1)] : -1;
        b.packed.tokens.push_back(tok[static_cast<size_t>(i)]);
        b.packed.labels.push_back(label);
        b.packed.positions.push_back(static_cast<int32_t>(i));
        b.alone.tokens.push_back(tok[static_cast<size_t>(i)]);
        b.alone.labels.push_back(label);
      }
      for (int64_t i = len; i < T; ++i) {
        b.alone.tokens.push_back(0);
        b.alone.labels.push_back(-1);
      }
      ++b.alone.B;
      used += len;
    }
    EXPECT_EQ(used, T) << "a row's samples must fill it";
  }
  return b;
}

// The gradients of `got` against `want`, per tensor, in units of the tolerance u * (1e-5 * max|want| +
// 1e-4 |want|): the largest ratio over all elements (<= 1: within tolerance). The packed and the alone
// gradients are the same sums of fp32 terms, over rows in another order and with other GEMM shapes (16 vs
// 64 rows here), so in fp32 (u = 1) they differ by rounding: a few ulps of the tensor's largest terms.
// fp16 (u = 10): an activation one fp32 ulp apart may round to the neighbouring fp16 operand, which moves
// its products by up to 2^-11 relative.
double gradient_distance(const std::map<std::string, std::vector<float>>& got,
                         const std::map<std::string, std::vector<float>>& want, double u,
                         std::string* worst = nullptr) {
  EXPECT_EQ(got.size(), want.size());
  double d = 0;
  for (const auto& [name, w] : want) {
    const std::vector<float>& g = got.at(name);
    double top = 0;
    for (float x : w) top = std::max(top, static_cast<double>(std::fabs(x)));
    EXPECT_GT(top, 0.0) << name;
    for (size_t i = 0; i < w.size(); ++i) {
      const double r = std::fabs(static_cast<double>(g[i]) - w[i]) / (u * (1e-5 * top + 1e-4 * std::fabs(w[i])));
      if (!(r <= d)) {
        d = r;
        if (worst) *worst = name + "[" + std::to_string(i) + "]: " + std::to_string(g[i]) + " vs " + std::to_string(w[i]);
      }
    }
  }
  return d;
}
void expect_same_gradients(const std::map<std::string, std::vector<float>>& packed,
                           const std::map<std::string, std::vector<float>>& alone, double u = 1.0) {
  std::string worst;
  const double d = gradient_distance(packed, alone, u, &worst);
  EXPECT_LE(d, 1.0) << "worst " << worst;
}

// Two rows of samples: lengths 5, 3, 7, 1 (a sample of one token) and 2, 9, 4, 1; 8 samples alone.
const std::vector<std::vector<int64_t>> kRows = {{5, 3, 7, 1}, {2, 9, 4, 1}};

// accumulate's loss share and the gradients it leaves (and, for one variant, evaluate's loss). Each layout
// records its train program once (a switch re-records): the loss comes from accumulate, the gradients
// from gradients(), one replay later.
TEST(Packing, PackedSamplesTrainAsAlone) {
  for (const std::string& bname : test_backends()) {
    for (const auto& [vname, cfg] : variants()) {
      for (Precision prec : {Precision::fp32, Precision::fp16}) {
        if (prec == Precision::fp16 && vname != "llama") continue;
        SCOPED_TRACE(bname + " " + vname + (prec == Precision::fp16 ? " fp16" : " fp32"));
        const double u = prec == Precision::fp16 ? 10.0 : 1.0;
        Backend& be = backend_for_tests(bname);
        Model m(be, cfg);
        m.init(5);
        m.set_precision(prec);
        const Batches b = make_batches(21, kRows, 16);
        const Layout &P = b.packed, &A = b.alone;
        int64_t valid = 0;
        for (int32_t l : P.labels) valid += l >= 0;
        // The loss share: the mean over the same valid labels, so the same per-token loss sum.
        const double la = m.accumulate(A.tokens, A.labels, A.B, A.T, valid);
        const auto ga = m.gradients(A.tokens, A.labels, A.B, A.T);
        const double lp = m.accumulate(P.tokens, P.labels, P.B, P.T, valid, P.positions);
        expect_same_gradients(m.gradients(P.tokens, P.labels, P.B, P.T, P.positions), ga, u);
        EXPECT_NEAR(lp, la, 1e-6 * std::fabs(la));
        // The same tokens as plain sequences (what an attention that ignored pos computes): every sample
        // after a row's first sees the samples before it, and loss and gradients move far beyond rounding.
        const double plain = m.accumulate(P.tokens, P.labels, P.B, P.T, valid);
        EXPECT_GT(std::fabs(plain - la), 100 * 1e-6 * std::fabs(la)) << "packed " << lp << ", plain " << plain;
        EXPECT_GT(gradient_distance(m.gradients(P.tokens, P.labels, P.B, P.T), ga, u), 100.0);
        if (vname != "llama3_gqa") continue;
        // evaluate with positions: the samples' mean loss alone; switching between the packed and the plain
        // programs (each switch re-records) gives the same results again, bit for bit.
        const float ep = m.evaluate(P.tokens, P.labels, P.B, P.T, P.positions);
        EXPECT_NEAR(ep, m.evaluate(A.tokens, A.labels, A.B, A.T), 1e-6 * std::fabs(la));
        const float eplain = m.evaluate(P.tokens, P.labels, P.B, P.T);
        EXPECT_GT(std::fabs(eplain - ep), 1e-4 * std::fabs(la));
        EXPECT_EQ(m.evaluate(P.tokens, P.labels, P.B, P.T, P.positions), ep);
        EXPECT_EQ(m.evaluate(P.tokens, P.labels, P.B, P.T), eplain);
      }
    }
  }
}

TEST(Packing, BadPositionsAreRefused) {
  auto be = make_cpu_backend();
  Model m(*be, variants()[0].second);
  m.init(7);
  const Batches b = make_batches(23, kRows, 16);
  const Layout& P = b.packed;
  std::vector<int32_t> pos = P.positions;
  pos.pop_back();
  EXPECT_NE(error_of([&] { m.evaluate(P.tokens, P.labels, 2, 16, pos); }).find("expected 32 positions"),
            std::string::npos);
  pos = P.positions;
  pos[16] = 1;  // row 1 must start a sample
  EXPECT_NE(error_of([&] { m.evaluate(P.tokens, P.labels, 2, 16, pos); })
                .find("packed position 1 at row 1, token 0 must be 0 (a sample's first token) or 0"),
            std::string::npos);
  pos = P.positions;
  pos[3] = 5;  // a jump inside a sample
  const std::string e = error_of([&] { m.gradients(P.tokens, P.labels, 2, 16, pos); });
  EXPECT_NE(e.find("packed position 5 at row 0, token 3 must be 0 (a sample's first token) or 3"), std::string::npos) << e;
}

}  // namespace
}  // namespace edgetrain::test
