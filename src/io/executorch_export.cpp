// ExecuTorch export: every block linear in the q4gsw interchange format of OPS.md section 1.2 (u8 codes
// [N, Kp/2] with K padded to a multiple of 8 by code 8, scales transposed to [G, N'] zero-padded to a
// multiple of 4), the other tensors in fp32, in one safetensors file with a manifest.json beside it.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "edgetrain/interop.h"
#include "edgetrain/q4gsw.h"
#include "edgetrain/safetensors.h"

namespace fs = std::filesystem;

namespace edgetrain {

void export_executorch(const std::string& dir, Model& model) {
  const ModelConfig& c = model.config();
  Backend& b = model.backend();
  fs::create_directories(dir);
  safetensors::Writer w;
  nlohmann::json linears = nlohmann::json::array(), others = nlohmann::json::array();
  for (Param& p : model.params()) {
    if (p.name.find(".lora_") != std::string::npos) continue;  // merged into the weight below
    const Shape& s = p.value.shape();
    bool block_linear = s.rank() == 2 && p.name.rfind("layers.", 0) == 0;
    if (!block_linear) {
      std::vector<float> v = b.to_vector<float>(p.value);
      std::vector<uint8_t> bytes(v.size() * 4);
      std::memcpy(bytes.data(), v.data(), bytes.size());
      std::vector<int64_t> shape(s.data(), s.data() + s.rank());
      w.add_owned(p.name, "F32", shape, std::move(bytes));
      others.push_back({{"name", p.name}, {"dtype", "F32"}, {"shape", shape}});
      continue;
    }
    const int64_t N = s[0], K = s[1], gs = c.group_size;
    q4::Geometry g(N, K, gs);
    std::vector<uint8_t> codes;
    std::vector<float> scales;
    bool merged = false;
    for (Param& q : model.params())
      if (q.name == p.name + ".lora_b")
        for (float x : b.to_vector<float>(q.value)) merged |= x != 0.0f;
    std::string source;
    if (p.quantized() && !merged) {
      codes = q4::unpack_w4x8(g, b.to_vector<uint32_t>(p.codes).data());
      scales = b.to_vector<float>(p.scales);
      source = "codes";
    } else {  // fp32 mode or merged LoRA: quantize what the model computes with
      std::vector<float> wv = interop_detail::effective_weight(model, p);
      auto q = q4::quantize(g, wv.data());
      codes = std::move(q.codes);
      scales = std::move(q.scales);
      source = merged ? "quantized from the merged LoRA weight" : "quantized from the fp32 weight";
    }
    // K padded to Kp = 8*ceil(K/8) with code 8 (value 0).
    const int64_t Kp = (K + 7) / 8 * 8, Np = (N + 3) / 4 * 4, G = g.groups();
    std::vector<uint8_t> padded(static_cast<size_t>(N * Kp), 8);
    for (int64_t n = 0; n < N; ++n) std::copy_n(&codes[n * K], K, &padded[n * Kp]);
    q4::Geometry gp(N, Kp, gs);
    std::vector<uint8_t> packed = q4::codes_to_interchange(gp, padded.data());
    std::vector<float> st(static_cast<size_t>(G * Np), 0.0f);
    for (int64_t gi = 0; gi < G; ++gi) std::copy_n(&scales[gi * N], N, &st[gi * Np]);
    std::vector<uint8_t> sbytes(st.size() * 4);
    std::memcpy(sbytes.data(), st.data(), sbytes.size());
    w.add_owned(p.name, "U8", {N, Kp / 2}, std::move(packed));
    w.add_owned(p.name + ".scales", "F32", {G, Np}, std::move(sbytes));
    linears.push_back({{"name", p.name},
                       {"weight", p.name},
                       {"weight_shape", {N, Kp / 2}},
                       {"scales", p.name + ".scales"},
                       {"scales_shape", {G, Np}},
                       {"out_features", N},
                       {"in_features", K},
                       {"padded_in_features", Kp},
                       {"group_size", gs},
                       {"source", source}});
  }
  w.set_metadata("format", "edgetrain-executorch-q4gsw-v1");
  w.save(dir + "/weights.safetensors");
  nlohmann::json m = {{"format", "edgetrain-executorch-q4gsw-v1"},
                      {"weights_file", "weights.safetensors"},
                      {"q4_layout", "interchange: u8 [N, Kp/2], byte (n, j) = c[n,2j] | c[n,2j+1] << 4, code = q + 8; "
                                    "padding code 8; scales [G, 4*ceil(N/4)] zero-padded"},
                      {"group_size", c.group_size},
                      {"config", nlohmann::json::parse(c.to_json())},
                      {"tied_head", c.tied_head},
                      {"quantized_linears", linears},
                      {"fp32_tensors", others}};
  std::ofstream out(dir + "/manifest.json", std::ios::trunc);
  ET_CHECK_KIND(ErrorKind::io, out, "executorch export: cannot write ", dir, "/manifest.json");
  out << m.dump(2) << "\n";
  ET_CHECK_KIND(ErrorKind::io, out.good(), "executorch export: write failed: ", dir, "/manifest.json");
}

}  // namespace edgetrain
