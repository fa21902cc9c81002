// Partial softmax-attention results and their merge, arranged so the result never depends on how
// the KV sequence was split across cores.
//
// A chunk's partial holds, per query head h: m[h] = max score, l[h] = sum exp(s - m[h]),
// O[h] = sum exp(s - m[h]) v  (unnormalized). Partials merge with the log-sum-exp rule.
// Merges only ever happen between siblings of one fixed binary tree over chunk indices (node
// (level, index) covers chunks [index << level, (index + 1) << level)), and a partially filled
// tree is folded right to left. Any contiguous split of the chunks over cores, any reduction
// pattern (flat, binary tree) and any host thread count therefore give bit-identical outputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "attention/alibi.h"
#include "kernels/attention/kv_rows.h"

namespace wc {

struct PartialNode {
  int level = 0;
  int64_t index = 0;
  // [n_heads] m, [n_heads] l, [n_heads, head_dim] O, packed as one float array. Empty in planning
  // runs, where only the tree structure (and so the message and merge counts) is followed.
  std::vector<float> data;
};

class PartialLayout {
 public:
  PartialLayout(int n_heads, int head_dim) : n_heads_(n_heads), head_dim_(head_dim) {}
  int n_heads() const { return n_heads_; }
  int head_dim() const { return head_dim_; }
  size_t floats() const { return static_cast<size_t>(n_heads_) * (head_dim_ + 2); }
  float* m(PartialNode& n) const { return n.data.data(); }
  float* l(PartialNode& n) const { return n.data.data() + n_heads_; }
  float* o(PartialNode& n) const { return n.data.data() + 2 * n_heads_; }
  const float* m(const PartialNode& n) const { return n.data.data(); }
  const float* l(const PartialNode& n) const { return n.data.data() + n_heads_; }
  const float* o(const PartialNode& n) const { return n.data.data() + 2 * n_heads_; }
  // An empty partial (m = -inf, l = 0, O = 0): the identity of Merge.
  PartialNode Empty(int level, int64_t index) const;
  // left = merge(left, right), in place; `left` keeps its place in the tree (caller sets level).
  // Nodes without data (planning runs) merge structurally only.
  void Merge(PartialNode& left, const PartialNode& right) const;
  // out[h, :] = O[h, :] / l[h]; zeros for a head that attended to nothing.
  void Normalize(const PartialNode& n, float* out) const;

 private:
  int n_heads_;
  int head_dim_;
};

// Where a chunk's rows sit, for a position bias: ALiBi's slopes of the chunk's query heads
// (`alibi` indexed from `head0`) and the key position of its first row. No bias: alibi disabled.
struct ChunkBias {
  AlibiBias alibi;
  int head0 = 0;
  int64_t first_pos = 0;
};

// The partial of one chunk: scores s = scale * (q k^T + bias) (+ mask), per head m = max s,
// l = sum exp(s - m), O = sum exp(s - m) v.
//   q: [n_heads, head_dim]; k, v: [rows, head_dim] stored rows (any format); mask: [n_heads,
//   mask_stride] additive or null; scores: [n_heads * rows] scratch; node->data is (re)filled.
//   next_k (optional, no data = none): the K rows computed next, only prefetched (the result never
//   depends on it). The bias is added as scale * bias to the scaled dot products the kernels
//   return (one rounding away from HF's (q.k + bias) * scale).
void ChunkPartial(const float* q, const PartialLayout& layout, const RowsRef& k, const RowsRef& v,
                  float scale, const float* mask, int64_t mask_stride, float* scores,
                  PartialNode* node, const RowsRef& next_k = {}, const ChunkBias& bias = {});

// Folds nodes arriving in ascending chunk order along the fixed tree. Push merges a node with the
// stack top while they are siblings; Finish folds what remains right to left.
class CanonicalMerger {
 public:
  explicit CanonicalMerger(const PartialLayout& layout) : layout_(&layout) {}
  void Push(PartialNode node);
  // Number of merges performed so far (for the performance counters).
  int64_t merges() const { return merges_; }
  // The nodes not yet merged, in ascending order (what a worker sends to its reducer).
  std::vector<PartialNode> TakeNodes();
  // The single partial covering everything pushed (Empty, with data if `with_data`, if nothing
  // was pushed).
  PartialNode Finish(bool with_data = true);

 private:
  const PartialLayout* layout_;
  std::vector<PartialNode> stack_;
  int64_t merges_ = 0;
};

}  // namespace wc
