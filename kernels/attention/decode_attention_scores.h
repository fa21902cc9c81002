// The portable decode-attention scores (F32FmaScoresPerHead, decode_attention_f32.h) of each KV
// format, each in its own file so that they compile side by side (each is its formats' row
// sources x head groups x SIMD targets; together, one file took ~113 s under ASan + UBSan).
// Contract: F32FmaScoresPerHead's, for rows `k` of the named formats only.
#pragma once

#include "kernels/attention/kv_rows.h"

namespace wc {

void F32FmaScoresFloat(const float* q, int n_heads, const RowsRef& k, const float* head_scale,
                       float* scores, const RowsRef& along);  // f32, f16
void F32FmaScoresBF16(const float* q, int n_heads, const RowsRef& k, const float* head_scale,
                      float* scores, const RowsRef& along);
void F32FmaScoresInt8(const float* q, int n_heads, const RowsRef& k, const float* head_scale,
                      float* scores, const RowsRef& along);
void F32FmaScoresFP8E4M3(const float* q, int n_heads, const RowsRef& k, const float* head_scale,
                         float* scores, const RowsRef& along);
void F32FmaScoresFP8E5M2(const float* q, int n_heads, const RowsRef& k, const float* head_scale,
                         float* scores, const RowsRef& along);
void F32FmaScoresBfp8(const float* q, int n_heads, const RowsRef& k, const float* head_scale,
                      float* scores, const RowsRef& along);

}  // namespace wc
