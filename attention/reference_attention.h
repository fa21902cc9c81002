// Plain softmax attention of one query token against cached K/V: the test oracle of the FlashDecode
// engine. Knows nothing about any model: heads, groups and views only.
#pragma once

#include <cstdint>

#include "attention/alibi.h"
#include "kernels/matmul.h"

namespace wc {

// Query heads [n_q_heads, head_dim] over one KV head's cached rows. Query head h reads KV head
// h / (n_q_heads / n_kv_heads) (GQA; MHA and MQA are its two ends).
//   q:      [n_qh, head_dim] f32 — the query heads of one KV group, already rotated
//   keys:   [kv_len, head_dim] view (bf16 or f32), kv_len >= 1
//   values: [kv_len, head_dim] view
//   scores: [n_qh, kv_len] f32 scratch
//   out:    [n_qh, head_dim] f32
// softmax((q k^T + bias) * scale) v, single-threaded (callers parallelize over tokens and KV
// heads). bias: ALiBi of the group's heads (`alibi` indexed from `head0`, key p at position p), or
// none - HF's order, the bias added to the raw scores.
void ReferenceAttentionGroup(const float* q, int n_qh, const MatrixRef& keys,
                             const MatrixRef& values, float scale, float* scores, float* out,
                             const AlibiBias& alibi = {}, int head0 = 0);

// out[0:n] += a * v[0:n] for a row of a K/V view.
void AccumulateRow(float a, const MatrixRef& m, int64_t row, float* out);

}  // namespace wc
