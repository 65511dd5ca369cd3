// libFuzzer target for the safetensors reader: any input must either throw edgetrain::Error or parse into
// a self-consistent file whose every tensor byte lies inside the input (ASan/UBSan catch the rest).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "edgetrain/safetensors.h"

namespace st = edgetrain::safetensors;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    st::Reader r = st::Reader::from_memory(data, size, "fuzz-input");
    uint64_t total = 0;
    for (const st::TensorInfo& t : r.tensors()) {
      if (t.begin > t.end || t.end > r.data_bytes()) std::abort();
      if (static_cast<uint64_t>(t.numel()) * st::dtype_bytes(t.dtype) != t.nbytes()) std::abort();
      total += t.nbytes();
      const uint8_t* p = r.data(t.name);
      volatile uint8_t sink = 0;
      for (uint64_t i = 0; i < t.nbytes(); ++i) sink = sink ^ p[i];  // every byte must be readable
      if (t.dtype == "F32" || t.dtype == "F16" || t.dtype == "BF16") {
        std::vector<float> v = r.to_f32(t.name);
        if (v.size() != static_cast<size_t>(t.numel())) std::abort();
      }
    }
    if (total != r.data_bytes() || r.data_bytes() > size) std::abort();
  } catch (const edgetrain::Error&) {
    // Rejected input: the expected outcome for nearly everything.
  }
  return 0;
}
