// Model checkpoints on the CPU backend (tiny preset): a save/load round trip is bit-exact (masters, AdamW
// moments, step counts), and every kind of broken checkpoint is rejected naming the file and the problem,
// leaving the model untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <random>

#include "edgetrain/backends.h"
#include "edgetrain/checkpoint.h"
#include "edgetrain/safetensors.h"
#include "harness/temp_files.h"

namespace edgetrain {
namespace {

namespace st = safetensors;
using Bytes = std::vector<uint8_t>;

// ---- checkpoints (tiny preset, CPU backend) ----

class CheckpointIO : public test::TempDirTest {
 protected:
  std::unique_ptr<Backend> be = make_cpu_backend();
  ModelConfig cfg = ModelConfig::preset("tiny");

  // An initialised model with non-trivial moments and step count.
  std::unique_ptr<Model> trained(uint64_t seed) {
    auto m = std::make_unique<Model>(*be, cfg);
    m->init(seed);
    std::mt19937 rng(static_cast<unsigned>(seed));
    std::normal_distribution<float> nd(0.0f, 1e-3f);
    for (Param& p : m->params())
      if (p.trainable)
        for (Tensor* t : {&p.m, &p.v}) {
          std::vector<float> v(static_cast<size_t>(t->numel()));
          for (float& x : v) x = std::fabs(nd(rng));
          be->upload(*t, v.data(), v.size() * 4);
        }
    m->steps_done = 17;
    m->adam_steps = 15;  // two steps skipped
    return m;
  }

  std::map<std::string, Bytes> state_bytes(Model& m) {
    std::map<std::string, Bytes> out;
    for (const Model::Named& nt : m.state_tensors()) {
      Bytes b(nt.tensor.nbytes());
      be->download(nt.tensor, b.data(), b.size());
      out[nt.name] = b;
    }
    return out;
  }

  // Copies a checkpoint, letting `edit` change the writer (drop/replace tensors, metadata).
  void rewrite(const std::string& src, const std::string& dst, const std::string& drop,
               const std::function<void(st::Writer&, const st::Reader&)>& edit) {
    st::Reader r = st::Reader::open(src);
    st::Writer w;
    for (const st::TensorInfo& t : r.tensors())
      if (t.name != drop) w.add(t.name, t.dtype, t.shape, r.data(t.name), t.nbytes());
    for (const auto& [k, v] : r.metadata()) w.set_metadata(k, v);
    edit(w, r);
    w.save(dst);
  }

  void expect_load_error(const std::string& file, const std::vector<std::string>& fragments) {
    Model fresh(*be, cfg);
    fresh.init(99);
    auto before = state_bytes(fresh);
    std::string what = "(no error)";
    try {
      load_checkpoint(file, fresh);
    } catch (const Error& e) {
      what = e.what();
    }
    EXPECT_NE(what.find(file), std::string::npos) << what;
    for (const std::string& f : fragments) EXPECT_NE(what.find(f), std::string::npos) << "missing '" << f << "' in " << what;
    EXPECT_TRUE(state_bytes(fresh) == before) << "a rejected load changed the model";
    EXPECT_EQ(fresh.steps_done, 0);
  }
};

TEST_F(CheckpointIO, SaveLoadRoundTripIsBitExact) {
  auto m = trained(1);
  save_checkpoint(path("c.safetensors"), *m, {{"trainer", "{\"pos\": 123}"}, {"tokenizer", "bytes"}});
  EXPECT_EQ(read_checkpoint_config(path("c.safetensors")).to_json(), cfg.to_json());
  auto meta = read_checkpoint_metadata(path("c.safetensors"));
  EXPECT_EQ(meta.at("format"), kCheckpointFormat);
  EXPECT_EQ(meta.at("q4_layout"), "W_4X8");
  EXPECT_EQ(meta.at("step"), "17");
  EXPECT_EQ(meta.at("adam_steps"), "15");

  Model fresh(*be, cfg);
  fresh.init(2);  // different weights, overwritten by the load
  std::map<std::string, std::string> got;
  load_checkpoint(path("c.safetensors"), fresh, &got);
  EXPECT_EQ(fresh.steps_done, 17);
  EXPECT_EQ(fresh.adam_steps, 15);
  EXPECT_EQ(got.at("trainer"), "{\"pos\": 123}");
  EXPECT_EQ(got.at("tokenizer"), "bytes");
  auto a = state_bytes(*m), b = state_bytes(fresh);
  ASSERT_EQ(a.size(), b.size());
  size_t q4 = 0;
  for (const auto& [name, bytes] : a) {
    EXPECT_TRUE(bytes == b.at(name)) << name << " differs after the round trip";
    q4 += name.find(".q4_codes") != std::string::npos;
  }
  EXPECT_GT(q4, 0u);
  st::Reader r = st::Reader::open(path("c.safetensors"));
  EXPECT_EQ(r.info("layers.0.attention.wq.weight.q4_codes").dtype, "U32");
  EXPECT_EQ(r.info("layers.0.attention.wq.weight.adam_m").dtype, "F32");

  EXPECT_THROW(save_checkpoint(path("c.safetensors"), *m, {{"step", "3"}}), Error);
  EXPECT_THROW(save_checkpoint(path("missing/c.safetensors"), *m), Error);
}

TEST_F(CheckpointIO, BrokenCheckpointsAreRejectedNamingTheProblem) {
  auto m = trained(3);
  const std::string good = path("good.safetensors"), bad = path("bad.safetensors");
  save_checkpoint(good, *m);
  auto none = [](st::Writer&, const st::Reader&) {};

  rewrite(good, bad, "norm.weight", none);
  expect_load_error(bad, {"'norm.weight'", "missing"});

  const int64_t D = cfg.dim;
  std::vector<float> wrong(static_cast<size_t>(D + 1), 1.0f);
  rewrite(good, bad, "layers.1.ffn_norm.weight", [&](st::Writer& w, const st::Reader&) {
    w.add("layers.1.ffn_norm.weight", "F32", {D + 1}, wrong.data(), wrong.size() * 4);
  });
  expect_load_error(bad, {"'layers.1.ffn_norm.weight'", "shape [33]", "expected [32]"});

  rewrite(good, bad, "norm.weight", [&](st::Writer& w, const st::Reader& r) {
    w.add("norm.weight", "I32", {D}, r.data("norm.weight"), static_cast<size_t>(D) * 4);
  });
  expect_load_error(bad, {"'norm.weight'", "dtype I32"});

  rewrite(good, bad, "", [&](st::Writer& w, const st::Reader&) { w.add("extra", "F32", {}, wrong.data(), 4); });
  expect_load_error(bad, {"unexpected tensor 'extra'"});

  rewrite(good, bad, "", [](st::Writer& w, const st::Reader&) { w.set_metadata("format", "other-v9"); });
  expect_load_error(bad, {"format is 'other-v9'"});

  ModelConfig other = cfg;
  other.rope_theta = 500000.0f;
  rewrite(good, bad, "", [&](st::Writer& w, const st::Reader&) { w.set_metadata("config", other.to_json()); });
  expect_load_error(bad, {"config differs", "rope_theta"});

  rewrite(good, bad, "", [](st::Writer& w, const st::Reader&) { w.set_metadata("step", "-4"); });
  expect_load_error(bad, {"'step'"});
  rewrite(good, bad, "", [](st::Writer& w, const st::Reader&) { w.set_metadata("adam_steps", "18"); });
  expect_load_error(bad, {"adam_steps = 18 exceeds step = 17"});

  // Flip one stored code by 4 steps: the codes no longer follow from the masters and scales.
  const std::string codes = "layers.0.feed_forward.w2.weight.q4_codes";
  Bytes flipped;
  rewrite(good, bad, codes, [&](st::Writer& w, const st::Reader& r) {
    flipped.assign(r.data(codes), r.data(codes) + r.info(codes).nbytes());
    flipped[5] ^= 0x40;
    w.add(codes, "U32", r.info(codes).shape, flipped.data(), flipped.size());
  });
  expect_load_error(bad, {"'" + codes + "' disagrees"});

  {
    std::ofstream f(bad, std::ios::binary | std::ios::trunc);
    f.write("\x01\x02\x03", 3);
  }
  expect_load_error(bad, {"too short"});
  // The good file still loads after all that.
  Model fresh(*be, cfg);
  load_checkpoint(good, fresh);
  EXPECT_EQ(fresh.steps_done, 17);
  // A file from before "adam_steps" existed: every step it took was an update.
  st::Reader r = st::Reader::open(good);
  st::Writer old;
  for (const st::TensorInfo& t : r.tensors()) old.add(t.name, t.dtype, t.shape, r.data(t.name), t.nbytes());
  for (const auto& [k, v] : r.metadata())
    if (k != "adam_steps") old.set_metadata(k, v);
  old.save(bad);
  load_checkpoint(bad, fresh);
  EXPECT_EQ(fresh.adam_steps, 17);
}

}  // namespace
}  // namespace edgetrain
