// What the trainer does across data-parallel ranks (include/edgetrain/dist.h): sum the gradients, check that
// every rank runs the same job, describe the setup.
#pragma once

#include <cstdint>
#include <string>

#include "edgetrain/dist.h"
#include "edgetrain/model.h"
#include "train/run.h"

namespace edgetrain::training {

// Bytes of gradient one step sums across ranks (every trainable tensor, fp32), and the buckets they travel in.
constexpr size_t kBucketBytes = size_t{32} << 20;
struct ReduceSize {
  int64_t bytes = 0, tensors = 0, buckets = 0;
};
ReduceSize reduce_size(Model& m);

// Sums every trainable gradient over the ranks, in place: host-staged (download, MPI all-reduce in
// kBucketBytes buckets in parameter order, upload), so any backend works and the result is the same bits on
// every rank. Each rank's gradients must already be divided by the global token count (Model::accumulate's
// n_valid_total), so the sum is the gradient of the global batch. A no-op on one rank.
void sum_gradients(Model& m, Communicator& comm);

// Refuses to start when the ranks do not run the same job: the build, the model, the training options and
// the corpus (its size and a sample of its tokens) are hashed and compared across ranks; the error names
// what differs and which ranks disagree with rank 0.
void check_same_job(Communicator& comm, const TrainOptions& o, const RunData& d);

}  // namespace edgetrain::training
