// Model files as other tools write them, and what edgetrain says of each: GGUF files with keys and tensors
// that change the math, quantized GGUF imports with their measured q4gsw error, and `edgetrain info FILE`'s
// verdict on whether it can train a file, with every reason when not. Hugging Face config.json:
// test_model_files_hf.cpp. The rule under test: a field that changes the math is read, or is an error naming
// it, never a silent default.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "edgetrain/backends.h"
#include "edgetrain/interop.h"
#include "edgetrain/tokenizer.h"
#include "io/gguf.h"
#include "io/llama_names.h"
#include "train/run.h"
#include "harness/cli_child.h"
#include "harness/error_of.h"
#include "harness/temp_files.h"
#include "harness/model_helpers.h"

namespace edgetrain::test {
namespace {

std::string tmp(const std::string& name) { return temp_path("model_files", name); }


// ---- GGUF keys and tensors ----

using V = gguf::Value;

// `src` rewritten with metadata `set` (replacing or adding), keys `drop` removed, and tensors `extra` added.
void rewrite_gguf(const std::string& src, const std::string& dst, const std::vector<std::pair<std::string, V>>& set,
                  const std::vector<std::string>& drop = {},
                  const std::vector<std::pair<std::string, uint32_t>>& retype = {},
                  const std::vector<std::string>& extra = {}) {
  const gguf::File f = gguf::File::open(src);
  gguf::Writer w;
  for (const auto& [k, v] : f.metadata()) {
    bool skip = std::find(drop.begin(), drop.end(), k) != drop.end();
    for (const auto& s : set) skip |= s.first == k;
    if (!skip) w.add_kv(k, v);
  }
  for (const auto& [k, v] : set) w.add_kv(k, v);
  for (const auto& t : f.tensors()) {
    uint32_t type = t.type;
    std::vector<uint8_t> bytes(f.data(t), f.data(t) + t.nbytes);
    for (const auto& [name, to] : retype)
      if (name == t.name) {
        type = to;
        bytes.assign(gguf::tensor_bytes(to, t.ne, name), 0);
      }
    w.add_tensor(t.name, t.ne, type, std::move(bytes));
  }
  for (const std::string& name : extra) w.add_tensor(name, {8}, gguf::F32, std::vector<uint8_t>(32, 0));
  w.save(dst);
}

V u32s(std::vector<uint32_t> v) {
  V a;
  a.type = gguf::VType::ARRAY;
  a.elem = gguf::VType::U32;
  for (uint32_t x : v) a.arr.push_back(V::u32(x));
  return a;
}

TEST(ModelFiles, GgufKeysAndTensorsThatChangeTheMathAreErrorsNamingThem) {
  auto be = make_cpu_backend();
  Model m(*be, tiny_config(TrainMode::fp32));
  m.init(6);
  const std::string good = tmp("good.gguf"), bad = tmp("bad.gguf");
  save_gguf(good, m, GgufType::F32, make_byte_tokenizer().get());
  EXPECT_HAS(describe_model_file(good), "trainable: yes");
  struct Case {
    const char* what;
    std::vector<std::pair<std::string, V>> set;
    std::vector<std::pair<std::string, uint32_t>> retype;
    std::vector<std::string> extra;
    const char* needle;
  };
  const std::vector<Case> cases = {
      {"yarn", {{"llama.rope.scaling.type", V::str("yarn")}}, {}, {}, "'llama.rope.scaling.type' = \"yarn\""},
      {"linear x4", {{"llama.rope.scaling.type", V::str("linear")}, {"llama.rope.scaling.factor", V::f32(4)}}, {}, {},
       "'llama.rope.scaling.factor' = 4"},
      {"old scale key", {{"llama.rope.scale_linear", V::f32(2)}}, {}, {}, "'llama.rope.scale_linear' = 2"},
      {"attn factor", {{"llama.rope.scaling.attn_factor", V::f32(0.5f)}}, {}, {}, "'llama.rope.scaling.attn_factor' = 0.5"},
      {"experts", {{"llama.expert_count", V::u32(8)}}, {}, {}, "llama.expert_count = 8"},
      {"unknown key", {{"llama.attention.sliding_window", V::u32(4)}}, {}, {}, "'llama.attention.sliding_window'"},
      {"per-layer heads", {{"llama.attention.head_count", u32s({2, 2})}}, {}, {}, "is an array"},
      {"key length without the tensors",
       {{"llama.attention.key_length", V::u32(8)}, {"llama.rope.dimension_count", V::u32(8)}}, {}, {},
       "tensor 'blk.0.attn_q.weight' has the wrong shape"},
      {"value length", {{"llama.attention.key_length", V::u32(8)}, {"llama.attention.value_length", V::u32(16)}}, {}, {},
       "llama.attention.value_length = 16 differs from llama.attention.key_length = 8"},
      {"partial rotary", {{"llama.rope.dimension_count", V::u32(8)}}, {}, {}, "llama.rope.dimension_count = 8 differs"},
      {"vocab size", {{"llama.vocab_size", V::u32(300)}}, {}, {}, "llama.vocab_size = 300 differs"},
      {"split", {{"split.count", V::u32(3)}}, {}, {}, "split.count = 3"},
      {"another architecture", {{"general.architecture", V::str("gemma2")}}, {}, {},
       "'gemma2': edgetrain trains 'llama', 'qwen2' and 'qwen3' only"},
      {"qwen2 keys missing", {{"general.architecture", V::str("qwen2")}}, {}, {},
       "metadata key 'qwen2.embedding_length' is missing"},
      {"Q5_0 tensor", {}, {{"blk.0.ffn_up.weight", 6}}, {}, "'blk.0.ffn_up.weight' is Q5_0, which edgetrain does not decode"},
      {"IQ4_NL tensor", {}, {{"blk.1.attn_k.weight", 20}}, {}, "'blk.1.attn_k.weight' is IQ4_NL"},
      {"zero rope factors", {}, {}, {"rope_freqs.weight"}, "'rope_freqs.weight' holds 0.000000"},
      {"bias", {}, {}, {"blk.0.attn_q.bias"}, "'blk.0.attn_q.bias' (a bias"},
      {"old quantization", {{"general.quantization_version", V::u32(1)}}, {{"blk.0.ffn_up.weight", 2}}, {},
       "general.quantization_version = 1"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    rewrite_gguf(good, bad, k.set, {}, k.retype, k.extra);
    const std::string e = error_of([&] { load_gguf_model(bad, *be, TrainMode::qat, 32); });
    EXPECT_HAS(e, k.needle);
    EXPECT_HAS(e, bad);
    EXPECT_HAS(error_of([&] { import_masters(bad); }), k.needle);  // train --init's path
    const std::string info = describe_model_file(bad);
    EXPECT_HAS(info, "trainable: no");
    EXPECT_HAS(info, k.needle);
  }
  // Keys that say "no scaling" in llama.cpp's terms are fine.
  rewrite_gguf(good, bad, {{"llama.rope.scaling.type", V::str("linear")}, {"llama.rope.scaling.factor", V::f32(1)},
                           {"llama.rope.scaling.original_context_length", V::u32(4096)},
                           {"llama.expert_count", V::u32(0)}, {"quantize.imatrix.file", V::str("x.dat")}});
  EXPECT_NO_THROW(load_gguf_model(bad, *be, TrainMode::qat, 32));
  // Several problems: info lists them all, the import names the first and counts the rest.
  rewrite_gguf(good, bad, {{"llama.rope.scaling.type", V::str("yarn")}, {"llama.foo", V::u32(1)}}, {},
               {{"blk.0.ffn_up.weight", 6}}, {"rope_freqs.weight"});
  const std::string info = describe_model_file(bad);
  EXPECT_HAS(info, "trainable: no, 2 problems");  // key problems stop before the tensors are looked at
  EXPECT_HAS(error_of([&] { load_gguf_model(bad, *be, TrainMode::qat, 32); }), "(and 1 more problem; `edgetrain info");
  rewrite_gguf(good, bad, {}, {}, {{"blk.0.ffn_up.weight", 6}}, {"rope_freqs.weight", "blk.0.attn_q.bias"});
  EXPECT_HAS(describe_model_file(bad), "trainable: no, 3 problems");
}

// ---- quantized GGUF imports: the measured q4gsw error ----

TEST(ModelFiles, KQuantImportReportsItsQ4Error) {
  auto be = make_cpu_backend();
  ModelConfig c = tiny_config(TrainMode::fp32);
  c.dim = 256, c.n_heads = 4, c.ffn_dim = 256;  // rows of whole Q4_K super-blocks
  Model m(*be, c);
  m.init(8);
  const std::string path = tmp("q4_k.gguf");
  const GgufExportReport rep = save_gguf(path, m, GgufType::Q4_K);
  EXPECT_EQ(rep.requantized, 14);
  ASSERT_NE(rep.error.worst(), nullptr);
  EXPECT_GT(rep.error.overall(), 0.0);
  const gguf::File f = gguf::File::open(path);
  EXPECT_EQ(f.tensor("blk.0.attn_q.weight")->type, static_cast<uint32_t>(gguf::Q4_K));
  EXPECT_EQ(f.tensor("output.weight")->type, static_cast<uint32_t>(gguf::F32));
  for (TrainMode mode : {TrainMode::qat, TrainMode::qlora}) {
    ImportInfo info;
    auto back = load_gguf_model(path, *be, mode, 32, &info);
    ASSERT_EQ(info.q4_error.tensors.size(), 14u);
    // Masters are the file's weights decoded exactly; the report measures q4gsw against them.
    for (Param& p : back->params()) {
      if (!p.quantized()) continue;
      const std::vector<float> file = f.to_f32(*f.tensor(llama_names::gguf_name(p.name)));
      EXPECT_EQ(back->backend().to_vector<float>(p.value), file) << p.name;
    }
    const auto* worst = info.q4_error.worst();
    ASSERT_NE(worst, nullptr);
    EXPECT_GT(worst->rel_rms, 0.0);
    EXPECT_HAS(info.q4_error.worst_line(), worst->name);
  }
  ImportInfo fp32;
  load_gguf_model(path, *be, TrainMode::fp32, 32, &fp32);
  EXPECT_TRUE(fp32.q4_error.tensors.empty());
  // train --init prints and returns the same measurement.
  ModelConfig qc = c;
  qc.mode = TrainMode::qat;
  Model target(*be, qc);
  target.init(1);
  const training::InitReport ir = training::init_weights_from(path, target);
  ASSERT_EQ(ir.import_error.tensors.size(), 14u);
  ImportInfo qat;
  load_gguf_model(path, *be, TrainMode::qat, 32, &qat);
  EXPECT_EQ(ir.import_error.worst()->name, qat.q4_error.worst()->name);
  EXPECT_DOUBLE_EQ(ir.import_error.overall(), qat.q4_error.overall());
}

std::string run_cli(const std::string& args, int* status = nullptr) {
  const std::string cmd = cli_path() + " " + args + " 2>&1";
  std::string out;
  int rc = -1;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    for (size_t k; (k = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, k);
    rc = ::pclose(p);
  }
  if (status) *status = rc;
  return out;
}

TEST(ModelFiles, CliConvertsToKQuantsAndInfoSaysWhy) {
  auto be = make_cpu_backend();
  ModelConfig c = tiny_config(TrainMode::fp32);
  c.dim = 256, c.n_heads = 4, c.ffn_dim = 256, c.vocab = 256;
  Model m(*be, c);
  m.init(9);
  const std::string f32 = tmp("cli_f32.gguf"), q4k = tmp("cli_q4k.gguf"), q8 = tmp("cli_q8.gguf");
  save_gguf(f32, m, GgufType::F32, make_byte_tokenizer().get());
  int rc = 0;
  std::string out = run_cli("convert " + f32 + " " + q4k + " --to gguf-q4_k --mode fp32", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_HAS(out, "0 linears exact Q4_0, 14 quantized from the weights");
  EXPECT_HAS(out, "relative RMS weight error");
  EXPECT_HAS(out, "worst: ");
  out = run_cli("convert " + f32 + " " + q8 + " --to gguf-q8_0 --mode fp32", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(gguf::File::open(q8).tensor("blk.1.ffn_down.weight")->type, static_cast<uint32_t>(gguf::Q8_0));
  out = run_cli("convert " + q4k + " " + tmp("cli_back.gguf") + " --to gguf-f32 --mode qat", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_HAS(out, "q4gsw (group 32) against the file's weights: relative RMS weight error");
  out = run_cli("info " + q4k, &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_HAS(out, "blk.0.attn_q.weight Q4_K [256, 256]");
  EXPECT_HAS(out, "trainable: yes");
  rewrite_gguf(q4k, tmp("cli_bad.gguf"), {{"llama.rope.scaling.type", V::str("yarn")}});
  out = run_cli("info " + tmp("cli_bad.gguf"), &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_HAS(out, "trainable: no, 1 problem:\n    - metadata key 'llama.rope.scaling.type' = \"yarn\"");
  out = run_cli("convert " + f32 + " " + tmp("x.gguf") + " --to gguf-q5_k", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_HAS(out, "unknown GGUF type 'q5_k' (choose f32, f16, q4_0, q8_0 or q4_k)");
}

}  // namespace
}  // namespace edgetrain::test
