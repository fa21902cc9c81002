// The int8 kernels on AVX-512 VNNI, chosen at run time: Q.K^T with vpdpbusd (64 byte products per
// instruction) and P.V with vpdpwssd (32 int16 products), the fast paths of AttentionScores and
// AccumulateWeightedRows (decode_attention.h) for int8 K and V rows. A 512-bit f32 FMA does 16.
//
// Contract (shared with the portable path in decode_attention.cpp, bit for bit): the query is
// rounded per head to int8 (QuantizeQueryInt8), its dot product with a row's codes is an exact
// integer, and score[h, p] = float(q8[h] . codes[p]) * (head_scale[h] * row_scale[p]). Integer
// sums do not depend on the order they are taken in, so this kernel and the f32 one (whose
// products and partial sums are exact integers below 2^24) give identical scores.
#pragma once

#include <cstdint>

#include "kernels/kv_rows.h"

namespace wc {

// Largest head_dim whose int8 dot products stay exact in f32 partial sums (127 * 128 * 1024
// < 2^24); wider heads keep the f32 query.
constexpr int64_t kInt8QueryMaxCols = 1024;

// q8[h, c] = round-to-nearest-even(q[h, c] * 127 / max_c |q[h, c]|); head_scale[h] = scale *
// max |q[h, :]| / 127 (0 for an all-zero head, NaN when the head holds a NaN or Inf).
//   q: [n_heads, cols] f32; q8: [n_heads, cols]; head_scale: [n_heads].
void QuantizeQueryInt8(const float* q, int n_heads, int64_t cols, float scale, int8_t* q8,
                       float* head_scale);

// True when this CPU has AVX-512 VNNI, the kernels are enabled and take `k` (int8 rows,
// cols % 64 == 0, cols <= kInt8QueryMaxCols).
bool VnniInt8ScoresUsable(const RowsRef& k);

// scores[h * k.rows + p] as in the contract above, h < n_heads; prefetches `along` as
// AttentionScores does.
void Int8ScoresVnni(const int8_t* q8, int n_heads, const float* head_scale, const RowsRef& k,
                    float* scores, const RowsRef& along);

// int8 V rows: the P.V weights times each row's scale, rounded per head and per segment of at most
// kInt8WeightSegmentRows rows to int16 (|w| <= 32767, so 32767 * 128 * 512 < 2^31 keeps the int32
// sums exact); o[h, d] = fma(float(sum_p wq[h, p] * code[p, d]), unit[h], o[h, d]) per segment.
constexpr int64_t kInt8WeightSegmentRows = 512;

// For rows [0, v.rows) of int8 rows v (at most kInt8WeightSegmentRows): wq[h * wq_stride + p] =
// round-to-nearest-even(w[h * w_stride + p] * row_scale[p] / unit[h]), unit[h] = max_p
// |w * row_scale| / 32767 (0 when all are 0, NaN when one is NaN or Inf); wq is zero-padded to an
// even number of rows. row_scale: [v.rows] scratch.
void QuantizeWeightsInt16(const float* w, int64_t w_stride, int n_heads, const RowsRef& v,
                          float* row_scale, int16_t* wq, int64_t wq_stride, float* unit);

// True when this CPU has AVX-512 VNNI, the kernel is enabled and takes `v` (int8 rows,
// cols % 32 == 0, rows <= kInt8WeightSegmentRows).
bool VnniInt8WeightsUsable(const RowsRef& v);

// o[h, :] for h < n_heads as in the contract above, from QuantizeWeightsInt16's wq and unit;
// prefetches `along` as AccumulateWeightedRows does.
void Int8WeightedVnni(const int16_t* wq, int64_t wq_stride, const float* unit, int n_heads,
                      const RowsRef& v, float* o, const RowsRef& along);

// Tests turn the VNNI kernels off (and on) to compare them with the portable path; whether this
// CPU runs them at all.
void SetVnniKernels(bool enabled);
bool CpuHasVnniKernels();

}  // namespace wc
