// Internal to gemm_bfp.cpp and gemm_bfp_bf16dot.cpp: one GemmBfp call as the kernels see it, and
// the block-float tiles on AVX-512 BF16 + VBMI (vpermi2b / vpermw widening, vdpbf16ps).
#pragma once

#include <cstdint>

#include "kernels/gemm_schedule.h"

namespace wc {
namespace gemm {

// task.w: BfpPanels::data(), panel p at w + p * task.panel_bytes; task.k_steps = k tiles.
struct BfpTask {
  Task base;
  int magnitude_bits = 7;          // B: 7 (bfp8) or 3 (bfp4)
  const uint8_t* plain = nullptr;  // [panels] BfpPanels::PanelIsPlain
  // k pairs of the last k tile the chains run (1..16): kBF16 stops at the BF16 GEMM's padded_cols
  // (cols rounded up to even), so no padding pair follows a flushed -0; 16 for kF32.
  int64_t last_pairs = 16;
  int64_t last_cols = 32;  // columns of the last k tile (1..32)
};

}  // namespace gemm

// The tallest token tile of the AVX-512 kernel for B magnitude bits (its input's tile height).
int BfpDotTileTokens(int magnitude_bits);

// Panels [pa, pb) of `task` with bf16 activations packed as PackBf16PairsRow's pairs
// ([K32 / 2][MR] in tiles of BfpDotTileTokens(B)). Runs where KernelsOn(kAvx512Bf16Gemm) and
// CpuHas(kAvx512Bf16Vbmi) (cpu_kernels.h).
void GemmBfpDotRange(const gemm::BfpTask& task, int64_t pa, int64_t pb);

// One panel (BfpPanels' layout, k_tiles tiles from `panel`) widened to exactly the BF16 GEMM's
// packed panel of its decoded values (packed_matrix.h: [K32 / 2][32] pairs, bf16(k + 1) << 16 |
// bf16(k) per row; subnormals zero of their sign), the same operands the tiles above widen in
// registers. plain: BfpPanels::PanelIsPlain. out: [K32 / 2][32] uint32, 64-byte aligned. Same
// CPU requirement as GemmBfpDotRange.
void WidenBfpPanelBf16(const uint8_t* panel, int64_t k_tiles, int magnitude_bits, bool plain,
                       uint32_t* out);

}  // namespace wc
