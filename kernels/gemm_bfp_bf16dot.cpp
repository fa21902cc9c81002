// The block-float GEMM's tiles on AVX-512 BF16 (gemm_bfp_bf16dot.h): each 64-byte chunk of codes
// (gemm_bfp.h's layout) is widened in registers to vdpbf16ps's pair operands, exact bf16:
//   bfp8: the chunk of rows k, k + 1 put in vpunpck{l,h}bw's order (one vpermb), the magnitude's
//         bf16 by table (vpabsb, then two vpermi2b: high and low bytes of bf16(m), m < 128), the
//         sign ORed into the high byte, the bytes interleaved into (k, k + 1) pairs per row, then
//         the block's exponent applied to the exponent field;
//   bfp4: a lane holds 8 codes of one row, a 16-bit word 4 of them: vpermw (32 words: the bf16 of
//         every sign and magnitude) on the word shifted by 0, 4, 8, 12 gives 4 pair operands.
// The exponent: a magnitude's bf16 has field 127 + msb; the value's is E - (B - 1) + msb, so the
// field drops by D = 127 + B - 1 - E. On plain panels (gemm_bfp.h: nonzero blocks have
// B <= E <= 127 + B - 1) that is one unsigned saturating subtract of D << 7 per word, which leaves
// a zero code 0 and never leaves the normals; other panels subtract with a check per word, flushing
// a result below the normals to zero of its sign (vdpbf16ps's DAZ, as the BF16 panels' packer
// does).
#include "kernels/gemm_bfp_bf16dot.h"
#include "kernels/gemm_bfp_one_token.h"

#include <immintrin.h>

#include <cstring>

#include "util/bf16.h"

#define WC_GEMM_BFP_DOT \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx512vbmi")))

namespace wc {
namespace {

// Accumulators of 32 zmm: bfp8's widening holds 6 constants and 5 temporaries (24 spilled the
// chains of a 12-token tile to the stack), bfp4's 1 and 4.
constexpr int AccBudget(int b) {
  return b == 7 ? 20 : 24;
}
constexpr bool Fits(int b, int mr, int np) {
  return mr <= AccBudget(b) / 2 && (np == 1 || mr * np * 2 <= AccBudget(b));
}

// bf16(m) for m < 128 split into bytes (bfp8), and bf16(+-q) for every bfp4 code (twice: vpermw
// reads 5 index bits, the code is the low 4).
struct Tables {
  alignas(64) uint8_t hi[128];
  alignas(64) uint8_t lo[128];
  alignas(64) uint16_t bfp4[32];
  // bfp8: byte o of the reordered chunk = byte order[o] of rows k, k + 1 (gemm_bfp.h), so that
  // o = 4 (4 j + e) + 2 s + b holds (k + b, n = 16 (e / 2) + 4 j + 2 (e % 2) + s), and vpunpcklbw
  // (vpunpckhbw) of the looked-up bytes are the pairs of rows 0-15 (16-31) in order.
  alignas(64) uint8_t order[64];
  Tables() {
    for (int o = 0; o < 64; ++o) {
      const int lane = o / 4, s = (o % 4) / 2, b = o % 2, j = lane / 4, e = lane % 4;
      order[o] = static_cast<uint8_t>(32 * b + 16 * (e / 2) + 4 * j + 2 * (e % 2) + s);
    }
    for (int m = 0; m < 128; ++m) {
      const uint16_t b = F32ToBF16(static_cast<float>(m));  // exact: 7 bits
      hi[m] = static_cast<uint8_t>(b >> 8);
      lo[m] = static_cast<uint8_t>(b & 0xff);
    }
    for (int i = 0; i < 32; ++i) {
      const int c = i & 15, v = c >= 8 ? c - 16 : c;  // a two's-complement nibble (gemm_bfp.h)
      bfp4[i] = v == 0 ? 0 : F32ToBF16(static_cast<float>(v));
    }
  }
};
const Tables& GetTables() {
  static const Tables t;
  return t;
}

// The exponent drop of a k tile's blocks: d[2 kp + h] = (D(k = 2 kp) | D(2 kp + 1) << 16) << 7,
// kp < 16, h < 2, from the tile's 64 exponent bytes (same order).
WC_GEMM_BFP_DOT inline __attribute__((always_inline)) void Drops(const uint8_t* e, int bias,
                                                                 uint32_t* d) {
  const __m512i b = _mm512_set1_epi16(static_cast<int16_t>(bias));
  for (int i = 0; i < 2; ++i) {
    const __m512i ew = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i*)(e + 32 * i)));
    _mm512_store_si512(d + 16 * i, _mm512_slli_epi16(_mm512_sub_epi16(b, ew), 7));
  }
}

// The exponent applied to pair operand w (bf16 magnitudes | signs) with drops `drop` (one 32-bit
// pattern broadcast).
template <bool kPlain>
WC_GEMM_BFP_DOT inline __attribute__((always_inline)) __m512i Apply(__m512i w, uint32_t drop) {
  const __m512i d = _mm512_set1_epi32(static_cast<int>(drop));
  if constexpr (kPlain) return _mm512_subs_epu16(w, d);
  const __m512i mag = _mm512_and_si512(w, _mm512_set1_epi16(0x7fff));
  const __m512i sign = _mm512_andnot_si512(_mm512_set1_epi16(0x7fff), w);
  const __m512i v = _mm512_sub_epi16(mag, d);  // signed: the new field in bits 7..14, or < 0x80
  const __mmask32 keep =
      _mm512_test_epi16_mask(mag, mag) & _mm512_cmpgt_epi16_mask(v, _mm512_set1_epi16(0x7f));
  return _mm512_mask_mov_epi16(sign, keep, _mm512_or_si512(v, sign));
}

// acc[t][j] = vdpbf16ps(acc[t][j], w0, x pair of token t), and acc[t][j + 1] with w1, for t < MR
// (each broadcast used at once: hoisted, a 10-token tile's broadcasts spilled its chains).
//   x: [MR] pairs.
template <int MR, int NV>
WC_GEMM_BFP_DOT inline __attribute__((always_inline)) void Dot2(__m512 (&acc)[MR][NV], int j,
                                                                __m512i w0, __m512i w1,
                                                                const uint32_t* x) {
  for (int t = 0; t < MR; ++t) {
    const __m512bh xb = (__m512bh)_mm512_set1_epi32(static_cast<int>(x[t]));
    acc[t][j] = _mm512_dpbf16_ps(acc[t][j], (__m512bh)w0, xb);
    acc[t][j + 1] = _mm512_dpbf16_ps(acc[t][j + 1], (__m512bh)w1, xb);
  }
}

// The widening constants of one format, loaded once per tile call.
struct Consts {
  __m512i hi0, hi1, lo0, lo1, sign, table4, order;
};

WC_GEMM_BFP_DOT inline __attribute__((always_inline)) Consts LoadConsts() {
  const Tables& tables = GetTables();
  Consts c;
  c.hi0 = _mm512_load_si512(tables.hi);
  c.hi1 = _mm512_load_si512(tables.hi + 64);
  c.lo0 = _mm512_load_si512(tables.lo);
  c.lo1 = _mm512_load_si512(tables.lo + 64);
  c.sign = _mm512_set1_epi8(static_cast<char>(0x80));
  c.table4 = _mm512_load_si512(tables.bfp4);
  c.order = _mm512_load_si512(tables.order);
  return c;
}

// A bfp8 chunk of 64 codes (rows k, k + 1 of a tile, gemm_bfp.h's layout) as the bf16 magnitudes
// with their signs (exponent not yet applied) of rows 0-15 (*w0) and 16-31 (*w1), in pairs.
WC_GEMM_BFP_DOT inline __attribute__((always_inline)) void WidenBfp8Pair(const Consts& c,
                                                                         __m512i rows, __m512i* w0,
                                                                         __m512i* w1) {
  const __m512i code = _mm512_permutexvar_epi8(c.order, rows);  // two's complement, reordered
  const __m512i mag = _mm512_abs_epi8(code);
  const __m512i hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(c.hi0, mag, c.hi1), code,
                                               c.sign, 0xf8);  // hi | sign
  const __m512i lo = _mm512_permutex2var_epi8(c.lo0, mag, c.lo1);
  *w0 = _mm512_unpacklo_epi8(lo, hi);
  *w1 = _mm512_unpackhi_epi8(lo, hi);
}

// k pair q (< 4) of a bfp4 chunk of one half (gemm_bfp.h's layout) as bf16 magnitudes with signs.
WC_GEMM_BFP_DOT inline __attribute__((always_inline)) __m512i WidenBfp4Pair(const Consts& c,
                                                                            __m512i chunk, int q) {
  return _mm512_permutexvar_epi16(q == 0 ? chunk : _mm512_srli_epi16(chunk, 4 * q), c.table4);
}

// One k tile (k pairs [0, pairs), all 16 unless kTail) of NP panels into the chains acc[t][2 p +
// h].
//   tile: panel 0's tile, the others panel_bytes apart; xp: the tile's first pair, [16][MR].
template <int MR, int NP, int B, bool kPlain, bool kTail>
WC_GEMM_BFP_DOT inline __attribute__((always_inline)) void TileStep(
    __m512 (&acc)[MR][NP * 2], const Consts& c, const uint8_t* __restrict tile, int64_t panel_bytes,
    const uint32_t* __restrict xp, int pairs) {
  constexpr int NV = NP * 2;
  alignas(64) uint32_t drop[NP][32];  // [panel][2 kp + h]
#pragma GCC unroll 4
  for (int p = 0; p < NP; ++p) Drops(tile + p * panel_bytes, 127 + B - 1, drop[p]);
  if constexpr (B == 7) {
    for (int kp = 0; kp < 16; ++kp) {
      if (kTail && kp >= pairs) break;
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) {
        const __m512i code = _mm512_load_si512(tile + p * panel_bytes + 64 + 64 * kp);
        __m512i w0, w1;
        WidenBfp8Pair(c, code, &w0, &w1);
        Dot2<MR, NV>(acc, p * 2, Apply<kPlain>(w0, drop[p][2 * kp]),
                     Apply<kPlain>(w1, drop[p][2 * kp + 1]), xp + kp * MR);
      }
    }
  } else {
    for (int g = 0; g < 4; ++g) {
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) {
        const uint8_t* chunks = tile + p * panel_bytes + 64 + 128 * g;  // halves 0, 1
        const __m512i c0 = _mm512_load_si512(chunks), c1 = _mm512_load_si512(chunks + 64);
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
          const int kp = 4 * g + q;
          if (kTail && kp >= pairs) break;
          Dot2<MR, NV>(acc, p * 2, Apply<kPlain>(WidenBfp4Pair(c, c0, q), drop[p][2 * kp]),
                       Apply<kPlain>(WidenBfp4Pair(c, c1, q), drop[p][2 * kp + 1]), xp + kp * MR);
        }
      }
    }
  }
}

// out[t][j * 16 + lane], j = 2 p + h: acc = vdpbf16ps(acc, W pair, x pair) over every k pair
// (the last tile's first last_pairs), per chain.
//   xp: [K32 / 2][MR] bf16 pairs; w: NP panels, panel_bytes apart (gemm_bfp.h's layout).
template <int MR, int NP, int B, bool kPlain>
WC_GEMM_BFP_DOT __attribute__((noinline)) void Tile(const uint32_t* __restrict xp,
                                                    const uint8_t* __restrict w,
                                                    int64_t panel_bytes, int64_t k_tiles,
                                                    int64_t last_pairs, float* __restrict out) {
  constexpr int NV = NP * 2;
  constexpr int64_t kTileBytes = B == 7 ? 1088 : 576;
  const Consts c = LoadConsts();
  __m512 acc[MR][NV];
  for (int t = 0; t < MR; ++t)
    for (int j = 0; j < NV; ++j) acc[t][j] = _mm512_setzero_ps();
  const int64_t full = last_pairs == 16 ? k_tiles : k_tiles - 1;
  for (int64_t tk = 0; tk < full; ++tk)
    TileStep<MR, NP, B, kPlain, false>(acc, c, w + tk * kTileBytes, panel_bytes, xp + tk * 16 * MR,
                                       16);
  if (full < k_tiles)
    TileStep<MR, NP, B, kPlain, true>(acc, c, w + full * kTileBytes, panel_bytes,
                                      xp + full * 16 * MR, static_cast<int>(last_pairs));
  for (int t = 0; t < MR; ++t)
    for (int j = 0; j < NV; ++j) _mm512_store_ps(out + (t * NV + j) * 16, acc[t][j]);
}

template <int B>
struct TileFn {
  const gemm::BfpTask* task;
  int MaxPanels(int mr) const { return Fits(B, mr, 4) ? 4 : Fits(B, mr, 2) ? 2 : 1; }
  template <int MR, int NP>
  void RunNp(const uint32_t* xp, const uint8_t* w, float* out) const {
    const gemm::Task& b = task->base;
    const int64_t p = (w - b.w) / b.panel_bytes;
    bool plain = true;
    for (int i = 0; i < NP; ++i) plain = plain && task->plain[p + i] != 0;
    if (plain && MR == 1)
      return BfpOneTokenTile(B, NP, xp, w, b.panel_bytes, b.k_steps, task->last_pairs, out);
    if (plain) return Tile<MR, NP, B, true>(xp, w, b.panel_bytes, b.k_steps, task->last_pairs, out);
    Tile<MR, NP, B, false>(xp, w, b.panel_bytes, b.k_steps, task->last_pairs, out);
  }
  template <int MR>
  void Run(int np, const uint32_t* xp, const uint8_t* w, float* out) const {
    if constexpr (Fits(B, MR, 4)) {
      if (np == 4) return RunNp<MR, 4>(xp, w, out);
    }
    if constexpr (Fits(B, MR, 2)) {
      if (np == 2) return RunNp<MR, 2>(xp, w, out);
    }
    if constexpr (Fits(B, MR, 1)) return RunNp<MR, 1>(xp, w, out);
  }
  void operator()(int mr, int np, const float* xp, const uint8_t* w, float* out) const {
    const auto* pairs = reinterpret_cast<const uint32_t*>(xp);
    gemm::WithTileHeight(mr, [&](auto height) { Run<decltype(height)::value>(np, pairs, w, out); });
  }
};

// WidenBfpPanelBf16 for one format and widening: TileStep's operands stored, not multiplied.
template <int B, bool kPlain>
WC_GEMM_BFP_DOT void WidenPanel(const uint8_t* __restrict panel, int64_t k_tiles,
                                uint32_t* __restrict out) {
  constexpr int64_t kTileBytes = B == 7 ? 1088 : 576;
  const Consts c = LoadConsts();
  alignas(64) uint32_t drop[32];  // [2 kp + h]
  for (int64_t tk = 0; tk < k_tiles; ++tk) {
    const uint8_t* tile = panel + tk * kTileBytes;
    uint32_t* o = out + tk * 16 * 32;  // [16 kp][32 rows]
    Drops(tile, 127 + B - 1, drop);
    if constexpr (B == 7) {
#pragma GCC unroll 4
      for (int kp = 0; kp < 16; ++kp) {
        const __m512i code = _mm512_load_si512(tile + 64 + 64 * kp);
        __m512i w0, w1;
        WidenBfp8Pair(c, code, &w0, &w1);
        _mm512_store_si512(o + kp * 32, Apply<kPlain>(w0, drop[2 * kp]));
        _mm512_store_si512(o + kp * 32 + 16, Apply<kPlain>(w1, drop[2 * kp + 1]));
      }
    } else {
      for (int g = 0; g < 4; ++g) {
        const __m512i c0 = _mm512_load_si512(tile + 64 + 128 * g);
        const __m512i c1 = _mm512_load_si512(tile + 64 + 128 * g + 64);
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
          const int kp = 4 * g + q;
          _mm512_store_si512(o + kp * 32, Apply<kPlain>(WidenBfp4Pair(c, c0, q), drop[2 * kp]));
          _mm512_store_si512(o + kp * 32 + 16,
                             Apply<kPlain>(WidenBfp4Pair(c, c1, q), drop[2 * kp + 1]));
        }
      }
    }
  }
}

}  // namespace

void WidenBfpPanelBf16(const uint8_t* panel, int64_t k_tiles, int magnitude_bits, bool plain,
                       uint32_t* out) {
  if (magnitude_bits == 7) {
    return plain ? WidenPanel<7, true>(panel, k_tiles, out)
                 : WidenPanel<7, false>(panel, k_tiles, out);
  }
  return plain ? WidenPanel<3, true>(panel, k_tiles, out)
               : WidenPanel<3, false>(panel, k_tiles, out);
}

int BfpDotTileTokens(int magnitude_bits) {
  return AccBudget(magnitude_bits) / 2;
}

void GemmBfpDotRange(const gemm::BfpTask& task, int64_t pa, int64_t pb) {
  if (task.magnitude_bits == 7) {
    gemm::RunPanels(task.base, pa, pb, TileFn<7>{&task});
  } else {
    gemm::RunPanels(task.base, pa, pb, TileFn<3>{&task});
  }
}

}  // namespace wc
