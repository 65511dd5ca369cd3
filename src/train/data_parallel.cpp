// Data-parallel pieces of the trainer: the gradient sum across ranks and the same-job check at start-up.
#include "train/data_parallel.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "edgetrain/error.h"
#include "edgetrain/ops.h"

namespace edgetrain::training {

ReduceSize reduce_size(Model& m) {
  ReduceSize r;
  int64_t in_bucket = 0;
  for (Param& p : m.params()) {
    if (!p.trainable) continue;
    const int64_t b = p.grad.numel() * 4;
    r.bytes += b;
    ++r.tensors;
    if (in_bucket == 0 || in_bucket + b > static_cast<int64_t>(kBucketBytes)) ++r.buckets, in_bucket = 0;
    in_bucket += b;
  }
  return r;
}

void sum_gradients(Model& m, Communicator& comm) {
  if (comm.size() == 1) return;
  stage_gradients(m, [&comm](float* values, size_t n) { comm.sum(values, n, "gradient all-reduce"); });
}

void stage_gradients(Model& m, const std::function<void(float* values, size_t n)>& reduce) {
  Backend& b = m.backend();
  std::vector<Param*> bucket;
  std::vector<float> host;
  auto flush = [&] {
    if (bucket.empty()) return;
    reduce(host.data(), host.size());
    size_t at = 0;
    for (Param* p : bucket) {
      const size_t n = static_cast<size_t>(p->grad.numel());
      b.upload(p->grad, host.data() + at, n * sizeof(float));
      at += n;
    }
    bucket.clear();
    host.clear();
  };
  for (Param& p : m.params()) {
    if (!p.trainable) continue;
    const size_t n = static_cast<size_t>(p.grad.numel());
    if (!bucket.empty() && (host.size() + n) * sizeof(float) > kBucketBytes) flush();
    const size_t at = host.size();
    host.resize(at + n);
    b.download(p.grad, host.data() + at, n * sizeof(float));
    bucket.push_back(&p);
  }
  flush();
}

namespace {

uint64_t fnv(const void* data, size_t n, uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}
uint64_t fnv(const std::string& s) { return fnv(s.data(), s.size()); }

// What makes two builds compute differently: the version and the op catalogue with its signatures.
uint64_t build_hash() {
  std::string s = "edgetrain 0.1.0";
#define ET_OP(name, family, inputs, outputs, ints, floats, summary) \
  s += #name family inputs outputs ints floats;
#include "edgetrain/ops.inc"
#undef ET_OP
  return fnv(s);
}

}  // namespace

void check_same_job(Communicator& comm, const TrainOptions& o, const RunData& d) {
  if (comm.size() == 1) return;
  uint64_t corpus = fnv(&d.size, sizeof d.size);
  const int64_t samples = d.tokens ? std::min<int64_t>(d.size, 4096) : 0;  // --data: its size and options
  for (int64_t i = 0; i < samples; ++i) {  // evenly spaced tokens, the ends included
    const int32_t t = d.tokens->at(samples > 1 ? i * (d.size - 1) / (samples - 1) : 0);
    corpus = fnv(&t, sizeof t, corpus);
  }
  const struct {
    const char* what;
    uint64_t hash;
  } fields[] = {{"edgetrain build (version and op catalogue)", build_hash()},
                {"model config", fnv(o.model.to_json())},
                {"training options", fnv(options_record(o) + "|" + o.init + "|" + std::to_string(o.resume))},
                {"corpus (size and tokens)", corpus}};
  for (const auto& f : fields) {
    const std::vector<uint64_t> all = comm.gather_all(f.hash, "start-up check");
    std::string differ;
    for (size_t r = 1; r < all.size(); ++r)
      if (all[r] != all[0]) differ += (differ.empty() ? "" : ", ") + std::to_string(r);
    ET_CHECK(differ.empty(), "data parallel: the ranks do not run the same job: the ", f.what, " of rank(s) ",
             differ, " differs from rank 0's; start every rank with the same build, flags and files");
  }
}

}  // namespace edgetrain::training
