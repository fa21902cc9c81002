// SIMD kernels of one decode-attention chunk: the FlashDecode engine's hot path on the host
// (attention/softmax_partial.cpp). A few query heads of one KV group against rows of K and V read
// in place in their stored format (kv_rows.h: f32, bf16, f16, int8, fp8, bfp8), dequantized inside
// the dot products, with run-time SIMD dispatch (Highway) and FP32 accumulation. Scaled codes
// (int8 / fp8) are summed unscaled and the row's scale applied once: to each score, and to each
// P.V weight. int8 rows take integer dot products instead (int8.h): the query
// rounded to int8 per head and the P.V weights to int16 per head and segment, summed exactly -
// AVX-512 VNNI where the CPU has it, the same integers portably elsewhere, bit for bit.
//
// Which kernel runs for a format, shape and CPU is one table, kernel_table.h.
//
// Determinism contract: every output is computed with a fixed sequence of operations that depends
// only on the inputs and their sizes (never on threads or on what else is in the batch), so a
// chunk's result is a pure function of the chunk. The portable kernels' sequence does not depend
// on the SIMD target either, wherever it has FMA (AVX2 and every AVX-512): their dot products and
// sums run in lane_sums-inl.h's 16 lanes, the weighted rows' FMAs per element; the int8 kernels
// are the same integers everywhere. Only fp8 and bfp8 K/V on AVX-512 BF16 take other bits (the
// query and weights rounded to bf16 for vdpbf16ps: kernel_table.h).
#pragma once

#include <cstdint>
#include <string>

#include "kernels/attention/kv_rows.h"

namespace wc {

// Both matrix kernels take `along`: another matrix (no data = none) whose rows they prefetch into
// the cache at the pace they walk their own rows - the V of the chunk while its scores are
// computed, the next chunk's K while its values are summed - so DRAM keeps streaming.

// scores[h * rows + p] = scale * dot(q[h, :], k[p, :]) for h < n_heads, p < rows = k.rows.
//   q: [n_heads, k.cols] f32; k: [rows, head_dim] stored rows; scores: [n_heads, rows].
void AttentionScores(const float* q, int n_heads, const RowsRef& k, float scale, float* scores,
                     const RowsRef& along = {});

// Maximum of x[0:n] (-inf for n == 0).
float MaxOf(const float* x, int64_t n);

// x[p] = exp(x[p] - shift) for p < n, in place (exp(-inf) = 0); returns the sum of the results.
// Requires shift finite.
float ExpShiftSum(float* x, int64_t n, float shift);

// o[h, :] += sum over p = 0, 1, ... (in that order) of w[h * w_stride + p] * v[p, :], h < n_heads.
//   w: [n_heads, w_stride] f32 weights (the first v.rows of each row are read);
//   v: [rows, head_dim] stored rows; o: [n_heads, head_dim] f32.
void AccumulateWeightedRows(const float* w, int64_t w_stride, int n_heads, const RowsRef& v,
                            float* o, const RowsRef& along = {});

// The signatures of AttentionScores and AccumulateWeightedRows, which every kernel of the table
// (kernel_table.h) has, with the same contract for the rows its table row takes.
using ScoresKernelFn = void(const float* q, int n_heads, const RowsRef& k, float scale,
                            float* scores, const RowsRef& along);
using WeightedKernelFn = void(const float* w, int64_t w_stride, int n_heads, const RowsRef& v,
                              float* o, const RowsRef& along);

// Which kernels read rows like `m` on this CPU, for benchmarks and logs: e.g. "int8 dot (AVX-512
// VNNI)", "bf16 dot (AVX-512 BF16)", "f32 FMA (AVX3)".
std::string AttentionKernelName(const RowsRef& m);

// Prefetches the cache lines of the first min(n, m.rows) rows of `m` (a hint; never faults).
void PrefetchRows(const RowsRef& m, int64_t n);
// Rows ahead of the current one that AttentionScores / AccumulateWeightedRows prefetch.
constexpr int64_t kChunkPrefetchRows = 16;

}  // namespace wc
