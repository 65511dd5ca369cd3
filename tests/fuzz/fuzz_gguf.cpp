// libFuzzer target for the GGUF reader: any input must either throw edgetrain::Error or parse into a file
// whose every tensor lies inside the input and decodes (ASan/UBSan catch the rest).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "io/gguf.h"
#include "edgetrain/error.h"

namespace gguf = edgetrain::gguf;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    gguf::File f = gguf::File::from_memory(data, size, "fuzz-input");
    for (const gguf::TensorInfo& t : f.tensors()) {
      const uint8_t* p = f.data(t);
      if (p < data || p + t.nbytes > data + size) std::abort();
      std::vector<float> v = f.to_f32(t);
      if (v.size() != t.numel) std::abort();
    }
    for (const auto& kv : f.metadata()) (void)kv.second.describe();
  } catch (const edgetrain::Error&) {
    // Rejected input: the expected outcome for nearly everything.
  }
  return 0;
}
