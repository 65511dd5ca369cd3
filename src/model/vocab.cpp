// The vocabulary a part at a time. A Llama-3 table is 128,256 x 2,048 fp32 = 1 GiB and its logits at
// batch 4 x seq 1,024 2 GiB, while lavapipe, WebGPU's default and many phones bind at most 128 MiB to one
// kernel. Each part takes `rows` consecutive tokens of the vocabulary, chosen so that its rows of the table
// (a view: Tensor::rows) and its logits [R, rows] (a tensor of its own) each fit one binding:
//   embedding:    every part writes the rows of x whose token it holds (embedding's ints {first, total});
//   logits:       a linear per part; the cross-entropy needs each row's logsumexp over the whole vocabulary
//                 first: logsumexp_rows accumulates it part by part, then fused_ce_part takes each part's
//                 share of the loss and writes its dlogits in place;
//   backward:     the head's gradient per part (a view of head.grad), dh the sum of the parts' products,
//                 embedding_backward per part (ints {accumulate, first}).
// The optimizer updates such parameters by the same row parts (record_optimizer, binding_parts).
#include <algorithm>

#include "model/model_impl.h"

namespace edgetrain {
namespace {

// Rows of the vocabulary per part for a batch of R rows: the table's rows [.., D] and the logits' columns
// [R, ..] both fit one binding (R = 0: the table alone). V when everything fits (the common case: one
// part, the plain ops).
int64_t vocab_part_rows(const Backend& b, int64_t V, int64_t D, int64_t R) {
  const uint64_t row = 4 * static_cast<uint64_t>(std::max(D, R)), table_row = 4 * static_cast<uint64_t>(D);
  return rows_per_binding(b, V, row, table_row);
}

// A part of a [V, D] table (the embedding, the head or a gradient of theirs): its first token and its rows.
struct TablePart {
  int64_t first;
  Tensor rows;
};

// The table in parts for a batch of R rows (vocab_part_rows); one part, the whole table, when it fits.
std::vector<TablePart> table_parts(const Backend& b, const Tensor& table, int64_t R) {
  const int64_t V = table.shape()[0], rows = vocab_part_rows(b, V, table.shape()[1], R);
  if (rows >= V) return {{0, table}};
  std::vector<TablePart> parts;
  for (int64_t first = 0; first < V; first += rows) parts.push_back({first, table.rows(first, std::min(rows, V - first))});
  return parts;
}

// The logits of h [R, D] against each part's rows, in order.
std::vector<Tensor> part_logits(Graph& g, const std::vector<TablePart>& parts, const Tensor& h) {
  std::vector<Tensor> logits;
  for (const TablePart& p : parts) logits.push_back(g.linear(h, p.rows));
  return logits;
}

}  // namespace

int64_t vocab_parts(const Backend& b, int64_t V, int64_t D, int64_t R) {
  const int64_t rows = vocab_part_rows(b, V, D, R);
  return (V + rows - 1) / rows;
}

Tensor embed(Graph& g, const Tensor& table, const Tensor& tokens) {
  const std::vector<TablePart> parts = table_parts(g.backend(), table, 0);
  if (parts.size() == 1) return g.embedding(table, tokens);  // [..., D]
  const int64_t V = table.shape()[0], D = table.shape()[1];
  Tensor x = g.alloc(Shape{tokens.numel(), D}, DType::f32);  // every row written by the part holding its token
  for (const TablePart& p : parts) g.call(Op::embedding, {p.rows, tokens}, {x}, {p.first, V});
  return x;
}

void embed_backward(Graph& g, const Tensor& dx, const Tensor& tokens, const Tensor& grad, bool accumulate) {
  for (const TablePart& p : table_parts(g.backend(), grad, 0))
    g.call(Op::embedding_backward, {dx, tokens}, {p.rows}, {accumulate ? 1 : 0, p.first});
}

std::vector<Tensor> head_logits(Graph& g, const Tensor& head, const Tensor& h) {
  return part_logits(g, table_parts(g.backend(), head, h.shape().rows()), h);
}

HeadLoss head_loss(Graph& g, const Param& head, const Tensor& h, const Tensor& labels, Scalar n_valid, bool train) {
  const int64_t V = head.value.shape()[0], R = h.shape().rows();
  const std::vector<TablePart> parts = table_parts(g.backend(), head.value, R);
  HeadLoss out;
  if (parts.size() == 1) {
    Tensor logits = g.linear(h, head.value);  // [R, V], fp32 head
    Tensor dlogits;
    std::tie(out.loss, dlogits) = g.fused_ce(logits, labels, n_valid, /*in_place=*/true);
    if (!train) return out;
    if (head.trainable) g.linear_dW_into(dlogits, h, head.grad, true);
    out.dh = g.mm(dlogits, head.value);  // [R, D]
    return out;
  }
  const std::vector<Tensor> logits = part_logits(g, parts, h);
  Tensor lse = g.alloc(Shape{R}, DType::f32);
  for (size_t c = 0; c < parts.size(); ++c) g.call(Op::logsumexp_rows, {logits[c]}, {lse}, {c > 0 ? 1 : 0});
  out.loss = g.alloc(Shape{}, DType::f32);
  for (size_t c = 0; c < parts.size(); ++c)  // dlogits in place of each part's logits
    g.call(Op::fused_ce_part, {logits[c], labels, lse}, {out.loss, logits[c]}, {parts[c].first, V, c > 0 ? 1 : 0},
           {n_valid});
  if (!train) return out;
  for (size_t c = 0; c < parts.size(); ++c) {
    const TablePart& p = parts[c];
    if (head.trainable) g.linear_dW_into(logits[c], h, head.grad.rows(p.first, p.rows.shape()[0]), true);
    if (c == 0) out.dh = g.mm(logits[c], p.rows);
    else g.mm_into(logits[c], p.rows, out.dh, false, false, 1.0f, true);
  }
  return out;
}

}  // namespace edgetrain
