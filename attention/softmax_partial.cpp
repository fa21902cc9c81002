#include "attention/softmax_partial.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "attention/reference_attention.h"
#include "kernels/attention/decode_attention.h"
#include "util/error.h"

namespace wc {

PartialNode PartialLayout::Empty(int level, int64_t index) const {
  PartialNode n;
  n.level = level;
  n.index = index;
  n.data.assign(floats(), 0.0f);
  for (int h = 0; h < n_heads_; ++h) n.data[h] = -std::numeric_limits<float>::infinity();
  return n;
}

void PartialLayout::Merge(PartialNode& a, const PartialNode& b) const {
  WC_CHECK(a.data.empty() == b.data.empty(), "merging a planning node with a data node");
  if (a.data.empty()) return;
  for (int h = 0; h < n_heads_; ++h) {
    const float ma = m(a)[h], mb = m(b)[h];
    if (mb == -std::numeric_limits<float>::infinity()) continue;  // b attended to nothing
    float* oa = o(a) + static_cast<int64_t>(h) * head_dim_;
    const float* ob = o(b) + static_cast<int64_t>(h) * head_dim_;
    if (ma == -std::numeric_limits<float>::infinity()) {
      m(a)[h] = mb;
      l(a)[h] = l(b)[h];
      for (int d = 0; d < head_dim_; ++d) oa[d] = ob[d];
      continue;
    }
    const float mx = std::max(ma, mb);
    const float ca = std::exp(ma - mx), cb = std::exp(mb - mx);
    m(a)[h] = mx;
    l(a)[h] = l(a)[h] * ca + l(b)[h] * cb;
    for (int d = 0; d < head_dim_; ++d) oa[d] = oa[d] * ca + ob[d] * cb;
  }
}

void PartialLayout::Normalize(const PartialNode& n, float* out) const {
  for (int h = 0; h < n_heads_; ++h) {
    const float lh = l(n)[h];
    const float inv = lh > 0.0f ? 1.0f / lh : 0.0f;
    const float* oh = o(n) + static_cast<int64_t>(h) * head_dim_;
    float* dst = out + static_cast<int64_t>(h) * head_dim_;
    for (int d = 0; d < head_dim_; ++d) dst[d] = oh[d] * inv;
  }
}

void ChunkPartial(const float* q, const PartialLayout& layout, const RowsRef& k, const RowsRef& v,
                  float scale, const float* mask, int64_t mask_stride, float* scores,
                  PartialNode* node, const RowsRef& next_k, const ChunkBias& bias) {
  const int n_heads = layout.n_heads();
  const int64_t rows = k.rows;
  node->data.assign(layout.floats(), 0.0f);
  // Memory streams while the core computes: K's first rows now (the scores kernel prefetches the
  // rest, and V along), the next chunk's K along the P.V sum.
  PrefetchRows(k, kChunkPrefetchRows);
  // scores [n_heads, rows] = scale * q k^T (+ mask), then exp(s - m) in place: the P.V weights.
  AttentionScores(q, n_heads, k, scale, scores, v);
  for (int h = 0; h < n_heads; ++h) {
    float* s = scores + h * rows;
    if (bias.alibi.enabled())
      for (int64_t p = 0; p < rows; ++p)
        s[p] += scale * bias.alibi.At(bias.head0 + h, bias.first_pos + p);
    if (mask != nullptr)
      for (int64_t p = 0; p < rows; ++p) s[p] += mask[h * mask_stride + p];
    const float mx = MaxOf(s, rows);
    layout.m(*node)[h] = mx;
    if (mx == -std::numeric_limits<float>::infinity()) {  // all masked: an empty partial
      std::fill(s, s + rows, 0.0f);
      continue;
    }
    layout.l(*node)[h] = ExpShiftSum(s, rows, mx);
  }
  // O [n_heads, head_dim] = sum over rows, in order, of the weights times V.
  AccumulateWeightedRows(scores, rows, n_heads, v, layout.o(*node), next_k);
}

void CanonicalMerger::Push(PartialNode node) {
  while (!stack_.empty()) {
    PartialNode& top = stack_.back();
    const bool siblings =
        top.level == node.level && top.index % 2 == 0 && top.index + 1 == node.index;
    if (!siblings) break;
    layout_->Merge(top, node);
    ++merges_;
    top.level += 1;
    top.index /= 2;
    node = std::move(top);
    stack_.pop_back();
  }
  if (!stack_.empty()) {
    const PartialNode& top = stack_.back();
    WC_CHECK(((top.index + 1) << top.level) <= (node.index << node.level),
             "partials must arrive in ascending chunk order");
  }
  stack_.push_back(std::move(node));
}

std::vector<PartialNode> CanonicalMerger::TakeNodes() {
  std::vector<PartialNode> out = std::move(stack_);
  stack_.clear();
  return out;
}

PartialNode CanonicalMerger::Finish(bool with_data) {
  if (stack_.empty()) return with_data ? layout_->Empty(0, 0) : PartialNode{};
  // Right to left: the rightmost (smallest) nodes stand in for right subtrees whose missing parts
  // are empty, so this equals the padded tree.
  PartialNode acc = std::move(stack_.back());
  stack_.pop_back();
  while (!stack_.empty()) {
    PartialNode left = std::move(stack_.back());
    stack_.pop_back();
    layout_->Merge(left, acc);
    ++merges_;
    acc = std::move(left);
  }
  return acc;
}

}  // namespace wc
