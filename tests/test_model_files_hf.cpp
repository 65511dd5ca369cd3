// Hugging Face config.json as transformers writes it, and what edgetrain reads of it: transformers 4's form
// (top-level rope_theta / rope_scaling) and transformers 5's (rope_parameters), Llama 3 rope scaling and head
// dims, qwen2 and qwen3, Mistral as Llama; a field that changes the math and is present in a form edgetrain
// does not understand is an error naming it, never a silent default. GGUF files: test_model_files.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "edgetrain/backends.h"
#include "edgetrain/interop.h"
#include "edgetrain/safetensors.h"
#include "io/llama_names.h"
#include "train/run.h"
#include "harness/error_of.h"
#include "harness/temp_files.h"
#include "harness/model_helpers.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace edgetrain::test {
namespace {

std::string tmp(const std::string& name) { return temp_path("model_files", name); }


// ---- Hugging Face config.json ----

// A Hugging Face folder of `m` (F32 tensors, q/k in HF's rotate_half order) with config.json `cfg`.
void write_hf(Model& m, const std::string& dir, const json& cfg, const std::vector<std::string>& extra_tensors = {}) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir + "/config.json") << cfg.dump(2);
  const ModelConfig& c = m.config();
  safetensors::Writer w;
  for (const llama_names::BaseTensor& t : llama_names::base_tensors(c)) {
    for (Param& p : m.params()) {
      if (p.name != t.name) continue;
      std::vector<float> v = m.backend().to_vector<float>(p.value);
      if (t.name.find("attention.wq.weight") != std::string::npos)
        v = interop_detail::permute_to_hf(v, c.n_heads, t.shape[0], t.shape[1]);
      else if (t.name.find("attention.wk.weight") != std::string::npos)
        v = interop_detail::permute_to_hf(v, c.kv_heads(), t.shape[0], t.shape[1]);
      else  // q/k biases and norms: rotate_half order too
        v = llama_names::rows_to_file(llama_names::neox_row_order(c, t.name), v);
      std::vector<uint8_t> bytes(v.size() * 4);
      std::memcpy(bytes.data(), v.data(), bytes.size());
      w.add_owned(t.hf, "F32", std::vector<int64_t>(t.shape.data(), t.shape.data() + t.shape.rank()), std::move(bytes));
    }
  }
  for (const std::string& name : extra_tensors) w.add_owned(name, "F32", {4}, std::vector<uint8_t>(16, 0));
  w.save(dir + "/model.safetensors");
}

// config.json of `c` as transformers 5 writes a LlamaConfig (rope_parameters, dtype, no rope_theta).
json v5_config(const ModelConfig& c) {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"attention_bias", false},
          {"attention_dropout", 0.0},
          {"bos_token_id", 1},
          {"dtype", "float32"},
          {"eos_token_id", 2},
          {"head_dim", c.head_dim()},
          {"hidden_act", "silu"},
          {"hidden_size", c.dim},
          {"initializer_range", 0.02},
          {"intermediate_size", c.ffn_dim},
          {"max_position_embeddings", c.max_seq},
          {"mlp_bias", false},
          {"model_type", "llama"},
          {"num_attention_heads", c.n_heads},
          {"num_hidden_layers", c.n_layers},
          {"num_key_value_heads", c.kv_heads()},
          {"pretraining_tp", 1},
          {"rms_norm_eps", c.norm_eps},
          {"rope_parameters", {{"rope_theta", c.rope_theta}, {"rope_type", "default"}}},
          {"tie_word_embeddings", false},
          {"transformers_version", "5.0.0"},
          {"use_cache", true},
          {"vocab_size", c.vocab}};
}

// transformers 4's form of the same config.
json v4_config(const ModelConfig& c) {
  json j = v5_config(c);
  j.erase("rope_parameters");
  j.erase("dtype");
  j["rope_theta"] = c.rope_theta;
  j["rope_scaling"] = nullptr;
  j["torch_dtype"] = "float32";
  j["transformers_version"] = "4.46.0";
  return j;
}

TEST(ModelFiles, HfConfigOfTransformers5IsRead) {
  auto be = make_cpu_backend();
  ModelConfig c = tiny_config(TrainMode::fp32);
  c.rope_theta = 500000.0f;  // not the default: a reader that misses rope_parameters gets 10000
  Model m(*be, c);
  m.init(3);
  const std::string dir = tmp("hf5");
  for (const json& cfg : {v5_config(c), v4_config(c)}) {
    SCOPED_TRACE(cfg["transformers_version"].get<std::string>());
    write_hf(m, dir, cfg);
    EXPECT_EQ(read_hf_config(dir, TrainMode::qat, 32).rope_theta, 500000.0f);
    auto back = load_hf_llama(dir, *be, TrainMode::fp32, 32);
    EXPECT_EQ(back->config().to_json(), m.config().to_json());
    const std::vector<int32_t> ids = {1, 5, 9, 2, 7};
    m.reset_cache();
    back->reset_cache();
    EXPECT_EQ(m.next_logits(ids), back->next_logits(ids)) << "same weights and rope: the same logits";
    EXPECT_HAS(describe_model_file(dir), "trainable: yes");
  }
  // Both forms, agreeing: fine; disagreeing: an error naming both fields.
  json both = v5_config(c);
  both["rope_theta"] = 500000.0;
  write_hf(m, dir, both);
  EXPECT_EQ(read_hf_config(dir, TrainMode::qat, 32).rope_theta, 500000.0f);
  both["rope_theta"] = 10000.0;
  write_hf(m, dir, both);
  const std::string e = error_of([&] { read_hf_config(dir, TrainMode::qat, 32); });
  EXPECT_HAS(e, "'rope_theta' = 10000 disagrees with rope_parameters.rope_theta = 500000");
}

// Llama 3.1's rope scaling (rope_type "llama3") in both config forms, on heads wider than hidden_size /
// num_attention_heads (head_dim): the frequencies are transformers' llama3 inv_freq (computed here as
// transformers writes it: scale the low frequencies, blend the middle band), and the import computes with them.
TEST(ModelFiles, HfLlama3RopeScalingAndHeadDimAreRead) {
  auto be = make_cpu_backend();
  ModelConfig c = tiny_config(TrainMode::fp32);
  c.rope_theta = 500000.0f;
  c.head_size = 24;  // dim 32, 2 heads: q has 48 rows
  c.n_kv_heads = 1;
  const double factor = 8, low = 1, high = 4, old_ctx = 64;
  const json params = {{"factor", factor}, {"low_freq_factor", low}, {"high_freq_factor", high},
                       {"original_max_position_embeddings", old_ctx}, {"rope_type", "llama3"}};
  std::vector<double> want;
  for (int i = 0; i < 12; ++i) {
    const double inv = 1.0 / std::pow(500000.0, 2.0 * i / 24.0), wavelen = 2 * M_PI / inv;
    const double scaled = wavelen > old_ctx / low ? inv / factor : inv;
    const double smooth = (old_ctx / wavelen - low) / (high - low);
    const bool medium = !(wavelen < old_ctx / high) && !(wavelen > old_ctx / low);
    want.push_back(medium ? (1 - smooth) * scaled / factor + smooth * scaled : scaled);
  }
  json v5 = v5_config(c), v4 = v4_config(c);
  for (auto& [k, v] : params.items()) v5["rope_parameters"][k] = v;
  v4["rope_scaling"] = params;
  const std::string dir = tmp("hf_llama3");
  for (const json& cfg : {v5, v4}) {
    SCOPED_TRACE(cfg["transformers_version"].get<std::string>());
    write_hf(*std::make_unique<Model>(*be, c), dir, cfg);  // shapes only: the config is what is read
    const ModelConfig got = read_hf_config(dir, TrainMode::fp32, 32);
    EXPECT_EQ(got.head_dim(), 24);
    ASSERT_EQ(got.rope_factors.size(), 12u);
    const std::vector<double> f = got.rope_frequencies();
    int scaled = 0, blended = 0;
    for (size_t i = 0; i < 12; ++i) {
      EXPECT_NEAR(f[i], want[i], 1e-6 * want[i]) << "pair " << i;  // factors are stored as fp32
      scaled += got.rope_factors[i] == 8.0f;
      blended += got.rope_factors[i] > 1.0f && got.rope_factors[i] < 8.0f;
    }
    EXPECT_GT(scaled, 0);
    EXPECT_GT(blended, 0);
    // A model of that config written out and read back computes the same logits.
    Model m(*be, got);
    m.init(9);
    write_hf(m, dir, cfg);
    auto back = load_hf_llama(dir, *be, TrainMode::fp32, 32);
    EXPECT_EQ(back->config().to_json(), m.config().to_json());
    const std::vector<int32_t> ids = {1, 5, 9, 2, 7, 30, 31};
    EXPECT_EQ(m.next_logits(ids), back->next_logits(ids));
    EXPECT_HAS(describe_model_file(dir), "trainable: yes");
  }
}

// Qwen2 (q/k/v biases) and Qwen3 (q/k head norms, heads of 24) folders as transformers writes them: the
// biases and norm weights (set away from 0 and 1) come back in our rotary order, and the logits are the same.
TEST(ModelFiles, HfQwen2AndQwen3AreRead) {
  auto be = make_cpu_backend();
  const std::string dir = tmp("hf_qwen");
  for (const char* arch : {"qwen2", "qwen3"}) {
    SCOPED_TRACE(arch);
    ModelConfig c = tiny_config(TrainMode::fp32);
    c.arch = arch;
    c.rope_theta = 1000000.0f;
    if (c.arch == "qwen3") c.head_size = 24;
    Model m(*be, c);
    m.init(5);
    int moved = 0;
    for (Param& p : m.params()) {
      if (p.name.find(".bias") == std::string::npos && p.name.find("attention.q_norm") == std::string::npos &&
          p.name.find("attention.k_norm") == std::string::npos)
        continue;
      std::vector<float> v = be->to_vector<float>(p.value);
      for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5f + 0.03f * static_cast<float>(i % 17);  // no symmetry
      be->upload(p.value, v.data(), v.size() * 4);
      ++moved;
    }
    EXPECT_EQ(moved, c.arch == "qwen2" ? 6 : 4);  // 2 layers of 3 biases or 2 norms
    json cfg = v5_config(c);
    cfg["model_type"] = arch;
    cfg["architectures"] = {c.arch == "qwen2" ? "Qwen2ForCausalLM" : "Qwen3ForCausalLM"};
    cfg["use_sliding_window"] = false;
    cfg["layer_types"] = {"full_attention", "full_attention"};
    write_hf(m, dir, cfg);
    auto back = load_hf_llama(dir, *be, TrainMode::fp32, 32);
    EXPECT_EQ(back->config().to_json(), m.config().to_json());
    const std::vector<int32_t> ids = {1, 5, 9, 2, 7, 30};
    EXPECT_EQ(m.next_logits(ids), back->next_logits(ids));
    EXPECT_HAS(describe_model_file(dir), "trainable: yes");
    cfg["use_sliding_window"] = true;
    write_hf(m, dir, cfg);
    EXPECT_HAS(error_of([&] { load_hf_llama(dir, *be, TrainMode::qat, 32); }), "'use_sliding_window' is true");
    cfg["use_sliding_window"] = false;
    cfg["layer_types"] = {"full_attention", "sliding_attention"};
    write_hf(m, dir, cfg);
    EXPECT_HAS(error_of([&] { load_hf_llama(dir, *be, TrainMode::qat, 32); }), "'layer_types' is");
  }
}

// Mistral as MistralConfig writes it: a Llama (GGUF architecture "llama") whose sliding window is off (null)
// or no shorter than the context, so the attention is the same.
TEST(ModelFiles, HfMistralIsReadAsLlama) {
  auto be = make_cpu_backend();
  const ModelConfig c = tiny_config(TrainMode::fp32);
  Model m(*be, c);
  m.init(6);
  const std::string dir = tmp("hf_mistral");
  const std::vector<int32_t> ids = {3, 1, 4, 1, 5, 9};
  const std::vector<float> want = m.next_logits(ids);
  for (const json& window : {json(nullptr), json(c.max_seq)}) {
    json cfg = v5_config(c);
    cfg["model_type"] = "mistral", cfg["architectures"] = {"MistralForCausalLM"}, cfg["sliding_window"] = window;
    write_hf(m, dir, cfg);
    auto back = load_hf_llama(dir, *be, TrainMode::fp32, 32);
    EXPECT_EQ(back->config().arch, "llama");
    EXPECT_EQ(back->next_logits(ids), want);
  }
}

TEST(ModelFiles, HfFieldsThatChangeTheMathAreErrorsNamingThem) {
  auto be = make_cpu_backend();
  const ModelConfig c = tiny_config(TrainMode::fp32);
  Model m(*be, c);
  m.init(4);
  const std::string dir = tmp("hfbad");
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    const char* needle;
  };
  const std::vector<Case> cases = {
      {"llama3 rope without its parameters",
       [](json& j) { j["rope_parameters"] = {{"rope_theta", 5e5}, {"rope_type", "llama3"}, {"factor", 8.0}}; },
       "'rope_parameters.low_freq_factor' is missing"},
      {"llama3 rope, low > high",
       [](json& j) {
         j["rope_parameters"] = {{"rope_theta", 5e5}, {"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 4.0},
                                 {"high_freq_factor", 1.0}, {"original_max_position_embeddings", 64}};
       },
       "high_freq_factor > low_freq_factor"},
      {"yarn rope", [](json& j) { j["rope_parameters"] = {{"rope_theta", 5e5}, {"rope_type", "yarn"}, {"factor", 4.0}}; },
       "'rope_parameters.rope_type' is \"yarn\""},
      {"rope factor under default", [](json& j) { j["rope_parameters"]["factor"] = 2.0; }, "'rope_parameters.factor' = 2.0"},
      {"v4 linear scaling", [](json& j) { j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}}; },
       "'rope_scaling.type' is \"linear\""},
      {"per-layer-type rope", [](json& j) { j["rope_parameters"] = {{"full_attention", {{"rope_theta", 1e4}}}}; },
       "'rope_parameters.full_attention' holds rope parameters per layer type"},
      {"rope_theta not a number", [](json& j) { j["rope_parameters"]["rope_theta"] = "big"; },
       "'rope_parameters.rope_theta' must be a number"},
      {"partial rotary", [](json& j) { j["rope_parameters"]["partial_rotary_factor"] = 0.5; },
       "'rope_parameters.partial_rotary_factor' = 0.5"},
      {"gelu", [](json& j) { j["hidden_act"] = "gelu"; }, "'hidden_act' is \"gelu\""},
      {"attention bias", [](json& j) { j["attention_bias"] = true; }, "'attention_bias' is true"},
      {"mlp bias", [](json& j) { j["mlp_bias"] = true; }, "'mlp_bias' is true"},
      {"odd head_dim", [](json& j) { j["head_dim"] = 7; }, "'head_dim' = 7: a rotary head must be even"},
      {"head_dim without the tensors", [](json& j) { j["head_dim"] = 8; }, "model.layers.0.self_attn.q_proj.weight"},
      {"quantized", [](json& j) { j["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}}; },
       "'quantization_config' is present: the weights are quantized (\"gptq\")"},
      {"classifier", [](json& j) { j["architectures"] = {"LlamaForSequenceClassification"}; }, "'architectures' is"},
      {"vocab", [](json& j) { j["vocab_size"] = 99; }, "'vocab_size' = 99 differs"},
      {"not llama", [](json& j) { j["model_type"] = "gemma"; }, "model_type \"gemma\" is not supported"},
      {"mistral window inside the context",
       [](json& j) {
         j["model_type"] = "mistral", j["architectures"] = {"MistralForCausalLM"}, j["sliding_window"] = 16;
       },
       "'sliding_window' = 16 is shorter than max_position_embeddings"},
      {"qwen2 class for llama", [](json& j) { j["architectures"] = {"Qwen2ForCausalLM"}; }, "'architectures' is"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    json cfg = v5_config(c);
    k.edit(cfg);
    write_hf(m, dir, cfg);
    const std::string e = error_of([&] { load_hf_llama(dir, *be, TrainMode::qat, 32); });
    EXPECT_HAS(e, k.needle);
    EXPECT_HAS(e, dir);
    const std::string info = describe_model_file(dir);
    EXPECT_HAS(info, "trainable: no");
    EXPECT_HAS(info, k.needle);
  }
  // Fields LlamaConfig does not read are ignored, as transformers ignores them; so is an old checkpoint's
  // rotary_emb.inv_freq buffer.
  json cfg = v5_config(c);
  cfg["my_tool_notes"] = {{"anything", 1}};
  write_hf(m, dir, cfg, {"model.layers.0.self_attn.rotary_emb.inv_freq"});
  EXPECT_NO_THROW(load_hf_llama(dir, *be, TrainMode::qat, 32));
  // A tensor the model lacks, and several problems at once: all listed by info, the first thrown.
  cfg["hidden_act"] = "relu";
  write_hf(m, dir, cfg, {"model.layers.0.self_attn.q_proj.bias"});
  const std::string info = describe_model_file(dir);
  EXPECT_HAS(info, "trainable: no, 1 problem");  // config problems stop before the tensors are looked at
  cfg["hidden_act"] = "silu";
  write_hf(m, dir, cfg, {"model.layers.0.self_attn.q_proj.bias"});
  EXPECT_HAS(describe_model_file(dir), "tensor 'model.layers.0.self_attn.q_proj.bias'");
  EXPECT_HAS(error_of([&] { import_masters(dir); }), "model.layers.0.self_attn.q_proj.bias");
}

}  // namespace
}  // namespace edgetrain::test
