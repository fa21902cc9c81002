// The block-float GEMM's one-token tile on AVX-512F (gemm_bfp_one_token.h): per k tile, the
// token's activations are lowered by each block's exponent drop once (ScaledX), then each 16-row
// block of codes is widened to f32 (bfp8: vpmovsxbd and vcvtdq2ps of the two's-complement codes;
// bfp4: vpermps of a 16-entry table by the code nibble) and multiplied into its 16
// rows' even-k or odd-k chain with one FMA; at the tile's end (a 32-k block) the two chains are
// added into the running sum (gemm.h's order).
#include "kernels/gemm/bfp/gemm_bfp_one_token.h"

#include <immintrin.h>

#define WC_BFP_ONE_TOKEN __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))

namespace wc {
namespace {

// A k tile's activations as the FMAs take them (f32), for panel p's half h (rows 16 h .. 16 h +
// 15):
//   even[p][h][kp] = x'(2 kp), odd[p][h][kp] = x'(2 kp + 1).
template <int NP>
struct TileX {
  alignas(64) float even[NP][2][16];
  alignas(64) float odd[NP][2][16];
};

// The unit 2^(E - 127 - (B - 1)) of every block of a k tile of NP panels, for the tiles ScaledX
// refuses: unit[p][h][k]. A block whose unit would not be a normal holds only zero codes (plain
// panels), so 0 serves.
template <int NP>
struct TileUnits {
  alignas(64) float unit[NP][2][32];
};

// x' for a k tile of NP panels (gemm_bfp_one_token.h): false when some nonzero x' would not be a
// normal, in which case `xs` is unusable. Exponent bytes: 4 kp + 2 h + b = E of (k = 2 kp + b,
// half h).
//   x: the tile's 16 pairs (bf16 k even low, odd high).
template <int NP>
WC_BFP_ONE_TOKEN inline __attribute__((always_inline)) bool ScaledX(const uint8_t* __restrict tile,
                                                                    int64_t panel_bytes, int bias,
                                                                    __m512i x,
                                                                    TileX<NP>* __restrict xs) {
  // Per dword kp, half h's two exponent bytes as 16-bit words.
  const __m512i spread0 = _mm512_broadcast_i32x4(
      _mm_set_epi64x(0x800D800C80098008LL, 0x8005800480018000LL));  // bytes 4 i, 4 i + 1
  const __m512i spread1 = _mm512_broadcast_i32x4(
      _mm_set_epi64x(0x800F800E800B800ALL, 0x8007800680038002LL));  // bytes 4 i + 2, 4 i + 3
  const __m512i magnitude = _mm512_set1_epi16(0x7fff);
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  const __m512i b = _mm512_set1_epi16(static_cast<int16_t>(bias));
  const __mmask32 nonzero = _mm512_test_epi16_mask(x, magnitude);
  const __m512i xmag = _mm512_and_si512(x, magnitude);
  __mmask32 bad = 0;
#pragma GCC unroll 4
  for (int p = 0; p < NP; ++p) {
    const __m512i e = _mm512_loadu_si512(tile + p * panel_bytes);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m512i ew = _mm512_shuffle_epi8(e, h == 0 ? spread0 : spread1);
      const __m512i d = _mm512_slli_epi16(_mm512_sub_epi16(b, ew), 7);
      bad |= _mm512_cmplt_epi16_mask(_mm512_sub_epi16(xmag, d), _mm512_set1_epi16(0x80));
      const __m512i scaled = _mm512_mask_sub_epi16(x, nonzero, x, d);
      _mm512_store_si512(xs->even[p][h], _mm512_slli_epi32(scaled, 16));
      _mm512_store_si512(xs->odd[p][h], _mm512_and_si512(scaled, high));
    }
  }
  return (bad & nonzero) == 0;
}

// The refused tile's operands: x itself (every panel and half alike) and the blocks' units.
template <int NP>
WC_BFP_ONE_TOKEN inline void UnscaledX(const uint8_t* __restrict tile, int64_t panel_bytes, int b,
                                       __m512i x, TileX<NP>* __restrict xs,
                                       TileUnits<NP>* __restrict units) {
  const __m512 even = _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
  const __m512 odd =
      _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
  for (int p = 0; p < NP; ++p) {
    const uint8_t* e = tile + p * panel_bytes;
    for (int h = 0; h < 2; ++h) {
      _mm512_store_ps(xs->even[p][h], even);
      _mm512_store_ps(xs->odd[p][h], odd);
      for (int k = 0; k < 32; ++k) {
        const int field = e[(k / 2) * 4 + 2 * h + k % 2] - (b - 1);
        const uint32_t bits = field >= 1 ? static_cast<uint32_t>(field) << 23 : 0u;
        __builtin_memcpy(&units->unit[p][h][k], &bits, 4);
      }
    }
  }
}

// One k tile of NP bfp4 panels into even[p][h] and odd[p][h] (the block's chains). Chunk 2 g
// + h of a tile (gemm_bfp.h): lane i = row 16 h + i, the nibble at bit 4 j + 16 b = code of k = 8 g
// + 2 j + b; vpermps reads a lane's low 4 bits, so the lane shifted right by 4 j + 16 b indexes the
// table.
template <int NP, bool kScaled>
WC_BFP_ONE_TOKEN inline __attribute__((always_inline)) void StepBfp4(
    __m512 (&even)[NP][2], __m512 (&odd)[NP][2], __m512 table, const uint8_t* __restrict tile,
    int64_t panel_bytes, const TileX<NP>& xs, const TileUnits<NP>* units) {
  for (int g = 0; g < 4; ++g) {
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m512i c = _mm512_load_si512(tile + p * panel_bytes + 64 + 128 * g + 64 * h);
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const int kp = 4 * g + j;
          __m512 w1 = _mm512_permutexvar_ps(_mm512_srli_epi32(c, 4 * j + 16), table);
          __m512 w0 = _mm512_permutexvar_ps(j == 0 ? c : _mm512_srli_epi32(c, 4 * j), table);
          if constexpr (!kScaled) {
            w1 = _mm512_mul_ps(w1, _mm512_set1_ps(units->unit[p][h][2 * kp + 1]));
            w0 = _mm512_mul_ps(w0, _mm512_set1_ps(units->unit[p][h][2 * kp]));
          }
          even[p][h] = _mm512_fmadd_ps(w0, _mm512_set1_ps(xs.even[p][h][kp]), even[p][h]);
          odd[p][h] = _mm512_fmadd_ps(w1, _mm512_set1_ps(xs.odd[p][h][kp]), odd[p][h]);
        }
      }
    }
  }
}

// One k tile of NP bfp8 panels into even[p][h] and odd[p][h] (the block's chains): row k of
// a tile is 32 two's-complement codes (gemm_bfp.h), half h's 16 of them sign-extended and converted
// exactly.
template <int NP, bool kScaled>
WC_BFP_ONE_TOKEN inline __attribute__((always_inline)) void StepBfp8(
    __m512 (&even)[NP][2], __m512 (&odd)[NP][2], const uint8_t* __restrict tile,
    int64_t panel_bytes, const TileX<NP>& xs, const TileUnits<NP>* units) {
  for (int kp = 0; kp < 16; ++kp) {
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
      const uint8_t* rows = tile + p * panel_bytes + 64 + 64 * kp;  // rows 2 kp, 2 kp + 1
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        __m512 w1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
            _mm_load_si128(reinterpret_cast<const __m128i*>(rows + 32 + 16 * h))));
        __m512 w0 = _mm512_cvtepi32_ps(
            _mm512_cvtepi8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(rows + 16 * h))));
        if constexpr (!kScaled) {
          w1 = _mm512_mul_ps(w1, _mm512_set1_ps(units->unit[p][h][2 * kp + 1]));
          w0 = _mm512_mul_ps(w0, _mm512_set1_ps(units->unit[p][h][2 * kp]));
        }
        even[p][h] = _mm512_fmadd_ps(w0, _mm512_set1_ps(xs.even[p][h][kp]), even[p][h]);
        odd[p][h] = _mm512_fmadd_ps(w1, _mm512_set1_ps(xs.odd[p][h][kp]), odd[p][h]);
      }
    }
  }
}

template <int NP, int B, bool kScaled>
WC_BFP_ONE_TOKEN inline __attribute__((always_inline)) void Step(
    __m512 (&even)[NP][2], __m512 (&odd)[NP][2], __m512 table, const uint8_t* __restrict tile,
    int64_t panel_bytes, const TileX<NP>& xs, const TileUnits<NP>* units) {
  if constexpr (B == 7) {
    StepBfp8<NP, kScaled>(even, odd, tile, panel_bytes, xs, units);
  } else {
    StepBfp4<NP, kScaled>(even, odd, table, tile, panel_bytes, xs, units);
  }
}

// The tile's 32 activations (f32 values of bf16s) as 16 pairs, bf16(2 kp + 1) << 16 | bf16(2 kp):
// the high halves of the floats, gathered by one vpermt2w.
WC_BFP_ONE_TOKEN inline __m512i PairsOf(const float* __restrict x) {
  alignas(64) static constexpr uint16_t kHighWords[32] = {
      1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31,
      33, 35, 37, 39, 41, 43, 45, 47, 49, 51, 53, 55, 57, 59, 61, 63};
  const __m512i lo = _mm512_loadu_si512(x), hi = _mm512_loadu_si512(x + 16);
  return _mm512_permutex2var_epi16(lo, _mm512_load_si512(kHighWords), hi);
}

template <int NP, int B>
WC_BFP_ONE_TOKEN __attribute__((noinline)) void Tile(const float* __restrict x,
                                                     const uint8_t* __restrict w,
                                                     int64_t panel_bytes, int64_t k_tiles,
                                                     float* __restrict out) {
  constexpr int64_t kTileBytes = B == 7 ? 1088 : 576;
  // bfp4's two's-complement nibble (gemm_bfp.h) as a float; -8 never occurs.
  const __m512 table = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1);
  __m512 acc[NP][2], even[NP][2], odd[NP][2];
  for (int p = 0; p < NP; ++p) acc[p][0] = acc[p][1] = _mm512_setzero_ps();
  TileX<NP> xs;
  TileUnits<NP> units;
  for (int64_t tk = 0; tk < k_tiles; ++tk) {
    const uint8_t* tile = w + tk * kTileBytes;
    PrefetchBfpTilesAhead(w, NP, panel_bytes, kTileBytes, tk, k_tiles);
    for (int p = 0; p < NP; ++p)
      for (int h = 0; h < 2; ++h) even[p][h] = odd[p][h] = _mm512_setzero_ps();
    const __m512i pairs = PairsOf(x + tk * 32);
    if (ScaledX<NP>(tile, panel_bytes, 127 + B - 1, pairs, &xs)) {
      Step<NP, B, true>(even, odd, table, tile, panel_bytes, xs, nullptr);
    } else {
      UnscaledX<NP>(tile, panel_bytes, B, pairs, &xs, &units);
      Step<NP, B, false>(even, odd, table, tile, panel_bytes, xs, &units);
    }
    for (int p = 0; p < NP; ++p)
      for (int h = 0; h < 2; ++h)
        acc[p][h] = _mm512_add_ps(acc[p][h], _mm512_add_ps(even[p][h], odd[p][h]));
  }
  for (int p = 0; p < NP; ++p) {
    _mm512_storeu_ps(out + 32 * p, acc[p][0]);
    _mm512_storeu_ps(out + 32 * p + 16, acc[p][1]);
  }
}

template <int B>
void TileB(int np, const float* x, const uint8_t* w, int64_t panel_bytes, int64_t k_tiles,
           float* out) {
  switch (np) {
    case 4:
      return Tile<4, B>(x, w, panel_bytes, k_tiles, out);
    case 2:
      return Tile<2, B>(x, w, panel_bytes, k_tiles, out);
    default:
      return Tile<1, B>(x, w, panel_bytes, k_tiles, out);
  }
}

}  // namespace

void BfpOneTokenTile(int magnitude_bits, int np, const float* x, const uint8_t* w,
                     int64_t panel_bytes, int64_t k_tiles, float* out) {
  const unsigned int csr = _mm_getcsr();
  _mm_setcsr(csr | 0x8000u);  // FTZ: the BF16 GEMM's flush of a subnormal result (gemm.h)
  if (magnitude_bits == 7) {
    TileB<7>(np, x, w, panel_bytes, k_tiles, out);
  } else {
    TileB<3>(np, x, w, panel_bytes, k_tiles, out);
  }
  _mm_setcsr(csr);
}

}  // namespace wc
