// Internal to the block-float GEMM (gemm_bfp.cpp): its row-group tiles, which run every call of
// the pairs path (bf16 activations) below BfpWidenOnceTokens on x86's targets of 16 vector
// registers (AVX2, SSE4) and the portable ones (emulated 128-bit, scalar); the AVX-512 targets keep
// gemm_bfp.cpp's panel tiles and the one-token AVX-512F tile, as do other architectures' (whose
// vectors may be longer than a half panel's 16 rows). One token on a plain panel, on the AVX2
// target, takes the AVX2 one-token tile instead (gemm_bfp_one_token.h).
//
// A row-group tile is MR <= kBfpRowGroupMaxTokens tokens by one panel, its 32 rows taken 16 at a
// time (one half: one block exponent per k). Per k tile and half it runs the 16 even k's chains
// from zero, keeps them, runs the 16 odd k's chains from zero, then adds out += even + odd: the
// BF16 GEMM's order (gemm_bfp.h's contract), with one chain set in registers at a time (MR x 2
// accumulators, not twice that), so each code is widened once for all MR tokens while the panel
// streams from memory. Measured on AMD EPYC Zen 3 (AVX2, 2 threads, 2026-11-28): bfp8 4544 x 18176
// at 4 tokens 6.9 ms against 13.7 for gemm_bfp.cpp's 2-token pairs tiles, at 1 token 5.8 ms
// (the read bound) against 6.7 for its one-token tile.
#pragma once

#include <cstdint>

#include "kernels/gemm/gemm_schedule.h"

namespace wc {

// Inside a Highway target's code: 1 where that target runs the row-group tiles, else 0.
#define WC_BFP_ROW_GROUP_TARGET \
  ((HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3) || HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SCALAR)

// The tallest row-group tile: MR x 2 accumulators, 2 widened code vectors, a broadcast activation
// and the block's base in 16 registers.
constexpr int kBfpRowGroupMaxTokens = 6;

// True when this CPU's dispatched target (under the SIMD limit) runs the pairs path's tiles as
// row groups.
bool BfpRowGroupsOn();

// Panels [pa, pb) of `task` (the pairs path: task.base.xp packed in token tiles of at most
// kBfpRowGroupMaxTokens) on the row-group tiles, under FTZ, results written as gemm::RunPanels
// writes them.
void BfpRowGroupsRange(const gemm::BfpTask& task, int64_t pa, int64_t pb);

}  // namespace wc
