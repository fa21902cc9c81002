// Internal to gemm.cpp: the GEMM microkernels on AVX-512 BF16 (vdpbf16ps), for BF16 matrices packed
// with bf16 activations. Same tiles, schedule and results as the portable pairs kernel (gemm.h).
#pragma once

#include <cstdint>

#include "kernels/gemm_schedule.h"

namespace wc {

// gemm.cpp runs these where KernelsOn(CpuKernels::kAvx512Bf16Gemm) (cpu_kernels.h).

// Token row x[0:cols] of a tile mr tokens high, as bf16 pairs into the tile's slot t: dst[kp * mr
// + t] = bits of (bf16(x[2kp + 1]) << 16 | bf16(x[2kp])) for kp < padded_cols / 2, zero past cols.
// bf16(v): round to nearest even; an f32 subnormal is zero of its sign (vcvtne2ps2bf16's DAZ).
void PackBf16PairsRow(const float* x, int64_t cols, int64_t padded_cols, int mr, int t, float* dst);

// Panels [pa, pb) of `task`, whose input is packed as bf16 pairs ([cols / 2][MR], one pair per
// float's bits) in tiles of gemm::kMaxTileTokens.
void GemmBf16DotRange(const gemm::Task& task, int64_t pa, int64_t pb);

}  // namespace wc
