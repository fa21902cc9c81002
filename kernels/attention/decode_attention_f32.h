// The portable decode-attention kernels as the kernel table (kernel_table.h) runs them: f32 FMAs
// on rows of any format, dequantized in registers (decode_attention_scores_*.cpp and
// decode_attention_weighted.cpp, Highway's best target on this CPU). The fallback of every format,
// and the float formats' (f32, bf16, f16) only kernels.
#pragma once

#include <cstdint>

#include "kernels/attention/decode_attention.h"
#include "kernels/attention/kv_rows.h"

namespace wc {

// As AttentionScores / AccumulateWeightedRows (decode_attention.h), for any rows.
ScoresKernelFn F32FmaScores;
WeightedKernelFn F32FmaWeighted;

// F32FmaScores with a scale per head: scores[h * k.rows + p] = head_scale[h] * dot(q[h], k[p])
// (scaled codes: times the row's scale). head_scale: [n_heads].
void F32FmaScoresPerHead(const float* q, int n_heads, const RowsRef& k, const float* head_scale,
                         float* scores, const RowsRef& along);

}  // namespace wc
