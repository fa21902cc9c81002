// Internal to gemm.cpp: the GEMM microkernels on AVX-512 BF16 (vdpbf16ps), for BF16 matrices packed
// with bf16 activations. Same tiles, schedule and results as the portable pairs kernel (gemm.h).
#pragma once

#include <cstdint>

#include "kernels/gemm_schedule.h"

namespace wc {

// True when this CPU has AVX-512 F/BW/BF16.
bool GemmBf16DotAvailable();

// Panels [pa, pb) of `task`, whose input is packed as bf16 pairs ([cols / 2][MR], one pair per
// float's bits) in tiles of gemm::kMaxTileTokens.
void GemmBf16DotRange(const gemm::Task& task, int64_t pa, int64_t pb);

}  // namespace wc
