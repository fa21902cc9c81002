#include "kernels/gemm/bf16/gemm_amx.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "kernels/cpu_kernels.h"
#include "kernels/gemm/bf16/amx_tiles.h"
#include "util/error.h"

// GCC 12 reports the "undefined" source operand inside its own AVX-512 intrinsics
// (_mm512_undefined_*) wherever they inline into the functions below.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace wc {
namespace {

using amx::kBlockCols;
using amx::kPanelBlockBytes;
using amx::kPanelPairBytes;
using amx::kPanelRows;
using amx::kTileTokens;
using amx::LoadTileConfig;
using amx::WriteY;
constexpr int kTileElems = kTileTokens * kBlockCols;  // bf16 in one A tile (1 KiB)
static_assert(kTileTokens == AmxGemmInput::kTileTokens && kBlockCols == AmxGemmInput::kBlockCols,
              "the A tiles are the input's");

// The schedule (RunRange): one call of the microkernel (UnitPanel) is a unit of two token tiles
// (32 tokens; one tile for an odd last one) by one panel over a chunk of kChunkBlocks k blocks.
// Tokens are taken kBlockUnits units at a time; for those, panels in groups of kGroupPanels, and
// each group's k in chunks: the chunk of the group's panels (8 x 8 x 2 KiB = 128 KiB) stays in L2
// for every unit, and a unit's chunk of A tiles (2 x 8 KiB) stays in L1 for the group's panels.
// Between chunks the C tiles wait in a scratch [units][kGroupPanels][32 tokens][32 rows] f32 (at
// most 512 KiB, in L2): an exact copy, so splitting k changes no bit. Measured on one Sapphire
// Rapids core (512 x 4544 by 4544 x 4544): groups of 8 panels beat 4 and 2, chunks of 8 blocks beat
// 16 and 32 (whose A chunk no longer stays in L1), and software prefetch of the next chunk gained
// nothing measurable. The spills are the main cost: a bare loop of these loads and TDPBF16PS runs
// ~3.0 TFLOP/s with A in L1 and B in L2, ~1.9 with C stored and reloaded every 8 blocks (no tile
// register renaming: the store waits for the last TDPBF16PS), and this schedule ~1.6 on data that
// fits L2, 0.8-1.2 on the prefill shape (all on a 2-core VM with other work beside it).
constexpr int kUnitTiles = 2;
constexpr int kBlockUnits = 16;
constexpr int kGroupPanels = 8;
constexpr int kChunkBlocks = 8;
constexpr int kUnitFloats = kUnitTiles * kTileTokens * kPanelRows;  // one unit's C: [32][32]

// The C tiles of MA token tiles by one panel (the tiles as amx_tiles.h assigns them), over nb k
// blocks: from zero (first) or from c, then stored to c. a: the first token tile's A tile at the
// chunk's first block (the second tile is a_tile_stride elements on); w: the panel at the chunk's
// first block; c: [16 MA tokens][32 rows] f32, rows 128 bytes apart.
template <int MA>
WC_AMX __attribute__((noinline)) void UnitPanel(const uint16_t* a, int64_t a_tile_stride,
                                                const uint8_t* w, int64_t nb, bool first,
                                                float* c) {
  constexpr int kCStride = kPanelRows * 4;
  float* c1 = c + kTileTokens * kPanelRows;  // the second token tile's rows
  if (first) {
    _tile_zero(0);
    _tile_zero(1);
    if (MA == 2) {
      _tile_zero(2);
      _tile_zero(3);
    }
  } else {
    WC_TILE_LOAD(0, c, kCStride);
    WC_TILE_LOAD(1, c + 16, kCStride);
    if (MA == 2) {
      WC_TILE_LOAD(2, c1, kCStride);
      WC_TILE_LOAD(3, c1 + 16, kCStride);
    }
  }
  const uint16_t* a1 = a + a_tile_stride;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb = w + b * kPanelBlockBytes;
    WC_TILE_LOAD(4, a + b * kTileElems, kBlockCols * 2);
    WC_TILE_LOAD(6, wb, kPanelPairBytes);
    WC_TILE_LOAD(7, wb + 64, kPanelPairBytes);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if (MA == 2) {
      WC_TILE_LOAD(5, a1 + b * kTileElems, kBlockCols * 2);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, c, kCStride);
  _tile_stored(1, c + 16, kCStride);
  if (MA == 2) {
    _tile_stored(2, c1, kCStride);
    _tile_stored(3, c1 + 16, kCStride);
  }
}

// 16 floats to bf16 bits as the contract's xb: round to nearest even, an f32 subnormal zero of its
// sign, a NaN quiet (util/bf16.h's F32ToBF16 otherwise).
WC_AMX inline __m256i ActivationBf16x16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i hi = _mm512_srli_epi32(u, 16);
  const __mmask16 tiny = _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7f800000));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  const __m512i odd = _mm512_and_si512(hi, _mm512_set1_epi32(1));
  __m512i r =
      _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd)), 16);
  r = _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(0x40));
  r = _mm512_mask_and_epi32(r, tiny, hi, _mm512_set1_epi32(0x8000));
  return _mm512_cvtepi32_epi16(r);
}

// Token tile i: rows tokens of x (rows <= 16; the rest of the tile zero) into dst, [k_blocks][16]
// [32] bf16.
WC_AMX void PackTile(const float* x, int64_t x_stride, int rows, int64_t cols, int64_t k_blocks,
                     uint16_t* dst) {
  for (int64_t b = 0; b < k_blocks; ++b) {
    const int64_t k0 = b * kBlockCols;
    const int64_t left = cols - k0;
    const __mmask16 m0 = left >= 16 ? 0xffff : left <= 0 ? 0 : (1u << left) - 1;
    const __mmask16 m1 = left >= 32 ? 0xffff : left <= 16 ? 0 : (1u << (left - 16)) - 1;
    uint16_t* tile = dst + b * kTileElems;
    for (int t = 0; t < kTileTokens; ++t) {
      __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
      if (t < rows) {
        const float* xt = x + t * x_stride + k0;
        lo = ActivationBf16x16(_mm512_maskz_loadu_ps(m0, xt));
        hi = ActivationBf16x16(_mm512_maskz_loadu_ps(m1, xt + 16));
      }
      _mm512_store_si512(tile + t * kBlockCols,
                         _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
    }
  }
}

WC_AMX void RunRange(const AmxGemmInput& x, const gemm::Task& task, int64_t pa, int64_t pb) {
  const int64_t n = x.n_tokens, kb = x.k_blocks(), tiles = x.token_tiles;
  const int64_t units = (tiles + kUnitTiles - 1) / kUnitTiles;
  const int64_t tile_stride = kb * kTileElems;  // elements from one token tile to the next
  const int64_t block_units = std::min<int64_t>(units, kBlockUnits);
  // [block_units][kGroupPanels][32 tokens][32 rows]
  float* scratch = static_cast<float*>(gemm::ThreadBuffer<gemm::kAmxScratchSlot>(
      static_cast<size_t>(block_units * kGroupPanels * kUnitFloats) * sizeof(float)));
  LoadTileConfig();
  for (int64_t u0 = 0; u0 < units; u0 += kBlockUnits) {
    const int64_t u1 = std::min(units, u0 + kBlockUnits);
    for (int64_t p = pa; p < pb; p += kGroupPanels) {
      const int64_t pe = std::min(pb, p + kGroupPanels);
      for (int64_t b0 = 0; b0 < kb; b0 += kChunkBlocks) {
        const int64_t nb = std::min<int64_t>(kChunkBlocks, kb - b0);
        const bool first = b0 == 0, last = b0 + nb == kb;
        for (int64_t u = u0; u < u1; ++u) {
          const bool pair = kUnitTiles * u + 1 < tiles;
          const uint16_t* a = x.Tile(kUnitTiles * u, b0);
          const int64_t t0 = u * kUnitTiles * kTileTokens;
          for (int64_t q = p; q < pe; ++q) {
            float* c = scratch + ((u - u0) * kGroupPanels + (q - p)) * kUnitFloats;
            const uint8_t* w = task.w + q * task.panel_bytes + b0 * kPanelBlockBytes;
            if (pair) {
              UnitPanel<2>(a, tile_stride, w, nb, first, c);
            } else {
              UnitPanel<1>(a, tile_stride, w, nb, first, c);
            }
            if (last) WriteY(task, c, t0, std::min(n, t0 + kUnitTiles * kTileTokens), q);
          }
        }
      }
    }
  }
  _tile_release();
}

}  // namespace

bool AmxBf16GemmAvailable() {
  return KernelsOn(CpuKernels::kAmxBf16Gemm);
}

AmxGemmInput PackAmxGemmInput(const float* x, int64_t n_tokens, int64_t x_stride, int64_t cols,
                              int64_t padded_cols) {
  WC_CHECK(n_tokens >= 0 && cols >= 0 && cols <= padded_cols && padded_cols % kBlockCols == 0 &&
               (n_tokens <= 1 || x_stride >= cols),
           "bad AMX gemm input shape");
  AmxGemmInput in;
  in.n_tokens = n_tokens;
  in.padded_cols = padded_cols;
  in.token_tiles = (n_tokens + kTileTokens - 1) / kTileTokens;
  const int64_t kb = in.k_blocks();
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(1, in.token_tiles * kb)) * 2 *
                       kTileElems;  // a multiple of 64, as aligned_alloc needs
  in.data.reset(static_cast<uint16_t*>(std::aligned_alloc(64, bytes)));
  if (in.data == nullptr) throw std::bad_alloc();
  const int64_t tiles = in.token_tiles;
  const bool parallel = !omp_in_parallel() && tiles > 1 && n_tokens * cols >= (1 << 16);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t i = 0; i < tiles; ++i) {
    const int rows = static_cast<int>(std::min<int64_t>(kTileTokens, n_tokens - i * kTileTokens));
    PackTile(x + i * kTileTokens * x_stride, x_stride, rows, cols, kb,
             in.data.get() + i * kb * kTileElems);
  }
  return in;
}

void GemmAmxRange(const AmxGemmInput& x, const gemm::Task& task, int64_t pa, int64_t pb) {
  WC_CHECK(x.padded_cols == 2 * task.k_steps && x.n_tokens == task.n_tokens,
           "AMX gemm input packed for another matrix");
  if (pa >= pb || x.n_tokens == 0) return;
  // The bias added under FTZ, as the pairs kernel adds it (gemm.h: every result flushed).
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(csr | amx::kMxcsrFtz);
  if (x.k_blocks() == 0) {  // no columns: y = bias (or zero)
    for (int64_t q = pa; q < pb; ++q) WriteY(task, nullptr, 0, x.n_tokens, q);
  } else {
    RunRange(x, task, pa, pb);
  }
  _mm_setcsr(csr);
}

}  // namespace wc
