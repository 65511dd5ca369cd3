// Saving and loading Model checkpoints as safetensors: tensors streamed from the backend one at a time on
// save; on load, everything (format, config, names, dtypes, shapes, q4 code consistency) is verified
// before the first upload.
#include "edgetrain/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "edgetrain/q4gsw.h"
#include "edgetrain/safetensors.h"

namespace edgetrain {

namespace {

constexpr const char* kReservedKeys[] = {"format",     "config",     "step",
                                         "adam_steps", "q4_layout",  "group_size",
                                         "loss_scale", "loss_scale_good_steps", "overflow_steps"};

std::vector<int64_t> dims_of(const Shape& s) { return std::vector<int64_t>(s.data(), s.data() + s.rank()); }

std::string dims_str(const std::vector<int64_t>& d) {
  std::string r = "[";
  for (size_t i = 0; i < d.size(); ++i) r += (i ? ", " : "") + std::to_string(d[i]);
  return r + "]";
}

template <typename... Args>
[[noreturn]] void bad_ckpt(const std::string& path, const Args&... args) {
  fail("checkpoint '", path, "': ", args...);
}

// NaN/Inf where a checkpoint must hold finite numbers.
template <typename... Args>
[[noreturn]] void non_finite(const std::string& path, const Args&... args) {
  fail_kind(ErrorKind::numeric, "checkpoint '", path, "': ", args...);
}

const std::string& meta_field(const safetensors::Reader& r, const std::string& key) {
  auto it = r.metadata().find(key);
  if (it == r.metadata().end()) bad_ckpt(r.source(), "metadata field '", key, "' is missing");
  return it->second;
}

void check_format(const safetensors::Reader& r) {
  auto it = r.metadata().find("format");
  if (it == r.metadata().end())
    bad_ckpt(r.source(), "no 'format' metadata: not an edgetrain checkpoint (plain safetensors weights?)");
  if (it->second != kCheckpointFormat)
    bad_ckpt(r.source(), "format is '", it->second, "', this build reads '", kCheckpointFormat, "'");
}

int64_t parse_int(const safetensors::Reader& r, const std::string& key) {
  const std::string& s = meta_field(r, key);
  int64_t v = 0;
  auto res = std::from_chars(s.data(), s.data() + s.size(), v);
  if (res.ec != std::errc() || res.ptr != s.data() + s.size() || v < 0)
    bad_ckpt(r.source(), "metadata field '", key, "' = '", s, "' is not a non-negative integer");
  return v;
}

// The fp16 loss scaler's state, when the file has it (written by fp16 runs): scale, good steps, overflows.
void read_scaler(const safetensors::Reader& r, LossScaler& s) {
  if (!r.metadata().count("loss_scale")) return;
  const std::string& v = meta_field(r, "loss_scale");
  char* end = nullptr;
  const float scale = std::strtof(v.c_str(), &end);
  if (end != v.c_str() + v.size() || !std::isfinite(scale) || !(scale > 0))
    bad_ckpt(r.source(), "metadata field 'loss_scale' = '", v, "' is not a positive finite number");
  s.scale = scale;
  s.good_steps = parse_int(r, "loss_scale_good_steps");
  s.overflows = parse_int(r, "overflow_steps");
  s.overflows_in_a_row = 0;
  s.last_overflowed = false;
}

ModelConfig config_of(const safetensors::Reader& r) {
  try {
    return ModelConfig::from_json(meta_field(r, "config"));
  } catch (const Error& e) {
    bad_ckpt(r.source(), "bad 'config' metadata: ", e.what());
  }
}

// Names every config field on which the file and the model disagree.
void check_config(const safetensors::Reader& r, const ModelConfig& have) {
  ModelConfig stored = config_of(r);
  auto a = nlohmann::json::parse(stored.to_json()), b = nlohmann::json::parse(have.to_json());
  std::string diff;
  for (auto it = b.begin(); it != b.end(); ++it) {
    auto f = a.find(it.key());
    std::string file_value = f == a.end() ? "(absent)" : f->dump();
    if (f == a.end() || *f != it.value())
      diff += cat(diff.empty() ? "" : ", ", it.key(), " (file ", file_value, ", model ", it.value().dump(), ")");
  }
  if (!diff.empty()) bad_ckpt(r.source(), "config differs from the model's: ", diff);
}

std::vector<float> f32_of(const safetensors::Reader& r, const std::string& name) { return r.to_f32(name); }

// What a state tensor is, for messages.
const char* role_of(const std::string& name) {
  auto ends = [&](const char* suffix) {
    const size_t n = std::strlen(suffix);
    return name.size() >= n && name.compare(name.size() - n, n, suffix) == 0;
  };
  if (ends(".adam_m") || ends(".adam_v")) return "AdamW moment";
  if (ends(".q4_scales")) return "4-bit scales";
  return "master weights";
}

// Every value of an F32 tensor must be finite: NaN/Inf masters or moments would poison every later step
// (and a trainer never writes them, so they mean corruption). Read in chunks: no copy of the tensor.
void check_finite(const safetensors::Reader& r, const std::string& name) {
  const uint8_t* p = r.data(name);
  const uint64_t n = r.info(name).nbytes() / sizeof(float);
  float chunk[1024];
  for (uint64_t i = 0; i < n; i += 1024) {
    const uint64_t m = std::min<uint64_t>(1024, n - i);
    std::memcpy(chunk, p + i * sizeof(float), m * sizeof(float));
    for (uint64_t j = 0; j < m; ++j)
      if (!std::isfinite(chunk[j]))
        non_finite(r.source(), "tensor '", name, "' (", role_of(name), ") holds ", chunk[j], " at index ", i + j,
                   "; a checkpoint must not contain NaN/Inf (it is corrupt: use an earlier checkpoint)");
  }
}

// The stored codes must be what requantizing the stored masters with the stored scales gives (one step of
// slack for rounding differences between backends), and every padding nibble must be 8.
void check_q4(const safetensors::Reader& r, const Param& p, int64_t group_size) {
  const std::string codes_name = p.name + ".q4_codes", scales_name = p.name + ".q4_scales";
  q4::Geometry g(p.value.shape()[0], p.value.shape()[1], group_size);
  std::vector<float> w = f32_of(r, p.name), s = f32_of(r, scales_name);
  std::vector<uint32_t> words(static_cast<size_t>(g.words()));
  std::memcpy(words.data(), r.data(codes_name), words.size() * 4);
  for (size_t i = 0; i < s.size(); ++i) {
    if (!std::isfinite(s[i]))
      non_finite(r.source(), "tensor '", scales_name, "' holds ", s[i], " at index ", i, "; scales must be finite");
    if (s[i] < 0.0f)
      bad_ckpt(r.source(), "tensor '", scales_name, "' holds ", s[i], " at index ", i, "; scales must be >= 0");
  }
  std::vector<uint8_t> codes = q4::unpack_w4x8(g, words.data());
  if (q4::pack_w4x8(g, codes.data()) != words)
    bad_ckpt(r.source(), "tensor '", codes_name, "' has padding nibbles other than 8 (corrupt W_4X8 words)");
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t k = 0; k < g.K; ++k) {
      const float wv = w[n * g.K + k], sv = s[(k / g.group_size) * g.N + n];
      const int want = q4::requant_code(wv, sv), got = codes[n * g.K + k];
      if (std::abs(want - got) > 1)
        bad_ckpt(r.source(), "tensor '", codes_name, "' disagrees with master '", p.name, "' at [", n, ", ", k,
                 "]: code ", got, " but master ", wv, " with scale ", sv, " gives ", want);
    }
}

}  // namespace

void save_checkpoint(const std::string& path, Model& model, const std::map<std::string, std::string>& extra_metadata) {
  for (const char* k : kReservedKeys)
    ET_CHECK(extra_metadata.count(k) == 0, "save_checkpoint '", path, "': extra metadata key '", k,
             "' is reserved for the checkpoint itself");
  Backend& be = model.backend();
  safetensors::Writer w;
  for (const Model::Named& nt : model.state_tensors()) {
    Tensor t = nt.tensor;
    ET_CHECK(t.defined(), "save_checkpoint '", path, "': state tensor '", nt.name, "' is not allocated");
    w.add_deferred(nt.name, safetensors::dtype_string(t.dtype()), dims_of(t.shape()), t.nbytes(),
                   [&be, t](uint8_t* dst) { be.download(t, dst, t.nbytes()); });
  }
  for (const auto& [k, v] : extra_metadata) w.set_metadata(k, v);
  w.set_metadata("format", kCheckpointFormat);
  w.set_metadata("config", model.config().to_json());
  w.set_metadata("step", std::to_string(model.steps_done));
  w.set_metadata("adam_steps", std::to_string(model.adam_steps));
  w.set_metadata("q4_layout", "W_4X8");
  w.set_metadata("group_size", std::to_string(model.config().group_size));
  if (model.precision() == Precision::fp16) {  // so --resume continues with the same scale
    // Nine significant digits read back to the same float (std::to_chars of floats would be shorter, but the
    // browser build's libc++ lacks it).
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(model.scaler.scale));
    w.set_metadata("loss_scale", buf);
    w.set_metadata("loss_scale_good_steps", std::to_string(model.scaler.good_steps));
    w.set_metadata("overflow_steps", std::to_string(model.scaler.overflows));
  }
  w.save(path);
}

void load_checkpoint(const std::string& path, Model& model, std::map<std::string, std::string>* metadata_out) {
  safetensors::Reader r = safetensors::Reader::open(path);
  check_format(r);
  check_config(r, model.config());
  const ModelConfig& cfg = model.config();
  if (meta_field(r, "q4_layout") != "W_4X8")
    bad_ckpt(path, "q4_layout is '", meta_field(r, "q4_layout"), "'; only W_4X8 is supported");
  if (parse_int(r, "group_size") != cfg.group_size)
    bad_ckpt(path, "group_size metadata ", meta_field(r, "group_size"), " differs from the config's ", cfg.group_size);
  const int64_t step = parse_int(r, "step");
  // Files written before skipped steps were counted apart have no "adam_steps": every step was an update.
  const int64_t adam_steps = r.metadata().count("adam_steps") ? parse_int(r, "adam_steps") : step;
  if (adam_steps > step)
    bad_ckpt(path, "metadata adam_steps = ", adam_steps, " exceeds step = ", step, " (an update is a step taken)");
  LossScaler scaler = model.scaler;
  read_scaler(r, scaler);  // restored whatever the model's precision now: it is inert under fp32

  // Every expected tensor, exactly; nothing else.
  std::vector<Model::Named> state = model.state_tensors();
  std::set<std::string> expected;
  for (const Model::Named& nt : state) {
    expected.insert(nt.name);
    if (!r.contains(nt.name)) bad_ckpt(path, "tensor '", nt.name, "' is missing");
    const safetensors::TensorInfo& info = r.info(nt.name);
    const std::string want_dtype = safetensors::dtype_string(nt.tensor.dtype());
    if (info.dtype != want_dtype)
      bad_ckpt(path, "tensor '", nt.name, "' has dtype ", info.dtype, ", expected ", want_dtype);
    const std::vector<int64_t> want_shape = dims_of(nt.tensor.shape());
    if (info.shape != want_shape)
      bad_ckpt(path, "tensor '", nt.name, "' has shape ", dims_str(info.shape), ", expected ", dims_str(want_shape));
  }
  for (const safetensors::TensorInfo& info : r.tensors())
    if (expected.count(info.name) == 0)
      bad_ckpt(path, "unexpected tensor '", info.name, "' (a checkpoint of a different model?)");
  for (const Model::Named& nt : state)
    if (r.info(nt.name).dtype == "F32") check_finite(r, nt.name);
  for (const Param& p : model.params())
    if (p.quantized()) check_q4(r, p, cfg.group_size);

  // Verified: now write the model.
  Backend& be = model.backend();
  for (const Model::Named& nt : state) be.upload(nt.tensor, r.data(nt.name), nt.tensor.nbytes());
  for (const Param& p : model.params())
    if (p.grad.defined()) {
      std::vector<uint8_t> zero(p.grad.nbytes(), 0);
      be.upload(p.grad, zero.data(), zero.size());
    }
  model.steps_done = step;
  model.adam_steps = adam_steps;
  model.scaler = scaler;
  model.reset_cache();
  if (metadata_out != nullptr) *metadata_out = r.metadata();
}

ModelConfig read_checkpoint_config(const std::string& path) {
  safetensors::Reader r = safetensors::Reader::open(path);
  check_format(r);
  return config_of(r);
}

std::map<std::string, std::string> read_checkpoint_metadata(const std::string& path) {
  safetensors::Reader r = safetensors::Reader::open(path);
  check_format(r);
  return r.metadata();
}

}  // namespace edgetrain
