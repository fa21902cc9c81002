// The block-float GEMM's one-token tile on AVX2 + FMA (gemm_bfp_one_token.h): the AVX-512F tile's
// trick in 8-lane vectors. Per k tile, the token's activation of each block (k, half) is scaled by
// the block's unit once (x'), and the codes are multiplied as bare integers, so a weight costs its
// widening and one FMA:
//   bfp8: vpmovsxbd and vcvtdq2ps of the two's-complement codes (q);
//   bfp4: the nibble shifted to the lane's top and masked (vpslld, vpand; the top nibble only
//         masked) and converted: q 2^28, so bfp4's x' carries a further 2^-28 (exact as well).
// The core issues about four vector operations a cycle here, so the count a code is the cost:
// bfp4 takes one shift and a mask (not a shift pair, nor two masks and a subtraction, both
// measured slower: docs/performance.md, "One token on the AVX2 kind"). A panel's 32 rows are 4
// vectors with an even-k and an odd-k chain each, both halves of a k taken together: 8 chains
// interleaved.
#include <immintrin.h>

#include "kernels/gemm/bfp/gemm_bfp_one_token.h"

#define WC_BFP_ONE_TOKEN_AVX2 __attribute__((target("avx2,fma")))

namespace wc {
namespace {

// 2^-28: bfp4's masked code at the lane's top is q 2^28.
constexpr float kTopNibbleScale = 1.0f / 268435456.0f;

// A k tile's activations as the FMAs take them, per exponent byte 4 kp + 2 h + b (k = 2 kp + b,
// half h): xs[e] = x(k) times block e's unit (times 2^-28 for bfp4), or in the refused tile's
// operands x(k) itself, with unit[e] the block's unit for the weights.
struct TileX {
  alignas(32) float xs[64];
  alignas(32) float unit[64];
};

// The units of a k tile's 64 blocks (exponent byte order) as f32 bits, with a block whose unit is
// not a normal at most 1 (field clamped into [1, 127]): plain panels hold only zero codes in such a
// block, where any finite x' gives the same 0 product; a nonzero block has field E - (B - 1) in
// [1, 127] (PanelIsPlain), so its unit is exact and at most 1, and no x' can overflow.
//   e8: 8 exponent bytes; returns 8 units.
template <int B>
WC_BFP_ONE_TOKEN_AVX2 inline __attribute__((always_inline)) __m256 Units(const uint8_t* e8) {
  const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(e8)));
  // field - 1 as unsigned, capped at 126 (a field < 1 wraps past the cap too), then back.
  const __m256i f1 =
      _mm256_min_epu32(_mm256_sub_epi32(e, _mm256_set1_epi32(B)), _mm256_set1_epi32(126));
  return _mm256_castsi256_ps(
      _mm256_add_epi32(_mm256_slli_epi32(f1, 23), _mm256_set1_epi32(1 << 23)));
}

// x per exponent byte, bytes 8 j .. 8 j + 7: k pairs 2 j and 2 j + 1, each once a half, i.e.
// the 64-bit pairs of x's vector j / 2 as (0, 0, 1, 1) or (2, 2, 3, 3).
WC_BFP_ONE_TOKEN_AVX2 inline __attribute__((always_inline)) __m256 XPerExponent(
    const float* __restrict x, int j) {
  const __m256d pairs = _mm256_castps_pd(_mm256_loadu_ps(x + 8 * (j / 2)));
  return _mm256_castpd_ps(j % 2 == 0 ? _mm256_permute4x64_pd(pairs, 0x50)
                                     : _mm256_permute4x64_pd(pairs, 0xFA));
}

// x' for a k tile: false when some nonzero x' is flushed (the product left the normals), in which
// case t holds the unscaled step's operands instead (Step<B, false>): x itself and the weights'
// units.
//   x: the tile's 32 activations (bf16 values as f32); tile: its exponent bytes first.
template <int B>
WC_BFP_ONE_TOKEN_AVX2 inline __attribute__((always_inline)) bool ScaledX(
    const float* __restrict x, const uint8_t* __restrict tile, TileX* __restrict t) {
  const __m256 zero = _mm256_setzero_ps();
  // Under FTZ an underflow gives a zero x': the bits of x where x' is zero collect every nonzero
  // x that was flushed (a zero x is +-0, its sign bit masked off below).
  __m256 flushed = zero;
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    const __m256 x8 = XPerExponent(x, j);
    __m256 scaled = _mm256_mul_ps(x8, Units<B>(tile + 8 * j));
    if constexpr (B == 3) scaled = _mm256_mul_ps(scaled, _mm256_set1_ps(kTopNibbleScale));
    flushed = _mm256_or_ps(flushed, _mm256_and_ps(_mm256_cmp_ps(scaled, zero, _CMP_EQ_OQ), x8));
    _mm256_store_ps(t->xs + 8 * j, scaled);
  }
  const __m256i magnitude = _mm256_set1_epi32(0x7fffffff);
  if (_mm256_testz_si256(_mm256_castps_si256(flushed), magnitude)) return true;
  for (int j = 0; j < 8; ++j) {
    _mm256_store_ps(t->xs + 8 * j, XPerExponent(x, j));
    _mm256_store_ps(t->unit + 8 * j, Units<B>(tile + 8 * j));
  }
  return false;
}

// Code vector v (rows 8 v .. 8 v + 7) of k = 2 kp + b, widened: kScaled the bare value (bfp4: q
// 2^28), else q times its unit.
//   bfp8: row k's codes at tile + 64 + 32 k; bfp4: `lanes` = its chunk's lanes for the rows,
//   the code at bit 4 j + 16 b (kp = 4 g + j).
template <bool kScaled>
WC_BFP_ONE_TOKEN_AVX2 inline __attribute__((always_inline)) __m256 Widen8(const uint8_t* codes,
                                                                          float unit) {
  const __m256 q = _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes))));
  return kScaled ? q : _mm256_mul_ps(q, _mm256_set1_ps(unit));
}
template <bool kScaled, int kBit>
WC_BFP_ONE_TOKEN_AVX2 inline __attribute__((always_inline)) __m256 Widen4(__m256i lanes,
                                                                          float unit) {
  if constexpr (kScaled) {
    const __m256i top = kBit == 28 ? lanes : _mm256_slli_epi32(lanes, 28 - kBit);
    return _mm256_cvtepi32_ps(
        _mm256_and_si256(top, _mm256_set1_epi32(static_cast<int>(0xF0000000u))));
  } else {
    const __m256i q = _mm256_srai_epi32(_mm256_slli_epi32(lanes, 28 - kBit), 28);
    return _mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(unit));
  }
}

// k = 2 kp + b into both halves' chains: per half its x' (or x) broadcast, per vector v of the
// half (rows 8 v .. 8 v + 7) one FMA with codes(v, unit), the vector's codes widened.
template <class Codes>
WC_BFP_ONE_TOKEN_AVX2 inline __attribute__((always_inline)) void IntoChains(__m256 (&acc)[2][4],
                                                                            const TileX& t, int kp,
                                                                            int b,
                                                                            const Codes& codes) {
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const int e = 4 * kp + 2 * h + b;
    const __m256 x = _mm256_broadcast_ss(&t.xs[e]);
#pragma GCC unroll 2
    for (int v = 2 * h; v < 2 * h + 2; ++v)
      acc[b][v] = _mm256_fmadd_ps(x, codes(v, t.unit[e]), acc[b][v]);
  }
}

// The codes of one k: bfp8's row of 32 bytes; bfp4's lanes (rows 8 v .. of the k's chunk pair:
// half v / 2's chunk, its (v % 2)th 32 bytes), the code at bit kBit.
template <bool kScaled>
struct Codes8 {
  const uint8_t* row;
  WC_BFP_ONE_TOKEN_AVX2 inline __attribute__((always_inline)) __m256 operator()(int v,
                                                                                float unit) const {
    return Widen8<kScaled>(row + 8 * v, unit);
  }
};
template <bool kScaled, int kBit>
struct Codes4 {
  const __m256i* lanes;
  WC_BFP_ONE_TOKEN_AVX2 inline __attribute__((always_inline)) __m256 operator()(int v,
                                                                                float unit) const {
    return Widen4<kScaled, kBit>(lanes[v], unit);
  }
};

// One k tile into the chains acc[b][v] (k parity b, rows 8 v .. 8 v + 7), k increasing in each.
template <int B, bool kScaled>
WC_BFP_ONE_TOKEN_AVX2 inline __attribute__((always_inline)) void Step(
    __m256 (&acc)[2][4], const uint8_t* __restrict tile, const TileX& t) {
  if constexpr (B == 7) {
#pragma GCC unroll 2
    for (int kp = 0; kp < 16; ++kp) {
#pragma GCC unroll 2
      for (int b = 0; b < 2; ++b)
        IntoChains(acc, t, kp, b, Codes8<kScaled>{tile + 64 + 32 * (2 * kp + b)});
    }
  } else {
    // Both halves of each k at once: 8 chains interleaved (one half's 4 would wait on the FMA's
    // latency).
    for (int g = 0; g < 4; ++g) {
      const uint8_t* chunks = tile + 64 + 128 * g;  // chunks 2 g, 2 g + 1: k in [8 g, 8 g + 8)
      __m256i lanes[4];
      for (int v = 0; v < 4; ++v)
        lanes[v] = _mm256_load_si256(reinterpret_cast<const __m256i*>(chunks + 32 * v));
      IntoChains(acc, t, 4 * g, 0, Codes4<kScaled, 0>{lanes});
      IntoChains(acc, t, 4 * g, 1, Codes4<kScaled, 16>{lanes});
      IntoChains(acc, t, 4 * g + 1, 0, Codes4<kScaled, 4>{lanes});
      IntoChains(acc, t, 4 * g + 1, 1, Codes4<kScaled, 20>{lanes});
      IntoChains(acc, t, 4 * g + 2, 0, Codes4<kScaled, 8>{lanes});
      IntoChains(acc, t, 4 * g + 2, 1, Codes4<kScaled, 24>{lanes});
      IntoChains(acc, t, 4 * g + 3, 0, Codes4<kScaled, 12>{lanes});
      IntoChains(acc, t, 4 * g + 3, 1, Codes4<kScaled, 28>{lanes});
    }
  }
}

template <int B>
WC_BFP_ONE_TOKEN_AVX2 __attribute__((noinline)) void Tile(const float* __restrict x,
                                                          const uint8_t* __restrict w,
                                                          int64_t panel_bytes, int64_t k_tiles,
                                                          float* __restrict out) {
  constexpr int64_t kTileBytes = B == 7 ? 1088 : 576;
  // The running sums stay in `out` (a load and store per k tile), leaving the 16 registers to the
  // 8 chains and the widening.
  for (int v = 0; v < 4; ++v) _mm256_storeu_ps(out + 8 * v, _mm256_setzero_ps());
  TileX t;
  for (int64_t tk = 0; tk < k_tiles; ++tk) {
    const uint8_t* tile = w + tk * kTileBytes;
    PrefetchBfpTilesAhead(w, 1, panel_bytes, kTileBytes, tk, k_tiles);
    __m256 acc[2][4];
    for (int b = 0; b < 2; ++b)
      for (int v = 0; v < 4; ++v) acc[b][v] = _mm256_setzero_ps();
    if (ScaledX<B>(x + tk * 32, tile, &t))
      Step<B, true>(acc, tile, t);
    else
      Step<B, false>(acc, tile, t);
    for (int v = 0; v < 4; ++v)
      _mm256_storeu_ps(out + 8 * v, _mm256_add_ps(_mm256_loadu_ps(out + 8 * v),
                                                  _mm256_add_ps(acc[0][v], acc[1][v])));
  }
}

}  // namespace

void BfpOneTokenTileAvx2(int magnitude_bits, const float* x, const uint8_t* w, int64_t panel_bytes,
                         int64_t k_tiles, float* out) {
  if (magnitude_bits == 7)
    Tile<7>(x, w, panel_bytes, k_tiles, out);
  else
    Tile<3>(x, w, panel_bytes, k_tiles, out);
}

}  // namespace wc
