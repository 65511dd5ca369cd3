// --init from a 4-bit (qat) checkpoint keeps its model: the file's codes and scales are used as saved, even
// when its masters have drifted past the frozen scales (as QAT makes them), so the new run's step-0 loss is
// the file's own; --requantize derives new ones from the masters instead and reports how far they moved.
#include <gtest/gtest.h>

#include <cstring>
#include <regex>

#include "edgetrain/backends.h"
#include "edgetrain/checkpoint.h"
#include "edgetrain/q4gsw.h"
#include "edgetrain/safetensors.h"
#include "harness/cli_child.h"
#include "train/run.h"

namespace edgetrain::test {
namespace {

using TrainInit = CliTest;
const std::string kPlanted = "layers.0.attention.wq.weight";

// Moves two masters of every row of `name` outside [-8s, 7s] of their group's scale s (to 10s and -12s),
// with the codes QAT's requantization gives them (15 and 0), and rewrites the file: a checkpoint as a QAT
// run whose masters drifted would write it.
void plant_drift(const std::string& path, const std::string& name) {
  auto r = safetensors::Reader::open(path);
  const int64_t N = r.info(name).shape[0], K = r.info(name).shape[1];
  const q4::Geometry g(N, K, std::stoll(r.metadata().at("group_size")));
  std::vector<float> w = r.to_f32(name), s = r.to_f32(name + ".q4_scales");
  std::vector<uint32_t> words(static_cast<size_t>(g.words()));
  std::memcpy(words.data(), r.data(name + ".q4_codes"), words.size() * 4);
  std::vector<uint8_t> codes = q4::unpack_w4x8(g, words.data());
  for (int64_t n = 0; n < N; ++n) {
    const float sc = s[n];  // group 0 of row n
    ASSERT_GT(sc, 0.0f);
    w[n * K + 0] = 10 * sc, w[n * K + 1] = -12 * sc;
    codes[n * K + 0] = q4::requant_code(w[n * K + 0], sc), codes[n * K + 1] = q4::requant_code(w[n * K + 1], sc);
  }
  words = q4::pack_w4x8(g, codes.data());
  safetensors::Writer out;
  for (const auto& [k, v] : r.metadata()) out.set_metadata(k, v);
  for (const auto& t : r.tensors()) {
    const uint8_t* src = t.name == name ? reinterpret_cast<const uint8_t*>(w.data())
                         : t.name == name + ".q4_codes" ? reinterpret_cast<const uint8_t*>(words.data())
                                                         : r.data(t.name);
    out.add_owned(t.name, t.dtype, t.shape, std::vector<uint8_t>(src, src + t.nbytes()));
  }
  out.save(path);
}

bool same_bytes(Backend& be, const Tensor& t, const safetensors::Reader& r, const std::string& name) {
  std::vector<uint8_t> got(t.nbytes());
  be.download(t, got.data(), got.size());
  return r.info(name).nbytes() == got.size() && std::memcmp(got.data(), r.data(name), got.size()) == 0;
}

// The first number after `prefix` in `text` ("" when absent).
std::string number_after(const std::string& text, const std::string& prefix) {
  std::smatch m;
  return std::regex_search(text, m, std::regex(prefix + "([0-9.]+)")) ? m[1].str() : "";
}

TEST_F(TrainInit, QatCheckpointKeepsItsCodesAndScalesUnlessRequantize) {
  const std::string ckpt = dir_ + "/qat/checkpoint.safetensors";
  Outcome base = run(tiny_train(dir_ + "/qat", {"--steps", "4", "--eval-every", "1000"}));
  ASSERT_EQ(base.code(), 0) << base.describe();
  plant_drift(ckpt, kPlanted);
  ASSERT_EQ(load_ok(ckpt), 4) << "the planted file is a valid checkpoint";
  const auto file = safetensors::Reader::open(ckpt);

  // The --init phase alone: what the model holds before its first step.
  for (bool requantize : {false, true}) {
    SCOPED_TRACE(requantize ? "--requantize" : "kept");
    BackendOptions bo;
    bo.threads = 1;
    auto be = make_cpu_backend(bo);
    Model m(*be, read_checkpoint_config(ckpt));
    m.init(1);
    const training::InitReport rep = training::init_weights_from(ckpt, m, requantize);
    EXPECT_EQ(rep.linears, 14);
    EXPECT_EQ(rep.kept, !requantize);
    int codes_same = 0, scales_same = 0;
    for (const Param& p : m.params()) {
      if (!p.quantized()) continue;
      codes_same += same_bytes(*be, p.codes, file, p.name + ".q4_codes");
      scales_same += same_bytes(*be, p.scales, file, p.name + ".q4_scales");
      if (p.name == kPlanted) {
        EXPECT_EQ(same_bytes(*be, p.scales, file, p.name + ".q4_scales"), !requantize);
        EXPECT_EQ(same_bytes(*be, p.codes, file, p.name + ".q4_codes"), !requantize);
      }
      EXPECT_TRUE(same_bytes(*be, p.value, file, p.name)) << p.name << ": the masters are the file's either way";
    }
    if (!requantize) {
      EXPECT_EQ(codes_same, 14);
      EXPECT_EQ(scales_same, 14);
      EXPECT_EQ(rep.rms_change, 0);
    } else {
      EXPECT_GT(rep.rms_change, 0);
      EXPECT_GT(rep.max_change, rep.rms_change);
    }
  }

  // Whole runs: the step-0 validation loss of a run from the file is `edgetrain eval` of the file.
  Outcome eval = run({"eval", "--checkpoint", ckpt, "--backend", "cpu", "--threads", "1", "--corpus", corpus_, "--seq",
                      "16", "--batch", "2", "--batches", "1"});
  ASSERT_EQ(eval.code(), 0) << eval.describe();
  const std::string file_loss = number_after(eval.output, "loss ");
  ASSERT_FALSE(file_loss.empty()) << eval.output;

  Outcome kept = run(tiny_train(dir_ + "/kept", {"--init", ckpt, "--steps", "1"}));
  ASSERT_EQ(kept.code(), 0) << kept.describe();
  EXPECT_NE(kept.output.find("kept the 4-bit weights (codes and scales) of 14 linears as " + ckpt + " saved them"),
            std::string::npos)
      << kept.output;
  EXPECT_EQ(number_after(kept.output, "step 0: validation loss "), file_loss) << kept.output;

  Outcome fresh = run(tiny_train(dir_ + "/requantized", {"--init", ckpt, "--steps", "1", "--requantize"}));
  ASSERT_EQ(fresh.code(), 0) << fresh.describe();
  EXPECT_NE(fresh.output.find("--requantize: new 4-bit scales and codes of 14 linears from the masters"),
            std::string::npos)
      << fresh.output;
  EXPECT_GT(std::stod(number_after(fresh.output, "moved by RMS ")), 0.0) << fresh.output;
  EXPECT_NE(number_after(fresh.output, "step 0: validation loss "), file_loss) << fresh.output;

  // A file without codes (an fp32 run) or at another group size: quantizing the masters is the only way.
  Outcome other = run(tiny_train(dir_ + "/gs64", {"--init", ckpt, "--steps", "1", "--group-size", "64"}));
  ASSERT_EQ(other.code(), 0) << other.describe();
  EXPECT_NE(other.output.find("quantized from the masters: the only choice, as its group size is 32, this run's is 64"),
            std::string::npos)
      << other.output;
  Outcome bad = run(tiny_train(dir_ + "/bad", {"--steps", "1", "--requantize"}));
  EXPECT_NE(bad.code(), 0) << bad.describe();
  EXPECT_NE(bad.output.find("--requantize applies to the 4-bit weights of --init's file"), std::string::npos)
      << bad.output;
}

}  // namespace
}  // namespace edgetrain::test
