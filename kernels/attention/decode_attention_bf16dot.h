// The fp8 and BFP8 kernels on AVX-512 BF16 (vdpbf16ps: 32 bf16 products per instruction against
// 16 for an f32 FMA), chosen at run time: the fast paths of AttentionScores and
// AccumulateWeightedRows (decode_attention.h) for fp8-e4m3 / fp8-e5m2 / bfp8 K and V rows.
//
// Every fp8 value is exactly a bf16 (both formats' exponents and mantissas fit), and so is every
// BFP8_B value (a 7-bit magnitude times a power of two) within bf16's normal range, so the codes
// are widened by table lookup (vpermi2b, AVX-512 VBMI; BFP8's shared exponent then added to the
// exponent field) with no rounding. BFP8 values below 2^-126 (shared exponents under 7) read as
// 0, as vdpbf16ps reads every subnormal. The other operand is rounded to bf16 (nearest even), as
// GPU flash attention does: the query for Q.K^T, and each P.V weight times its row's scale.
// Products are exact in f32 and summed in f32 in a fixed order, so a chunk's result is a pure
// function of the chunk; it differs from the f32 kernels (the fallback on CPUs without these
// instructions) by the bf16 rounding of that operand (relative 2^-9).
//
// With kAvx512SharedBlockHeads or more query heads per KV group (kernel_table.h), Q.K^T holds each
// block of 16 rows transposed (rows in lanes, widened once for all heads) and P.V widens V once
// per 64 rows for all heads.
#pragma once

#include <cstdint>

#include "kernels/attention/decode_attention.h"
#include "kernels/attention/kv_rows.h"
#include "kernels/cpu_kernels.h"

namespace wc {

// True when the kernel table (kernel_table.h) runs these kernels for `m` on this CPU: fp8 or BFP8
// rows, cols % 64 == 0, AVX-512 BF16 and VBMI present and enabled.
bool Bf16DotUsable(const RowsRef& m);

// The table's kernels, as AttentionScores / AccumulateWeightedRows for the rows Bf16DotUsable
// takes:
//   ScoresRowsInLanes: each block of 16 rows widened and transposed once for all heads.
//   ScoresGroups: groups of up to 4 heads widening in registers.
//   WeightedShared: V widened once per 64 rows for all heads.
//   WeightedGroups: groups of up to 4 heads widening in registers.
ScoresKernelFn Bf16DotScoresRowsInLanes, Bf16DotScoresGroups;
WeightedKernelFn Bf16DotWeightedShared, Bf16DotWeightedGroups;

// Tests switch these kernels with SetBf16DotKernels and ask CpuHasBf16DotKernels (cpu_kernels.h).

}  // namespace wc
