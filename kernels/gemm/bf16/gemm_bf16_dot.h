// The BF16 GEMM on AVX-512 BF16 dot products (vdpbf16ps), in AMX's order: PackedMatrix's BF16
// panels times activations rounded to bf16, with the bits of gemm_amx.h's contract (the order the
// pairs kernel and AMX follow), for CPUs with AVX-512 BF16 and no AMX, where vdpbf16ps does 32
// products at the FMA's issue rate: twice the f32 FMA tiles' products a cycle.
//
// Why it gives AMX's bits. vdpbf16ps adds a 32-bit lane's two bf16 products to its accumulator
// one after the other, the odd element's first, each rounded once and flushed as x86 flushes (its
// inputs DAZ, its results FTZ, whatever MXCSR says) - two steps of an FMA chain
// (tools/experiments/amx_vs_dp.cpp compares them with AMX over five value distributions). The
// contract's chains run over even k and odd k separately, so a slot is filled with two consecutive
// steps of one chain: elements (k + 2, k) of one parity. The weights are the panels as stored, (k,
// k + 1) pairs, and two of them are re-paired in registers (two shifts, two blends per two vectors,
// shared by the tile's tokens); the activations are packed in the new pairing once per call
// (PackBf16DotTile).
#pragma once

#include <cstdint>

#include "kernels/gemm/gemm_schedule.h"

namespace wc {

// True when this CPU runs vdpbf16ps and 512-bit permutes (cpu_kernels.h's kAvx512Bf16Vbmi within
// WORMCHAT_SIMD) and tests have not switched the family off. No other function here may run when
// it is false.
bool Bf16DotGemmAvailable();

// Tokens a tile holds: 6 tokens by one panel's 32 rows take 24 of the 32 vector registers as
// accumulators (an even and an odd chain each); fewer tokens take 2 or 4 panels.
constexpr int kBf16DotTileTokens = 6;

// Packs one tile of mr tokens (x: [mr, x_stride] f32, cols valid) into dst, floats' room for
// mr * padded_cols / 2: [padded_cols / 4][mr][2] 32-bit slots, slot 0 = (bf16(x[4 q + 2]) low,
// bf16(x[4 q]) high), slot 1 = (bf16(x[4 q + 3]), bf16(x[4 q + 1])), each rounded as the contract
// rounds an activation (nearest even, an f32 subnormal zero of its sign), zero past cols.
void PackBf16DotTile(const float* x, int64_t x_stride, int64_t cols, int64_t padded_cols, int mr,
                     float* dst);

// Panels [pa, pb) of `task` (gemm_schedule.h: xp packed tile by tile by PackBf16DotTile with
// tile_tokens <= kBf16DotTileTokens, floats_per_token = padded_cols / 2, k_steps = padded_cols /
// 2) on the calling thread, MXCSR.FTZ set for the call and restored. Needs
// Bf16DotGemmAvailable().
void GemmBf16DotRange(const gemm::Task& task, int64_t pa, int64_t pb);

}  // namespace wc
