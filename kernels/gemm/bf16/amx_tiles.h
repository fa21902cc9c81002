// Internal to the GEMMs on AMX tiles (gemm_amx.cpp: BF16 panels; gemm_bfp_amx.cpp: block-float
// ones widened a k tile at a time): the instruction-set attribute, tile loads the compiler sees
// reading memory, the one tile configuration both use, and the write of a panel's C rows to y.
// Nothing here may run unless AmxBf16GemmAvailable() (gemm_amx.h).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/gemm/gemm_schedule.h"

// Every function that runs a tile or AVX-512 instruction: compiled for them whatever the build's
// -march, run only where AmxBf16GemmAvailable().
#define WC_AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512dq,avx512vl")))

// Tile loads and the configuration load as asm that tells the compiler what memory it reads (GCC
// 12's _tile_loadd names no memory at all, and _tile_loadconfig only 8 bytes of the 64).
#define WC_TILE_LOAD(tmm, base, stride)                                          \
  __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #tmm ::"r"((const void*)(base)), \
                   "r"((long)(stride))                                           \
                   : "memory")

namespace wc {
namespace amx {

constexpr unsigned kMxcsrFtz = 0x8000u;  // MXCSR.FTZ: the BF16 GEMM flushes every result
constexpr int kTileTokens = 16;          // A tile rows, C tile rows
constexpr int kBlockCols = 32;           // k per TDPBF16PS
constexpr int kPanelRows = gemm::kPanelRows;
// One 32-k block of a BF16 panel: 16 k pairs x 32 rows x 2 bf16. Its B tiles (16 k pairs x 16
// rows x 2) start at byte 0 (rows 0-15) and 64 (rows 16-31), rows kPanelPairBytes apart.
constexpr int kPanelPairBytes = kPanelRows * 2 * 2;
constexpr int64_t kPanelBlockBytes = 16 * kPanelPairBytes;

// Palette 1, every tile 16 rows x 64 bytes. Both GEMMs assign them the same way:
//   tmm0 tmm1  C of the first token tile: rows 0-15, rows 16-31 of the panel ([16][16] f32)
//   tmm2 tmm3  C of the second token tile
//   tmm4 tmm5  A of the first, second token tile ([16 tokens][32 k] bf16)
//   tmm6 tmm7  B of panel rows 0-15, 16-31 ([16 k pairs][16 rows][2] bf16)
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64, "ldtilecfg reads 64 bytes");

// rows0: the rows (tokens) of the first token tile's A and C tiles, rows1 the second's (1-16);
// B tiles always hold 16 k pairs. A TDPBF16PS costs in proportion to its rows.
WC_AMX inline void LoadTileConfig(int rows0 = kTileTokens, int rows1 = kTileTokens) {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = kTileTokens;
  }
  cfg.rows[0] = cfg.rows[1] = cfg.rows[4] = static_cast<uint8_t>(rows0);
  cfg.rows[2] = cfg.rows[3] = cfg.rows[5] = static_cast<uint8_t>(rows1);
  __asm__ volatile("ldtilecfg %0" ::"m"(cfg));
}

// y rows of panel q for tokens [t0, t1) from c ([t1 - t0][32] f32, or null for zeros), plus bias:
// one f32 add per element, masked to the task's row range. Callers run it under MXCSR.FTZ (the
// BF16 GEMM's bias add, gemm_amx.h).
WC_AMX inline void WriteY(const gemm::Task& task, const float* c, int64_t t0, int64_t t1,
                          int64_t q) {
  const int64_t r0 = q * kPanelRows;
  __mmask16 mask[2];
  for (int h = 0; h < 2; ++h) {
    const int64_t lo = std::max<int64_t>(0, task.row_begin - (r0 + 16 * h));
    const int64_t hi = std::min<int64_t>(16, task.row_end - (r0 + 16 * h));
    mask[h] = hi <= lo ? 0 : static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1));
  }
  for (int64_t t = t0; t < t1; ++t) {
    float* yt = task.y + t * task.y_stride - task.row_begin + r0;
    for (int h = 0; h < 2; ++h) {
      if (mask[h] == 0) continue;
      __m512 v = c != nullptr ? _mm512_maskz_loadu_ps(mask[h], c + (t - t0) * kPanelRows + 16 * h)
                              : _mm512_setzero_ps();
      if (task.bias != nullptr)
        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask[h], task.bias + r0 + 16 * h));
      _mm512_mask_storeu_ps(yt + 16 * h, mask[h], v);
    }
  }
}

}  // namespace amx
}  // namespace wc
