// The int8 KV format, all of it: the row codec that writes K and V rows (inline below), the
// contract of its attention kernels, the rounding of the query and of the P.V weights, and the
// kernels - portable (Highway, int8_portable.cpp) and AVX-512 VNNI (int8_vnni.cpp: Q.K^T with
// vpdpbusd, 64 byte products per instruction, P.V with vpdpwssd, 32 int16 products; a 512-bit f32
// FMA does 16). int8.cpp holds the roundings and the table entries; kernel_table.cpp says which
// entry runs; kvcache/kv_formats.cpp picks the row's scale (per row or per tensor) and calls the
// codec.
//
// Contract (every int8 kernel, bit for bit): the query is rounded per head to int8
// (QuantizeQueryInt8), its dot product with a row's codes is an exact integer, and score[h, p] =
// float(q8[h] . codes[p]) * (head_scale[h] * row_scale[p]). Integer sums do not depend on the
// order they are taken in, so the VNNI kernel, the portable integer kernels and the f32 one (whose
// products and partial sums are exact integers below 2^24) give identical scores.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/attention/decode_attention.h"
#include "kernels/attention/kv_rows.h"
#include "kernels/cpu_kernels.h"

namespace wc {

// The row codec. An int8 row (layout: kv_rows.h) holds symmetric codes q = round(x / s) in
// [-kInt8CodeMax, kInt8CodeMax], value q * s; the scale s is amax / kInt8CodeMax of the row or of
// the tensor (kvcache/kv_formats.h), so values beyond a tensor scale's range saturate.
constexpr float kInt8CodeMax = 127.0f;

// codes[i] = round-to-nearest-even(clamp(x[i] * inv_scale)) as two's complement bytes, i < n;
// inv_scale = 1 / s (0 for an all-zero row: all codes 0).
inline void EncodeInt8Codes(const float* x, int n, float inv_scale, uint8_t* codes) {
  for (int i = 0; i < n; ++i) {
    const float y = x[i] * inv_scale;
    const float r = std::nearbyint(std::max(-kInt8CodeMax, std::min(kInt8CodeMax, y)));
    codes[i] = static_cast<uint8_t>(static_cast<int8_t>(r));
  }
}
// out[i] = code[i] * scale, i < n: the scalar decoder, the oracle the kernels are tested against.
inline void DecodeInt8Codes(const uint8_t* codes, int n, float scale, float* out) {
  for (int i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<int8_t>(codes[i])) * scale;
}

// Largest head_dim whose int8 dot products stay exact in f32 partial sums (127 * 128 * 1024
// < 2^24); wider heads keep the f32 query.
constexpr int64_t kInt8QueryMaxCols = 1024;

// q8[h, c] = round-to-nearest-even(q[h, c] * 127 / max_c |q[h, c]|); head_scale[h] = scale *
// max |q[h, :]| / 127 (0 for an all-zero head, NaN when the head holds a NaN or Inf).
//   q: [n_heads, cols] f32; q8: [n_heads, cols]; head_scale: [n_heads].
void QuantizeQueryInt8(const float* q, int n_heads, int64_t cols, float scale, int8_t* q8,
                       float* head_scale);

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

// The table's int8 kernels (kernel_table.h), as AttentionScores / AccumulateWeightedRows for int8
// rows; each rounds its operand as above first. Q.K^T needs k.cols <= kInt8QueryMaxCols.
//   ...Vnni: AVX-512 VNNI; Q.K^T needs cols % 64 == 0, P.V cols % 32 == 0.
//   ScoresVnni: 16 rows transposed into the lanes, read by every head.
//   WeightedVnniShared: V's row pairs widened once per block for all heads (>= 5 heads pay).
//   WeightedVnniGroups: groups of up to 4 heads widening in registers.
//   ScoresHeadsInLanes / WeightedPairs: portable, the heads in the lanes of a vector (Q.K^T) and
//   V's pairs widened once for all heads (P.V) (>= 8 heads fill the lanes).
//   ScoresPerHead: portable, the f32 kernels on the integer-valued query; WeightedPerHead:
//   portable, one head at a time.
ScoresKernelFn Int8ScoresVnni, Int8ScoresHeadsInLanes, Int8ScoresPerHead;
WeightedKernelFn Int8WeightedVnniShared, Int8WeightedVnniGroups, Int8WeightedPairs,
    Int8WeightedPerHead;

// The portable kernels proper (int8_portable.cpp), on operands already rounded (shapes as below):
//   Int8ScoresHeadsInLanesKernel: the heads in the lanes of a vector, 4 rows at a time.
//   Int8WeightedPairsKernel: V's row pairs widened once for all heads; PerHead: one head at a time.
void Int8ScoresHeadsInLanesKernel(const int8_t* q8, int n_heads, const float* head_scale,
                                  const RowsRef& k, float* scores);
void Int8WeightedPairsKernel(const int16_t* wq, int64_t wq_stride, const float* unit, int n_heads,
                             const RowsRef& v, float* o);
void Int8WeightedPerHeadKernel(const int16_t* wq, int64_t wq_stride, const float* unit, int n_heads,
                               const RowsRef& v, float* o);

// The VNNI kernels proper (int8_vnni.cpp), on operands already rounded:
//   q8: [n_heads, k.cols]; head_scale: [n_heads]; scores: [n_heads, k.rows].
void Int8ScoresVnniKernel(const int8_t* q8, int n_heads, const float* head_scale, const RowsRef& k,
                          float* scores, const RowsRef& along);
//   wq: [n_heads, wq_stride] int16 (v.rows <= kInt8WeightSegmentRows); unit: [n_heads].
void Int8WeightedVnniSharedKernel(const int16_t* wq, int64_t wq_stride, const float* unit,
                                  int n_heads, const RowsRef& v, float* o, const RowsRef& along);
void Int8WeightedVnniGroupsKernel(const int16_t* wq, int64_t wq_stride, const float* unit,
                                  int n_heads, const RowsRef& v, float* o, const RowsRef& along);

// Tests switch these kernels with SetVnniKernels and ask CpuHasVnniKernels (cpu_kernels.h).

}  // namespace wc
