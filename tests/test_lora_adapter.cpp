// LoRA adapters out and in (edgetrain/interop.h): a qlora model's adapters written as llama.cpp's adapter
// GGUF or as a PEFT folder and read back onto the same base give the same model bit for bit (F32); the PEFT
// folder has PEFT's layout (tests/data/peft_lora_layout.json, written from PEFT's conventions) and PEFT's
// orientation (HF-order base + alpha/r * B A from the file is our merged weight in HF order); every bad
// adapter is one clear error naming the tensor, and leaves the model as it was. llama.cpp's own reading of
// the GGUF adapter is test_llamacpp_lora.cpp's; the CLI's is test_lora_adapter_cli.cpp's.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "edgetrain/backends.h"
#include "edgetrain/half.h"
#include "edgetrain/interop.h"
#include "edgetrain/q4gsw.h"
#include "edgetrain/safetensors.h"
#include "harness/lora_helpers.h"
#include "harness/temp_files.h"
#include "io/gguf.h"

namespace edgetrain::test {
namespace {

using json = nlohmann::json;

std::string tmp(const std::string& name) { return temp_path("lora", name); }

std::unique_ptr<Backend> cpu() {
  BackendOptions bo;
  bo.threads = 1;
  return make_cpu_backend(bo);
}

// Every adapter parameter of `m` by name.
std::map<std::string, std::vector<float>> adapters_of(Model& m) {
  std::map<std::string, std::vector<float>> out;
  for (Param& p : m.params())
    if (p.name.find(".lora_") != std::string::npos) out[p.name] = m.backend().to_vector<float>(p.value);
  return out;
}

// The adapter at `path` read back onto `m`'s own base: the same adapters and logits, bit for bit.
void expect_round_trip_exact(Model& m, const std::string& path) {
  const LoraAdapter a = read_lora_adapter(path);
  EXPECT_EQ(a.arch.empty() ? m.config().arch : a.arch, m.config().arch);
  EXPECT_EQ(a.rank, m.config().lora_rank);
  EXPECT_EQ(a.alpha, m.config().lora_alpha);
  EXPECT_EQ(a.targets, m.config().lora_targets);
  EXPECT_EQ(a.n_layers, m.config().n_layers);
  auto be = cpu();
  auto back = attach_lora_adapter(m, a, *be);
  const auto want = adapters_of(m), got = adapters_of(*back);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, v] : want) EXPECT_TRUE(same_bits(got.at(name), v)) << name;
  EXPECT_TRUE(same_bits(all_logits(*back, lora_test_tokens()), all_logits(m, lora_test_tokens())));
}

TEST(LoraAdapter, GgufRoundTripIsExact) {
  for (const char* arch : {"llama", "qwen2", "qwen3"}) {
    SCOPED_TRACE(arch);
    auto be = cpu();
    auto m = lora_test_model(*be, arch);
    const std::string path = tmp(std::string(arch) + "_adapter.gguf");
    save_lora_gguf(path, *m);
    expect_round_trip_exact(*m, path);

    // What llama.cpp's loader reads (src/llama-adapter.cpp): the keys, and lora_a ne [in, r], lora_b ne [r, out].
    const gguf::File f = gguf::File::open(path);
    EXPECT_EQ(f.get_string("general.architecture"), arch);
    EXPECT_EQ(f.get_string("general.type"), "adapter");
    EXPECT_EQ(f.get_string("adapter.type"), "lora");
    ASSERT_TRUE(f.find("adapter.lora.alpha") && f.find("adapter.lora.alpha")->type == gguf::VType::F32);
    EXPECT_EQ(f.get_float("adapter.lora.alpha"), 8.0);
    EXPECT_EQ(f.tensors().size(), 2u * 7u * 2u);
    const ModelConfig& c = m->config();
    auto ne = [&](const std::string& n) { return f.tensor(n) ? f.tensor(n)->ne : std::vector<uint64_t>{}; };
    EXPECT_EQ(ne("blk.0.attn_q.weight.lora_a"), (std::vector<uint64_t>{64, 4}));
    EXPECT_EQ(ne("blk.0.attn_q.weight.lora_b"), (std::vector<uint64_t>{4, static_cast<uint64_t>(c.q_dim())}));
    EXPECT_EQ(ne("blk.1.attn_k.weight.lora_b"), (std::vector<uint64_t>{4, static_cast<uint64_t>(c.kv_dim())}));
    EXPECT_EQ(ne("blk.1.ffn_down.weight.lora_a"), (std::vector<uint64_t>{128, 4}));
    EXPECT_EQ(ne("blk.1.ffn_down.weight.lora_b"), (std::vector<uint64_t>{4, 64}));
    EXPECT_EQ(f.tensor("blk.0.attn_output.weight.lora_a")->type, gguf::F32);
  }
}

TEST(LoraAdapter, GgufF16HoldsTheRoundedAdapters) {
  auto be = cpu();
  auto m = lora_test_model(*be, "qwen2");
  const std::string path = tmp("f16_adapter.gguf");
  save_lora_gguf(path, *m, GgufType::F16);
  EXPECT_EQ(gguf::File::open(path).tensor("blk.0.attn_q.weight.lora_b")->type, gguf::F16);
  auto back = attach_lora_adapter(*m, read_lora_adapter(path), *be);
  for (const auto& [name, v] : adapters_of(*m)) {
    std::vector<float> rounded(v.size());
    for (size_t i = 0; i < v.size(); ++i) rounded[i] = round_to_f16(v[i]);
    EXPECT_TRUE(same_bits(adapters_of(*back).at(name), rounded)) << name;
  }
}

TEST(LoraAdapter, PeftRoundTripIsExact) {
  for (const char* arch : {"llama", "qwen2", "qwen3"}) {
    SCOPED_TRACE(arch);
    auto be = cpu();
    auto m = lora_test_model(*be, arch);
    const std::string dir = tmp(std::string(arch) + "_peft");
    save_peft_adapter(dir, *m, "org/base-model");
    expect_round_trip_exact(*m, dir);
    EXPECT_EQ(read_lora_adapter(dir).base_model, "org/base-model");
  }
}

// A number of a model dimension named in the expectation file ("dim", "n_heads*head_dim", "r", ...).
int64_t dim_of(const std::string& what, const ModelConfig& c) {
  if (what == "dim") return c.dim;
  if (what == "ffn_dim") return c.ffn_dim;
  if (what == "n_heads*head_dim") return c.n_heads * c.head_dim();
  if (what == "n_kv_heads*head_dim") return c.kv_heads() * c.head_dim();
  if (what == "r") return c.lora_rank;
  ADD_FAILURE() << "unknown dimension '" << what << "' in peft_lora_layout.json";
  return -1;
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return json::parse(in);
}

TEST(LoraAdapter, PeftFolderHasPeftsLayout) {
  const json want = read_json(std::string(EDGETRAIN_SOURCE_DIR) + "/tests/data/peft_lora_layout.json");
  auto be = cpu();
  // Two targets of the seven: target_modules and the keys name those only.
  ModelConfig c = lora_test_config("llama");
  c.lora_targets = "q,v,down";
  c.lora_rank = 3, c.lora_alpha = 12;
  Model m(*be, c);
  m.init(3);
  randomize_adapters(m, 4);
  const std::string dir = tmp("layout_peft");
  save_peft_adapter(dir, m);
  for (const json& f : want["files"]) EXPECT_TRUE(std::filesystem::exists(dir + "/" + f.get<std::string>())) << f;

  const json cfg = read_json(dir + "/adapter_config.json");
  for (const auto& [k, v] : want["config"]["fixed"].items()) {
    ASSERT_TRUE(cfg.contains(k)) << k;
    EXPECT_EQ(cfg[k], v) << k;
  }
  EXPECT_EQ(cfg["r"], 3);
  EXPECT_EQ(cfg["lora_alpha"].get<double>(), 12.0);
  EXPECT_TRUE(cfg["base_model_name_or_path"].is_null());
  std::set<std::string> modules, want_modules;
  for (const json& t : cfg["target_modules"]) modules.insert(t.get<std::string>());
  for (const auto& [name, mod] : want["modules"].items())
    if (("," + c.lora_targets + ",").find("," + mod["target"].get<std::string>() + ",") != std::string::npos)
      want_modules.insert(name);
  EXPECT_EQ(modules, want_modules);
  EXPECT_EQ(want_modules.size(), 3u);

  const auto r = safetensors::Reader::open(dir + "/adapter_model.safetensors");
  for (const auto& [k, v] : want["safetensors_metadata"].items()) EXPECT_EQ(r.metadata().at(k), v.get<std::string>());
  std::map<std::string, std::vector<int64_t>> keys;  // expected key -> shape
  const std::string key = want["key"];
  for (int64_t layer = 0; layer < c.n_layers; ++layer)
    for (const std::string& name : want_modules) {
      const json& mod = want["modules"][name];
      for (const auto& [matrix, dims] : want["matrices"].items()) {
        std::string k = key;
        auto put = [&](const std::string& field, const std::string& value) {
          k.replace(k.find("{" + field + "}"), field.size() + 2, value);
        };
        put("layer", std::to_string(layer));
        put("path", mod["path"].get<std::string>());
        put("matrix", matrix);
        std::vector<int64_t> shape;
        for (const json& d : dims) {
          const std::string s = d.get<std::string>();
          shape.push_back(dim_of(s == "in" || s == "out" ? mod[s].get<std::string>() : s, c));
        }
        keys[k] = shape;
      }
    }
  std::map<std::string, std::vector<int64_t>> got;
  for (const auto& t : r.tensors()) {
    got[t.name] = t.shape;
    EXPECT_EQ(t.dtype, want["dtype"].get<std::string>()) << t.name;
  }
  EXPECT_EQ(got, keys);
}

// PEFT's forward: W_hf x + lora_alpha / r * lora_B (lora_A x), with W_hf the base weight in Hugging Face's
// row order. From the file's tensors alone that must be our merged weight (interop_detail::effective_weight)
// in HF order (interop_detail::permute_to_hf): q/k B rows in rotate_half order, A [r, in], B [out, r].
void expect_peft_is_hf_oriented(const std::string& arch) {
  auto be = cpu();
  auto m = lora_test_model(*be, arch);
  const ModelConfig& c = m->config();
  const std::string dir = tmp(arch + "_orient_peft");
  save_peft_adapter(dir, *m);
  const auto r = safetensors::Reader::open(dir + "/adapter_model.safetensors");
  const double scale = c.lora_alpha / static_cast<double>(c.lora_rank);
  const struct {
    const char* ours;
    const char* hf;
    int64_t heads;  // rotate_half rows: heads of a q/k weight, 0 for the others
  } linears[] = {{"attention.wq.weight", "self_attn.q_proj", c.n_heads},
                 {"attention.wk.weight", "self_attn.k_proj", c.kv_heads()},
                 {"attention.wv.weight", "self_attn.v_proj", 0},
                 {"attention.wo.weight", "self_attn.o_proj", 0},
                 {"feed_forward.w2.weight", "mlp.down_proj", 0}};
  for (int64_t layer = 0; layer < c.n_layers; ++layer)
    for (const auto& l : linears) {
      Param& p = m->param("layers." + std::to_string(layer) + "." + l.ours);
      const int64_t N = p.value.shape()[0], K = p.value.shape()[1], R = c.lora_rank;
      const q4::Geometry g(N, K, c.group_size);
      const std::vector<float> base = q4::dequantize(
          g, q4::unpack_w4x8(g, be->to_vector<uint32_t>(p.codes).data()).data(), be->to_vector<float>(p.scales).data());
      auto hf = [&](const std::vector<float>& w) {
        return l.heads ? interop_detail::permute_to_hf(w, l.heads, N, K) : w;
      };
      const std::vector<float> want = hf(interop_detail::effective_weight(*m, p)), base_hf = hf(base);
      const std::string key = "base_model.model.model.layers." + std::to_string(layer) + "." + l.hf;
      const std::vector<float> A = r.to_f32(key + ".lora_A.weight"), B = r.to_f32(key + ".lora_B.weight");
      ASSERT_EQ(A.size(), static_cast<size_t>(R * K));
      ASSERT_EQ(B.size(), static_cast<size_t>(N * R));
      double worst = 0, delta = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) {
          double ab = 0;
          for (int64_t j = 0; j < R; ++j) ab += static_cast<double>(B[n * R + j]) * A[j * K + k];
          const double merged = base_hf[n * K + k] + scale * ab;
          worst = std::max(worst, std::fabs(merged - want[n * K + k]));
          delta = std::max(delta, std::fabs(scale * ab));
        }
      EXPECT_LT(worst, 1e-6) << key;
      EXPECT_GT(delta, 1e-3) << key << ": the adapter must change the weight for this test to see its orientation";
    }
}

TEST(LoraAdapter, PeftTensorsAreHfOriented) {
  for (const char* arch : {"llama", "qwen2"}) {  // GGUF's rope rows differ from HF's for llama only
    SCOPED_TRACE(arch);
    expect_peft_is_hf_oriented(arch);
  }
}

// ---- bad adapters ----

// The error of `f` (misuse unless `kind` says otherwise); "" and a test failure when it does not throw.
std::string error_of(const std::function<void()>& f, ErrorKind kind = ErrorKind::misuse) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

struct FileTensor {
  std::string name;
  std::vector<int64_t> shape;  // [rows, cols]
  std::vector<float> values;
};

// Rewrites the adapter GGUF `from` as `to` (F32 tensors) after `edit` changed its metadata or tensors.
void rewrite_gguf(const std::string& from, const std::string& to,
                  const std::function<void(std::vector<std::pair<std::string, gguf::Value>>&, std::vector<FileTensor>&)>& edit) {
  const gguf::File f = gguf::File::open(from);
  auto kv = f.metadata();
  std::vector<FileTensor> ts;
  for (const gguf::TensorInfo& t : f.tensors())
    ts.push_back({t.name, {static_cast<int64_t>(t.ne[1]), static_cast<int64_t>(t.ne[0])}, f.to_f32(t)});
  edit(kv, ts);
  gguf::Writer w;
  for (auto& [k, v] : kv) w.add_kv(k, v);
  for (const FileTensor& t : ts) {
    std::vector<uint8_t> bytes(t.values.size() * 4);
    std::memcpy(bytes.data(), t.values.data(), bytes.size());
    w.add_tensor(t.name, {static_cast<uint64_t>(t.shape[1]), static_cast<uint64_t>(t.shape[0])}, gguf::F32, bytes);
  }
  w.save(to);
}

// Copies the PEFT folder `from` to `to` after `edit` changed its config or tensors.
void rewrite_peft(const std::string& from, const std::string& to,
                  const std::function<void(json&, std::vector<FileTensor>&)>& edit) {
  json cfg = read_json(from + "/adapter_config.json");
  const auto r = safetensors::Reader::open(from + "/adapter_model.safetensors");
  std::vector<FileTensor> ts;
  for (const auto& t : r.tensors()) ts.push_back({t.name, t.shape, r.to_f32(t.name)});
  edit(cfg, ts);
  std::filesystem::create_directories(to);
  std::ofstream(to + "/adapter_config.json") << cfg.dump(2);
  safetensors::Writer w;
  for (const auto& [k, v] : r.metadata()) w.set_metadata(k, v);
  for (const FileTensor& t : ts) w.add(t.name, "F32", t.shape, t.values.data(), t.values.size() * 4);
  w.save(to + "/adapter_model.safetensors");
}

FileTensor& named(std::vector<FileTensor>& ts, const std::string& name) {
  for (FileTensor& t : ts)
    if (t.name == name) return t;
  throw std::runtime_error("no tensor " + name);
}

void drop(std::vector<FileTensor>& ts, const std::string& name) {
  std::erase_if(ts, [&](const FileTensor& t) { return t.name == name; });
}

// `what` contains every one of `parts`.
#define EXPECT_MENTIONS(what, ...)                                                          \
  do {                                                                                      \
    const std::string text_ = (what);                                                       \
    for (const std::string& part_ : std::initializer_list<std::string>{__VA_ARGS__})        \
      EXPECT_NE(text_.find(part_), std::string::npos) << "'" << part_ << "' not in: " << text_; \
  } while (0)

TEST(LoraAdapter, BadGgufAdaptersAreOneClearError) {
  auto be = cpu();
  auto m = lora_test_model(*be, "llama");
  const std::string good = tmp("good.gguf"), bad = tmp("bad.gguf");
  save_lora_gguf(good, *m);

  const std::string model_file = tmp("model.gguf");
  save_gguf(model_file, *m, GgufType::F32);
  EXPECT_MENTIONS(error_of([&] { read_lora_adapter(model_file); }), model_file, "is not a LoRA adapter",
                  "general.type");
  EXPECT_FALSE(is_lora_adapter(model_file));
  EXPECT_TRUE(is_lora_adapter(good));

  rewrite_gguf(good, bad, [](auto&, auto& ts) {
    FileTensor& t = named(ts, "blk.1.ffn_down.weight.lora_a");
    t.shape[0] = 3;
    t.values.resize(static_cast<size_t>(3 * t.shape[1]));
  });
  EXPECT_MENTIONS(error_of([&] { read_lora_adapter(bad); }), "blk.1.ffn_down.weight.lora_a", "rank 3", "rank is 4");

  rewrite_gguf(good, bad, [](auto&, auto& ts) { ts.push_back({"output.weight.lora_a", {4, 64}, std::vector<float>(256)}); });
  EXPECT_MENTIONS(error_of([&] { read_lora_adapter(bad); }), "'output.weight.lora_a'", "is not the lora_a or lora_b");

  rewrite_gguf(good, bad, [](auto&, auto& ts) { drop(ts, "blk.0.attn_v.weight.lora_b"); });
  EXPECT_MENTIONS(error_of([&] { read_lora_adapter(bad); }), "'blk.0.attn_v.weight.lora_a'", "no B matrix",
                  "blk.0.attn_v.weight.lora_b");

  rewrite_gguf(good, bad, [](auto&, auto& ts) {
    drop(ts, "blk.1.attn_q.weight.lora_a");
    drop(ts, "blk.1.attn_q.weight.lora_b");
  });
  EXPECT_MENTIONS(error_of([&] { read_lora_adapter(bad); }), "no tensor 'blk.1.attn_q.weight.lora_a'", "same targets");

  rewrite_gguf(good, bad, [](auto&, auto& ts) { named(ts, "blk.0.ffn_up.weight.lora_b").values[17] = NAN; });
  EXPECT_MENTIONS(error_of([&] { read_lora_adapter(bad); }, ErrorKind::numeric), "'blk.0.ffn_up.weight.lora_b'",
                  "index 17", "NaN/Inf");

  rewrite_gguf(good, bad, [](auto& kv, auto&) {
    for (auto& [k, v] : kv)
      if (k == "adapter.type") v = gguf::Value::str("control_vector");
  });
  EXPECT_MENTIONS(error_of([&] { read_lora_adapter(bad); }), "adapter.type", "control_vector");

  // Adapters of other models: another architecture, another width, another depth.
  auto qwen = lora_test_model(*be, "qwen2");
  save_lora_gguf(bad, *qwen);
  EXPECT_MENTIONS(error_of([&] { attach_lora_adapter(*m, read_lora_adapter(bad), *be); }), "is for a 'qwen2' model",
                  "the base model is 'llama'");
  ModelConfig wide = lora_test_config("llama");
  wide.dim = 96;
  Model w(*be, wide);
  w.init(1);
  save_lora_gguf(bad, w);
  EXPECT_MENTIONS(error_of([&] { attach_lora_adapter(*m, read_lora_adapter(bad), *be); }),
                  "'blk.0.attn_q.weight.lora_a' is [4, 96]", "needs [4, 64]", "another model");
  ModelConfig deep = lora_test_config("llama");
  deep.n_layers = 3;
  Model d(*be, deep);
  d.init(1);
  save_lora_gguf(bad, d);
  EXPECT_MENTIONS(error_of([&] { attach_lora_adapter(*m, read_lora_adapter(bad), *be); }), "adapters for 3 layers",
                  "the base model has 2");

  // A rejected adapter leaves the model as it was, even when only its last tensor does not fit.
  rewrite_gguf(good, bad, [](auto&, auto& ts) {
    FileTensor& t = named(ts, "blk.1.ffn_down.weight.lora_b");
    t.shape[0] = 65;
    t.values.resize(65 * 4);
  });
  randomize_adapters(*m, 99);
  const auto before = adapters_of(*m);
  EXPECT_MENTIONS(error_of([&] { load_lora_adapter(*m, read_lora_adapter(bad)); }), "'blk.1.ffn_down.weight.lora_b' is [65, 4]");
  for (const auto& [name, v] : adapters_of(*m)) EXPECT_TRUE(same_bits(v, before.at(name))) << name;

  // An adapter loads only into a qlora model of its settings.
  ModelConfig qat = lora_test_config("llama");
  qat.mode = TrainMode::qat;
  Model q(*be, qat);
  EXPECT_MENTIONS(error_of([&] { load_lora_adapter(q, read_lora_adapter(good)); }), "qat mode", "qlora");
  EXPECT_MENTIONS(error_of([&] { save_lora_gguf(bad, q); }), "qat mode", "only a qlora model");
}

TEST(LoraAdapter, BadPeftAdaptersAreOneClearError) {
  auto be = cpu();
  auto m = lora_test_model(*be, "llama");
  const std::string good = tmp("good_peft"), bad = tmp("bad_peft");
  save_peft_adapter(good, *m);
  const std::string q0 = "base_model.model.model.layers.0.self_attn.q_proj";

  rewrite_peft(good, bad, [](json&, auto& ts) {
    ts.push_back({"base_model.model.lm_head.lora_A.weight", {4, 64}, std::vector<float>(256)});
  });
  EXPECT_MENTIONS(error_of([&] { read_lora_adapter(bad); }), "'base_model.model.lm_head.lora_A.weight'",
                  "is not the lora_A or lora_B");

  rewrite_peft(good, bad, [&](json&, auto& ts) {
    FileTensor& t = named(ts, q0 + ".lora_A.weight");
    t.shape[0] = 3;
    t.values.resize(static_cast<size_t>(3 * t.shape[1]));
  });
  EXPECT_MENTIONS(error_of([&] { read_lora_adapter(bad); }), q0 + ".lora_A.weight", "rank 3", "r)");

  rewrite_peft(good, bad, [&](json&, auto& ts) { drop(ts, q0 + ".lora_B.weight"); });
  EXPECT_MENTIONS(error_of([&] { read_lora_adapter(bad); }), q0 + ".lora_A.weight", "no B matrix");

  rewrite_peft(good, bad, [](json& c, auto&) { c["use_dora"] = true; });
  EXPECT_MENTIONS(error_of([&] { read_lora_adapter(bad); }), "use_dora", "DoRA");
  rewrite_peft(good, bad, [](json& c, auto&) { c["peft_type"] = "IA3"; });
  EXPECT_MENTIONS(error_of([&] { read_lora_adapter(bad); }), "peft_type", "IA3");
  rewrite_peft(good, bad, [](json& c, auto&) { c["target_modules"].push_back("lm_head"); });
  EXPECT_MENTIONS(error_of([&] { read_lora_adapter(bad); }), "target_modules names 'lm_head'");
  rewrite_peft(good, bad, [](json& c, auto&) { c["rank_pattern"] = {{"q_proj", 8}}; });
  EXPECT_MENTIONS(error_of([&] { read_lora_adapter(bad); }), "rank_pattern");
  rewrite_peft(good, bad, [](json&, auto&) {});
  std::filesystem::remove(bad + "/adapter_model.safetensors");
  EXPECT_MENTIONS(error_of([&] { read_lora_adapter(bad); }), "has no adapter_model.safetensors");

  // PEFT's rsLoRA scales by lora_alpha / sqrt(r): read as the alpha that gives that scale over r.
  rewrite_peft(good, bad, [](json& c, auto&) { c["use_rslora"] = true; });
  EXPECT_FLOAT_EQ(read_lora_adapter(bad).alpha, 8.0f * 2.0f);  // r = 4
}

}  // namespace
}  // namespace edgetrain::test
