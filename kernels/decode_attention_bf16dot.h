// The fp8 kernels on AVX-512 BF16 (vdpbf16ps: 32 bf16 products per instruction against 16 for an
// f32 FMA), chosen at run time: the fast paths of AttentionScores and AccumulateWeightedRows
// (decode_attention.h) for fp8-e4m3 / fp8-e5m2 K and V rows.
//
// Every fp8 value is exactly a bf16 (both formats' exponents and mantissas fit), so the codes are
// widened by table lookup (vpermi2b, AVX-512 VBMI) with no rounding. The other operand is rounded
// to bf16 (nearest even), as GPU flash attention does: the query for Q.K^T, and each P.V weight
// times its row's scale. Products are exact in f32 and summed in f32 in a fixed order, so a
// chunk's result is a pure function of the chunk; it differs from the f32 kernels (the fallback on
// CPUs without these instructions) by the bf16 rounding of that operand (relative 2^-9).
#pragma once

#include <cstdint>

#include "kernels/kv_rows.h"

namespace wc {

// True when this CPU has AVX-512 BF16 and VBMI, the kernels are enabled and take `m` (fp8 rows,
// cols % 64 == 0).
bool Bf16DotUsable(const RowsRef& m);

// As AttentionScores / AccumulateWeightedRows for fp8 rows (Bf16DotUsable).
void Fp8ScoresBf16Dot(const float* q, int n_heads, const RowsRef& k, float scale, float* scores,
                      const RowsRef& along);
void Fp8WeightedBf16Dot(const float* w, int64_t w_stride, int n_heads, const RowsRef& v, float* o,
                        const RowsRef& along);

// Tests turn these kernels off (and on) to compare them with the f32 ones; whether this CPU runs
// them at all.
void SetBf16DotKernels(bool enabled);
bool CpuHasBf16DotKernels();

}  // namespace wc
