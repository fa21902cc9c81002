// The BF16 GEMM on AMX tiles (TDPBF16PS): PackedMatrix's BF16 panels (packed_matrix.h) times
// activations rounded to bf16, for prefill-sized token counts. The weight panels are used as
// stored: a panel's k-pair row (128 bytes: 32 rows x one bf16 pair) is two B-tile rows in AMX's
// pair-interleaved (VNNI) layout, rows 0-15 then rows 16-31.
//
// The defined order (the BF16 GEMM's, bit for bit), per output element y[t, r]:
//   xb[k] = bf16(x[t, k]) rounded to nearest even, an f32 subnormal zero of its sign; W[r, k] as
//   packed (bf16, subnormals already zero); both zero past cols, up to padded_cols (a multiple of
//   32). c = +0; for each block of 32 k in increasing order:
//     e = o = +0; for j = 0..15: e = ftz(fma(xb[2j], W[2j], e)); o = ftz(fma(xb[2j+1], W[2j+1], o))
//     (k relative to the block), then c = ftz(c + ftz(e + o)).
//   y[t, r] = c, or ftz(c + bias[r]) (one f32 add, flushed as the pairs kernel flushes it; until
//   2026-11-28 it was added under the caller's MXCSR, so a subnormal sum differed from 3 tokens to
//   4 when the caller had FTZ off).
// ftz(v): zero of v's sign when v is tiny as x86 detects it (MXCSR.FTZ, and AMX the same): after
// rounding to 24 bits with unbounded exponent, |v| < 2^-126. This differs from flushing an IEEE
// (gradual underflow) result only when an exact fma lands in [2^-126 - 2^-150, 2^-126 - 2^-151):
// IEEE rounds it up to 2^-126, x86 flushes it (tests/kernels/gemm_amx_test.cpp has the cases).
// This is one TDPBF16PS per 32-k block accumulating into a C tile that starts zeroed
// (tools/experiments/amx_vs_dp.cpp). Every element is its own chain: the result does not depend on
// the token count, the row range or how panels are split between calls or threads.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "kernels/gemm/gemm_schedule.h"

namespace wc {

// True when this CPU and OS run AMX-BF16 for this process (cpu_kernels.h's kAmxBf16Gemm: the CPU
// flags, XCR0's tile state, the arch_prctl tile data grant, WORMCHAT_SIMD allowing AVX-512) and
// tests have not switched the family off. No other function here may run when it is false.
bool AmxBf16GemmAvailable();

// Activations in the A-tile layout: tiles of 16 tokens, each k block of a tile one 1 KiB A tile.
struct AmxGemmInput {
  static constexpr int kTileTokens = 16;
  static constexpr int kBlockCols = 32;  // k per block: one TDPBF16PS
  int64_t n_tokens = 0, padded_cols = 0;
  int64_t token_tiles = 0;  // ceil(n_tokens / 16)
  // [token_tiles][padded_cols / 32][16 tokens][32 k] bf16 bits, 64-byte aligned; tokens past
  // n_tokens and k past cols are zero.
  std::unique_ptr<uint16_t[], decltype(&std::free)> data{nullptr, &std::free};

  int64_t k_blocks() const { return padded_cols / kBlockCols; }
  // The A tile of token tile i, k block b: [16][32] bf16, rows 64 bytes apart.
  const uint16_t* Tile(int64_t i, int64_t b) const {
    return data.get() + (i * k_blocks() + b) * kTileTokens * kBlockCols;
  }
};

// x: [n_tokens, x_stride] f32 with cols <= x_stride valid columns; padded_cols: the weights'
// (a multiple of 32, >= cols). Packs in parallel over token tiles for a large input (outside an
// OpenMP parallel region). Needs AmxBf16GemmAvailable() (it runs AVX-512).
AmxGemmInput PackAmxGemmInput(const float* x, int64_t n_tokens, int64_t x_stride, int64_t cols,
                              int64_t padded_cols);

// Panels [pa, pb) of `task` (w, panel_bytes, k_steps = padded_cols / 2, bias, y, y_stride,
// row_begin, row_end, n_tokens as gemm_schedule.h; xp, floats_per_token and tile_tokens unused)
// times x, on the calling thread: y[t * y_stride + r - row_begin] for t < n_tokens and r in
// [row_begin, row_end) inside those panels; nothing else of y is written. Loads its own tile
// configuration and releases the tiles before returning, so each OpenMP thread of
// gemm::ForThreadPanels may call it with its own panels. Needs AmxBf16GemmAvailable(),
// x.padded_cols == 2 * task.k_steps and x.n_tokens == task.n_tokens.
void GemmAmxRange(const AmxGemmInput& x, const gemm::Task& task, int64_t pa, int64_t pb);

}  // namespace wc
