#include "kernels/gemm/bfp/gemm_bfp_amx.h"

#include <immintrin.h>

#include "kernels/gemm/bf16/amx_tiles.h"
#include "kernels/gemm/bf16/gemm_amx.h"
#include "kernels/gemm/gemm_schedule.h"
#include "util/error.h"

// GCC 12 reports the "undefined" source operand inside its own AVX-512 intrinsics
// (_mm512_undefined_*) wherever they inline into the functions below.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace wc {
namespace bfp_amx {  // named: the core compiles as unity files (CMakeLists.txt)
namespace {

using amx::kPanelPairBytes;
using amx::kPanelRows;
using amx::kTileTokens;

constexpr int kBfp8TileBytes = 1088, kBfp4TileBytes = 576;  // gemm_bfp.h's tiles
// One widened k tile: [16 k pairs][32 rows][2] bf16, a BF16 panel's 32-k block (amx_tiles.h).
constexpr int kWidenedBytes = static_cast<int>(amx::kPanelBlockBytes);
using amx::kMxcsrFtz;

// The units 2^(E - 127 - (B - 1)) of a tile's 64 exponent bytes, in their order (byte 4 kp + 2 h
// + b: k = 2 kp + b, rows 16 h ..): a normal, or for E < B a float32 subnormal (bfp_widen-inl.h's
// BlockUnit). e: [64] bytes; unit: [64] f32.
template <int B>
WC_AMX inline void TileUnits(const uint8_t* e, float* unit) {
  for (int i = 0; i < 64; i += 16) {
    const __m512i field = _mm512_sub_epi32(
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(e + i))),
        _mm512_set1_epi32(B - 1));
    const __m512i normal = _mm512_slli_epi32(field, 23);
    // field >= -(B - 1), so the shift is 16..22 (capped where the lane is a normal's).
    const __m512i tiny = _mm512_sllv_epi32(
        _mm512_set1_epi32(1),
        _mm512_min_epi32(_mm512_add_epi32(field, _mm512_set1_epi32(22)), _mm512_set1_epi32(22)));
    const __mmask16 is_normal = _mm512_cmpgt_epi32_mask(field, _mm512_setzero_si512());
    _mm512_store_ps(unit + i,
                    _mm512_castsi512_ps(_mm512_mask_blend_epi32(is_normal, tiny, normal)));
  }
}

// The bf16 pairs of 16 rows from their f32 values at k (even) and k + 1, stored to out: word 2 n
// the top half of even[n], word 2 n + 1 that of odd[n] (exact: every widened value is a bf16).
// A shift and a bit select (one vpermt2w widened 6-10% slower in cache: Intel Xeon VM with AMX,
// 2026-11-28).
WC_AMX inline void StorePairs(__m512 even, __m512 odd, uint8_t* out) {
  _mm512_store_si512(out,
                     _mm512_ternarylogic_epi32(_mm512_set1_epi32(static_cast<int>(0xffff0000u)),
                                               _mm512_castps_si512(odd),
                                               _mm512_srli_epi32(_mm512_castps_si512(even), 16),
                                               0xca));  // a ? b : c, bit by bit
}

// bfp8: row k of the tile at 64 + 32 k, 32 two's-complement int8 codes (rows 0-31).
WC_AMX inline __m512 Widen8(const uint8_t* codes, float unit) {
  const __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
  return _mm512_mul_ps(_mm512_cvtepi32_ps(q), _mm512_set1_ps(unit));
}

// One bfp8 k tile widened into `out` ([16 k pairs][32 rows][2] bf16), under FTZ.
WC_AMX inline void WidenTile8(const uint8_t* tile, uint8_t* out) {
  alignas(64) float unit[64];
  TileUnits<7>(tile, unit);
  const uint8_t* codes = tile + 64;
  for (int kp = 0; kp < 16; ++kp) {
    const uint8_t* even = codes + 64 * kp;  // row 2 kp; row 2 kp + 1 follows it
    for (int h = 0; h < 2; ++h) {
      StorePairs(Widen8(even + 16 * h, unit[4 * kp + 2 * h]),
                 Widen8(even + 32 + 16 * h, unit[4 * kp + 2 * h + 1]),
                 out + kp * kPanelPairBytes + 64 * h);
    }
  }
}

// bfp4: chunk 2 g + h at 64 + 64 (2 g + h), 16 lanes (rows 16 h + i), the code of k = 8 g + 2 j + b
// at bit 4 j + 16 b. Its value looked up by its nibble (vpermps reads an index's low 4 bits).
WC_AMX inline __m512 Widen4(__m512i lanes, __m512 nibble_values, float unit) {
  return _mm512_mul_ps(_mm512_permutexvar_ps(lanes, nibble_values), _mm512_set1_ps(unit));
}

// One bfp4 k tile widened into `out` as WidenTile8, any exponents.
WC_AMX inline void WidenTile4(const uint8_t* tile, uint8_t* out) {
  const __m512 nibble_values =
      _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1);
  alignas(64) float unit[64];
  TileUnits<3>(tile, unit);
  for (int g = 0; g < 4; ++g) {
    for (int h = 0; h < 2; ++h) {
      const __m512i lanes = _mm512_loadu_si512(tile + 64 + 64 * (2 * g + h));
      for (int j = 0; j < 4; ++j) {
        const int kp = 4 * g + j;
        StorePairs(
            Widen4(_mm512_srli_epi32(lanes, 4 * j), nibble_values, unit[4 * kp + 2 * h]),
            Widen4(_mm512_srli_epi32(lanes, 4 * j + 16), nibble_values, unit[4 * kp + 2 * h + 1]),
            out + kp * kPanelPairBytes + 64 * h);
      }
    }
  }
}

// bf16 bits of the 16 two's-complement nibbles (0..7, then -8..-1), twice: word i = bf16(code(i mod
// 16)), the table WidenTile4Plain's vpermw reads.
// clang-format off
alignas(64) constexpr uint16_t kCodeBf16[32] = {
    0x0000, 0x3f80, 0x4000, 0x4040, 0x4080, 0x40a0, 0x40c0, 0x40e0,
    0xc100, 0xc0e0, 0xc0c0, 0xc0a0, 0xc080, 0xc040, 0xc000, 0xbf80,
    0x0000, 0x3f80, 0x4000, 0x4040, 0x4080, 0x40a0, 0x40c0, 0x40e0,
    0xc100, 0xc0e0, 0xc0c0, 0xc0a0, 0xc080, 0xc040, 0xc000, 0xbf80};
// clang-format on

// One bfp4 k tile of a plain panel (BfpPanels::PanelIsPlain: E in [3, 129] wherever a code is
// nonzero) widened into `out`, the same bits in half the instructions: a lane shifted by 4 j holds
// the pair's codes in the low bits of its two words (k even below, odd above), so one vpermw
// looks both up as bf16 (the table repeats: an index's fifth bit is the next nibble's), and the
// block's unit is an add to the exponent field, E - 129 (bf16(q) has 127 + floor(log2 |q|); the
// value's is E - 2 + floor(log2 |q|), in [1, 129]: a normal, the add never carries into the
// sign), masked so a zero code stays +0.
WC_AMX inline void WidenTile4Plain(const uint8_t* tile, uint8_t* out) {
  const __m512i code_bf16 = _mm512_load_si512(kCodeBf16);
  // [32] dwords: dword 2 kp + h = the exponent offsets of k = 2 kp (low word), 2 kp + 1 (high).
  alignas(64) uint16_t offset[64];
  for (int i = 0; i < 64; i += 32) {
    const __m512i e =
        _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + i)));
    _mm512_store_si512(offset + i,
                       _mm512_slli_epi16(_mm512_sub_epi16(e, _mm512_set1_epi16(129)), 7));
  }
  const auto* offset32 = reinterpret_cast<const int32_t*>(offset);
  for (int g = 0; g < 4; ++g) {
    for (int h = 0; h < 2; ++h) {
      const __m512i lanes = _mm512_loadu_si512(tile + 64 + 64 * (2 * g + h));
      for (int j = 0; j < 4; ++j) {
        const int kp = 4 * g + j;
        const __m512i w = _mm512_permutexvar_epi16(_mm512_srli_epi32(lanes, 4 * j), code_bf16);
        _mm512_store_si512(out + kp * kPanelPairBytes + 64 * h,
                           _mm512_maskz_add_epi16(_mm512_test_epi16_mask(w, w), w,
                                                  _mm512_set1_epi32(offset32[2 * kp + h])));
      }
    }
  }
}

// One panel (k_tiles tiles from `panel`; plain: BfpPanels::PanelIsPlain) times MA token tiles: C
// tiles from zero, per k tile the codes widened into buf (two 2 KiB halves, used in turn) under FTZ
// and one TDPBF16PS per token tile and 16-row half; then C stored to c ([16 MA tokens][32 rows]
// f32). Runs under FTZ (RunRange sets it). Each k tile prefetches the one kPrefetchL1 tiles on to
// L1 and the one kPrefetchL2 on to L2 (the next panel's first ones near the end: panels lie back
// to back). Model B's bfp8 verify step (5 tokens, 2 threads, weights from DRAM) took 81-87 ms with
// the hardware prefetcher alone or L1 prefetches 4 or 8 tiles on, 72-78 ms with both (L2 16-64
// tiles on within noise of each other); Intel Xeon VM with AMX, 2026-11-28.
constexpr int kPrefetchL1 = 4, kPrefetchL2 = 16;

template <int B, int MA>
WC_AMX __attribute__((noinline)) void Panel(const AmxGemmInput& x, const uint8_t* panel,
                                            int64_t k_tiles, bool plain, uint8_t* buf, float* c) {
  constexpr int kTileBytes = B == 7 ? kBfp8TileBytes : kBfp4TileBytes;
  _tile_zero(0);
  _tile_zero(1);
  if (MA == 2) {
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int64_t tk = 0; tk < k_tiles; ++tk) {
    const uint8_t* tile = panel + tk * kTileBytes;
    for (int l = 0; l < kTileBytes; l += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(tile + kPrefetchL1 * kTileBytes + l), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(tile + kPrefetchL2 * kTileBytes + l), _MM_HINT_T1);
    }
    uint8_t* w = buf + (tk & 1) * kWidenedBytes;
    if constexpr (B == 7) {
      WidenTile8(tile, w);
    } else if (plain) {
      WidenTile4Plain(tile, w);
    } else {
      WidenTile4(tile, w);
    }
    WC_TILE_LOAD(6, w, kPanelPairBytes);
    WC_TILE_LOAD(7, w + 64, kPanelPairBytes);
    WC_TILE_LOAD(4, x.Tile(0, tk), amx::kBlockCols * 2);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if (MA == 2) {
      WC_TILE_LOAD(5, x.Tile(1, tk), amx::kBlockCols * 2);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  constexpr int kCStride = kPanelRows * 4;
  _tile_stored(0, c, kCStride);
  _tile_stored(1, c + 16, kCStride);
  if (MA == 2) {
    float* c1 = c + kTileTokens * kPanelRows;
    _tile_stored(2, c1, kCStride);
    _tile_stored(3, c1 + 16, kCStride);
  }
}

template <int B>
WC_AMX void RunRange(const AmxGemmInput& x, const gemm::BfpTask& task, int64_t pa, int64_t pb) {
  const gemm::Task& b = task.base;
  alignas(64) uint8_t buf[2 * kWidenedBytes];         // two widened k tiles
  alignas(64) float c[2 * kTileTokens * kPanelRows];  // [32 tokens][32 rows]
  // FTZ for the widening (a bf16 subnormal flushed, as the portable widening does) and the bias
  // add (gemm_amx.h); the caller's MXCSR back at the end.
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(csr | kMxcsrFtz);
  amx::LoadTileConfig();
  for (int64_t q = pa; q < pb; ++q) {
    const uint8_t* panel = b.w + q * b.panel_bytes;
    const bool plain = task.plain[q] != 0;
    if (x.token_tiles == 2) {
      Panel<B, 2>(x, panel, b.k_steps, plain, buf, c);
    } else {
      Panel<B, 1>(x, panel, b.k_steps, plain, buf, c);
    }
    amx::WriteY(b, c, 0, x.n_tokens, q);
  }
  _tile_release();
  _mm_setcsr(csr);
}

}  // namespace
}  // namespace bfp_amx

void GemmBfpAmxRange(const AmxGemmInput& x, const gemm::BfpTask& task, int64_t pa, int64_t pb) {
  WC_CHECK(x.padded_cols == 32 * task.base.k_steps && x.n_tokens == task.base.n_tokens &&
               x.n_tokens >= 1 && x.n_tokens <= kBfpAmxFusedMaxTokens,
           "AMX block-float gemm input packed for another matrix or too many tokens");
  if (pa >= pb) return;
  if (task.magnitude_bits == 7) {
    bfp_amx::RunRange<7>(x, task, pa, pb);
  } else {
    bfp_amx::RunRange<3>(x, task, pa, pb);
  }
}

}  // namespace wc
