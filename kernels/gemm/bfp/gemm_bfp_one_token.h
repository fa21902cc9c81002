// Internal to gemm_bfp.cpp: the block-float GEMM's one-token (decode) tile on AVX-512F. Decode
// streams each weight once per token, so this tile's cost per weight is the whole of decode's
// compute: per 16 weights one widening (bfp8: vpmovsxbd + vcvtdq2ps; bfp4: a shift + vpermps) and
// one FMA, with the block's exponent on the activation instead of on each weight.
//
// Contract: the BF16 GEMM's order bit for bit (gemm.h, gemm_bfp.h): per k tile (a 32-k block), from
// zero, even = fma(w(k), x(k), even) for even k and odd = fma(w(k), x(k), odd) for odd k in
// increasing k, then acc = acc + (even + odd), all under FTZ, with
//   x the token's bf16-rounded activation lowered by the block's exponent drop (x' = x 2^-D:
//     exact whenever x' stays a normal or x is zero),
//     times the bare code value +-q (an integer: bfp8 sign-extended and converted, bfp4 by vpermps
//     of a 16-entry table);
//   or, for a k tile where some x' would leave the normals, x itself times q 2^(E - 127 - (B - 1))
//     (exact: plain panels hold normal weights).
// Both give every product exactly x w, so the chains are the BF16 GEMM's bit for bit.
#pragma once

#include <cstdint>

namespace wc {

// The chains of one token through np (1, 2 or 4) plain panels (BfpPanels::PanelIsPlain),
// out[j * 16 + lane] = row 16 h + lane of panel p (j = 2 p + h), over k tiles [0, k_tiles).
//   x: [K32] the token's activations rounded to bf16 (as f32, zero past K: the portable pairs
//   input of one token); w: panel 0's first tile, the others panel_bytes apart (gemm_bfp.h's
//   layout); out: [np * 32] f32.
// Needs AVX-512F (CpuHas(kAvx512Gemm)); sets and restores MXCSR.FTZ.
//   magnitude_bits: B, 7 (bfp8) or 3 (bfp4).
void BfpOneTokenTile(int magnitude_bits, int np, const float* x, const uint8_t* w,
                     int64_t panel_bytes, int64_t k_tiles, float* out);

// The same chains on AVX2 + FMA (gemm_bfp_one_token_avx2.cpp) for one plain panel, out[n] = row n
// (n < 32), x and w as above; with bfp4's codes taken as q 2^28 against x' 2^-28. The row-group
// tiles' one-token case (gemm_bfp_row_groups.h) on the AVX2 target; needs AVX2 and FMA, and
// MXCSR.FTZ set by the caller.
void BfpOneTokenTileAvx2(int magnitude_bits, const float* x, const uint8_t* w, int64_t panel_bytes,
                         int64_t k_tiles, float* out);

// Tiles ahead of the one being multiplied whose lines the one-token tile prefetches, per panel:
// decode is bound by the read rate, which the hardware prefetchers alone do not reach while the
// widening keeps the core busy (measured: 63% -> 75% of the read bound for bfp8 on model B).
constexpr int kBfpPrefetchTiles = 2;

// Prefetches the lines of k tile tk + kBfpPrefetchTiles of np panels (tile_bytes each, panels
// panel_bytes apart from `w`), when there is one: the one-token tile's and the portable tiles'.
// Always inlined and compiled for the baseline target, so it inlines into every wider one.
inline __attribute__((always_inline)) void PrefetchBfpTilesAhead(const uint8_t* w, int np,
                                                                 int64_t panel_bytes,
                                                                 int64_t tile_bytes, int64_t tk,
                                                                 int64_t k_tiles) {
  if (tk + kBfpPrefetchTiles >= k_tiles) return;
  const uint8_t* ahead = w + (tk + kBfpPrefetchTiles) * tile_bytes;
  for (int p = 0; p < np; ++p)
    for (int64_t o = 0; o < tile_bytes; o += 64)
      __builtin_prefetch(ahead + p * panel_bytes + o, 0, 3);
}

}  // namespace wc
