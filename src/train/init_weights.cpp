// --init: a run that starts from another model's weights (an edgetrain checkpoint, a GGUF file or a
// Hugging Face folder) with a fresh optimizer, possibly in another mode (fp32 -> qat, qat -> qlora, ...).
// A 4-bit model stays the model it was: the file's codes and scales are kept as saved, unless --requantize.
// --adapter then loads a LoRA adapter's A and B on top (qlora).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>

#include "edgetrain/interop.h"
#include "edgetrain/q4gsw.h"
#include "edgetrain/safetensors.h"
#include "train/run.h"

namespace edgetrain::training {
namespace {

q4::Geometry geometry_of(const Param& p, int64_t group_size) {
  return q4::Geometry(p.value.shape()[0], p.value.shape()[1], group_size);
}

// Why the file's 4-bit weights cannot serve this model ("" when they can): every 4-bit linear of the model
// needs `<name>.q4_codes` (U32 W_4X8 words) and `<name>.q4_scales` (F32 [G, N]) at the same group size.
std::string why_not_kept(const safetensors::Reader& r, Model& model) {
  const int64_t gs = model.config().group_size;
  const auto& meta = r.metadata();
  bool any = false;
  for (const Param& p : model.params()) any |= p.quantized() && r.contains(p.name + ".q4_codes");
  if (!any) return "it holds no 4-bit codes";
  const auto layout = meta.find("q4_layout"), group = meta.find("group_size");
  if (layout == meta.end() || layout->second != "W_4X8") return "its 4-bit codes are not in the W_4X8 layout";
  if (group == meta.end() || group->second != std::to_string(gs))
    return "its group size is " + (group == meta.end() ? std::string("not recorded") : group->second) +
           ", this run's is " + std::to_string(gs);
  for (const Param& p : model.params()) {
    if (!p.quantized()) continue;
    const q4::Geometry g = geometry_of(p, gs);
    const std::string codes = p.name + ".q4_codes", scales = p.name + ".q4_scales";
    if (!r.contains(codes) || !r.contains(scales)) return "it has no 4-bit codes and scales for '" + p.name + "'";
    const safetensors::TensorInfo &c = r.info(codes), &s = r.info(scales);
    if (c.dtype != "U32" || c.shape != std::vector<int64_t>{g.words()} || s.dtype != "F32" ||
        s.shape != std::vector<int64_t>{g.groups(), g.N})
      return "the 4-bit codes or scales of '" + p.name + "' do not have this model's dtype and shape";
  }
  return "";
}

// The file's codes and scales of one linear, checked: scales finite and >= 0, padding nibbles 8.
struct FileQ4 {
  std::vector<uint32_t> words;
  std::vector<float> scales;
};
FileQ4 read_q4(const safetensors::Reader& r, const Param& p, const q4::Geometry& g, const std::string& path) {
  FileQ4 q;
  q.words.resize(static_cast<size_t>(g.words()));
  std::memcpy(q.words.data(), r.data(p.name + ".q4_codes"), q.words.size() * sizeof(uint32_t));
  q.scales = r.to_f32(p.name + ".q4_scales");
  for (size_t i = 0; i < q.scales.size(); ++i)
    ET_CHECK(std::isfinite(q.scales[i]) && q.scales[i] >= 0, "train: --init: tensor '", p.name, ".q4_scales' in '",
             path, "' holds ", q.scales[i], " at index ", i, "; scales must be finite and >= 0");
  ET_CHECK(q4::pack_w4x8(g, q4::unpack_w4x8(g, q.words.data()).data()) == q.words, "train: --init: tensor '", p.name,
           ".q4_codes' in '", path, "' has padding nibbles other than 8 (corrupt W_4X8 words)");
  return q;
}

// |W_new - W_file| over every 4-bit linear, W the dequantized weights.
struct WeightChange {
  double sq_diff = 0, sq_file = 0, max_diff = 0;
  int64_t n = 0;
  void add(const std::vector<float>& now, const std::vector<float>& file) {
    for (size_t i = 0; i < now.size(); ++i) {
      const double d = std::fabs(static_cast<double>(now[i]) - file[i]);
      sq_diff += d * d, sq_file += static_cast<double>(file[i]) * file[i], max_diff = std::max(max_diff, d);
    }
    n += static_cast<int64_t>(now.size());
  }
};

}  // namespace

InitReport init_weights_from(const std::string& path, Model& model, bool requantize) {
  // A GGUF file or Hugging Face folder is converted to our names first; otherwise a safetensors file.
  const bool foreign = is_gguf_file(path) || is_hf_folder(path);
  std::map<std::string, std::vector<float>> imported;
  if (foreign) imported = import_masters(path);
  std::optional<safetensors::Reader> r;
  if (!foreign) r.emplace(safetensors::Reader::open(path));
  int loaded = 0;
  for (Param& p : model.params()) {
    if (p.name.find(".lora_") != std::string::npos) continue;  // adapters start fresh
    ET_CHECK(foreign ? imported.count(p.name) > 0 : r->contains(p.name), "train: --init: '", path,
             "' has no tensor '", p.name, "'");
    std::vector<float> v = foreign ? std::move(imported[p.name]) : r->to_f32(p.name);
    ET_CHECK(static_cast<int64_t>(v.size()) == p.value.numel(), "train: --init: tensor '", p.name, "' in '", path,
             "' has ", v.size(), " elements, the model needs ", p.value.numel());
    for (size_t i = 0; i < v.size(); ++i)
      ET_CHECK_KIND(ErrorKind::numeric, std::isfinite(v[i]), "train: --init: tensor '", p.name, "' in '", path,
                    "' holds ", v[i], " at index ", i, "; weights must not contain NaN/Inf");
    model.backend().upload(p.value, v.data(), v.size() * sizeof(float));
    ++loaded;
  }
  model.steps_done = 0;
  model.adam_steps = 0;
  std::printf("  initialised %d tensors from %s\n", loaded, path.c_str());

  InitReport rep;
  for (const Param& p : model.params()) rep.linears += p.quantized();
  if (rep.linears == 0) return rep;  // an fp32 run: no 4-bit weights to keep or make
  const std::string why = foreign ? std::string(is_gguf_file(path) ? "a GGUF file" : "a Hugging Face folder") +
                                        " is read as fp32 weights"
                                  : why_not_kept(*r, model);
  if (!why.empty()) {
    model.quantize_from_masters();
    std::printf("  4-bit weights of %ld linears quantized from the masters: the only choice, as %s\n",
                static_cast<long>(rep.linears), why.c_str());
    if (foreign) {
      // The masters are the file's weights (decoded exactly): how far q4gsw takes the model from them.
      rep.import_error = interop_detail::q4_error(model);
      std::printf("  q4gsw (group %ld) against the file's weights: %s\n  %s\n",
                  static_cast<long>(model.config().group_size), rep.import_error.summary().c_str(),
                  rep.import_error.worst_line().c_str());
    }
    return rep;
  }
  // The file's own 4-bit weights: what its model computed with. Kept as they are; --requantize replaces them
  // with what quantizing the masters gives (max|w|/7 per group), which is another model when the masters have
  // drifted from the frozen scales during QAT — the change is measured against the file's weights.
  Backend& be = model.backend();
  const int64_t gs = model.config().group_size;
  if (requantize) model.quantize_from_masters();
  WeightChange change;
  for (const Param& p : model.params()) {
    if (!p.quantized()) continue;
    const q4::Geometry g = geometry_of(p, gs);
    const FileQ4 file = read_q4(*r, p, g, path);
    if (!requantize) {
      be.upload(p.codes, file.words.data(), file.words.size() * sizeof(uint32_t));
      be.upload(p.scales, file.scales.data(), file.scales.size() * sizeof(float));
      continue;
    }
    const std::vector<uint32_t> words = be.to_vector<uint32_t>(p.codes);
    const std::vector<float> scales = be.to_vector<float>(p.scales);
    change.add(q4::dequantize(g, q4::unpack_w4x8(g, words.data()).data(), scales.data()),
               q4::dequantize(g, q4::unpack_w4x8(g, file.words.data()).data(), file.scales.data()));
  }
  if (!requantize) {
    rep.kept = true;
    std::printf("  kept the 4-bit weights (codes and scales) of %ld linears as %s saved them; --requantize "
                "derives new ones from the masters\n", static_cast<long>(rep.linears), path.c_str());
    return rep;
  }
  const double file_rms = std::sqrt(change.sq_file / static_cast<double>(std::max<int64_t>(change.n, 1)));
  rep.rms_change = file_rms > 0 ? std::sqrt(change.sq_diff / static_cast<double>(change.n)) / file_rms : 0;
  rep.max_change = file_rms > 0 ? change.max_diff / file_rms : 0;
  std::printf("  --requantize: new 4-bit scales and codes of %ld linears from the masters; the 4-bit weights moved "
              "by RMS %.3g%% and at most %.3g%% of the file's RMS weight\n",
              static_cast<long>(rep.linears), 100 * rep.rms_change, 100 * rep.max_change);
  return rep;
}

void load_adapter_from(const std::string& path, Model& model) {
  const LoraAdapter a = read_lora_adapter(path);
  for (const std::string& n : a.notes) std::printf("  note: %s\n", n.c_str());
  load_lora_adapter(model, a);
  std::printf("  LoRA adapter %s: %zu tensors, rank %ld, alpha %g, targets %s (its settings, not --lora-*)\n",
              path.c_str(), a.tensors.size(), static_cast<long>(a.rank), a.alpha, a.targets.c_str());
}

}  // namespace edgetrain::training
