// Block-float weights with int8 activations on AVX2 (bfp_int8.h's contract, quant_gemm_x86.h):
// vpmaddubsw multiplies unsigned weight bytes by signed activation bytes, so each weight enters as
// |q| with its sign moved onto the activation (vpsignb), as llama.cpp's Q8_0 AVX2 kernel does:
// a pair of products is at most 2 x 127 x 127 < 2^15, so the 16-bit sums never saturate, and
// vpmaddwd by ones widens them to exact int32 lanes. A register holds a quarter tile: 8 rows (one
// 32-bit lane each, 4 consecutive k) x 4 k, the half tile's layout (bfp_int8.h) read 32 bytes at a
// time. A bfp4 quarter tile is expanded once per chunk of tokens into |q| and a sign source in L1
// (nibbles looked up, then each byte multiplied by its k's 2^shift in 16-bit lanes), then
// multiplied by every token of the chunk, as quant_gemm_avx2_expanded.cpp runs the GGML types.
// A bfp8 quarter tile's codes are q already: each tile reads them in place and makes |q| with one
// vpabsb (DirectTileOverBlocks; 8 decoding rows +25%, 32 rows +9%, prefill level, against
// expanding them: docs/performance.md "bfp8 int8's signed tile unpinned"). In calls of 16 tokens
// or more, a segment's |q| and sign masks are made once into L1 and 8 tokens a tile take q's sign
// by vpxor, not vpsignb (DirectTile8; docs/performance.md "bfp8 int8 in 8-token tiles").
// bfp8's chunks are 512 tokens, its segments outer to a panel's quarters (Quarters). Calls of
// 8-15 tokens (8 decoding rows) run their first 8 over a whole panel, its quarters inner to each
// block, so that both half streams are read from memory at one pace (DirectTile8, kSigned).
// With int7 (7-bit activations) the 8-token tiles multiply x + 64 by q as it lies and take
// 64 sum q off once a block (DirectTile8, kOffset): no sign pass and no sign step.
// bfp8's tiles are in bfp8_int8_tiles_avx2-inl.h, bfp4's in bfp4_int8_tiles_avx2-inl.h; this
// file runs them over chunks, panels and segments, and holds the one-token tile.
// A bfp4 quarter tile whose q are all multiples of 4 is expanded as q / 4 instead, against the
// chunk's codes made unsigned (x + 128): no sign step, and two vpmaddubsw results add in 16 bits
// before each vpmaddwd (ExpandQuarter's comment; bfp4 prefill 160 -> 201 tok/s on B,
// docs/performance.md "bfp4 quarter tiles in 16-bit sums").
// bfp8's one token (decode) expands nothing and reads each half tile once for both its quarters
// (OneTokenBfp8); so do bfp4's calls of up to 6 tokens, multiplying 16-bit words (Bfp4Words,
// Bfp4WordTile: 2 decoding rows 1.7x, one row 1.1x, docs/performance.md "bfp4 int8 in 16-bit
// words").
// Integer sums are exact and the float steps the contract's, so the bits are the portable and
// VNNI kernels'.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/gemm/bfp/bfp_int8.h"
#include "kernels/gemm/bfp/gemm_bfp.h"
#include "kernels/gemm/gemm_schedule.h"
#include "kernels/gemm/quant/quant_gemm_x86.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#include "kernels/gemm/quant/quant_avx2-inl.h"

namespace wc::x86 {
namespace {

using namespace quant_avx2;  // NOLINT: the helpers the AVX2 integer kernels share
constexpr int kTile = 4;     // tokens a tile holds in registers
// A chunk's activation codes and a segment's expanded quarter tiles (in L1), as the GGML types'
// expanded kernel sizes them.
constexpr int64_t kChunkBytes = 1 << 20;
// bfp8's chunk (tokens), at any width: a segment's sign pass and its weights' reads then count
// once for 512 tokens, which outweighs the chunk's codes no longer fitting in L2 (at 18176 columns
// 56-token chunks ran 10% slower; docs/performance.md "bfp8 int8: signs made once a segment,
// chunks of 512").
constexpr int64_t kBfp8Chunk = 512;
constexpr int64_t kSegmentBytes = 16 << 10;
// The quarter tiles of a group lie a tile apart; the one this many tiles ahead is asked for (the
// VNNI loop's distance, quant_gemm_vnni.cpp).
constexpr int64_t kPrefetchTiles = 8;

#include "kernels/gemm/bfp/bfp8_int8_tiles_avx2-inl.h"
// After bfp8's: its tiles end in the float step defined there (ContractStep).
#include "kernels/gemm/bfp/bfp4_int8_tiles_avx2-inl.h"

// bfp8, one token: nothing expanded to memory, each half tile read once for both its quarters
// (8 rows each), |q| and q's sign onto the activation as TileOverBlocks does. The integer sums are
// the expanded kernel's, so the bits are; decode reads each weight once and spends a fraction of
// the expanded path's instructions on it. (bfp4's calls of few tokens: Bfp4Words.)
void OneTokenBfp8(const QuantInput& x, const BfpPanels& w, const float* bias, float* y,
                  int64_t y_stride, int64_t row_begin, int64_t row_end, int64_t pa, int64_t pb) {
  constexpr BfpFormat F = BfpFormat::kBfp8;
  const int64_t nb = w.k_tiles(), half_bytes = BfpInt8HalfBytes(F);
  const __m256i ones = _mm256_set1_epi16(1);
  const int8_t* codes = x.Codes(0);
  const float* dx = x.Dx(0);
  for (int64_t p = pa; p < pb; ++p)
    for (int64_t h = 0; h < 2; ++h) {
      const int64_t g0 = 4 * p + 2 * h;  // quarter s: rows 8 (g0 + s) .. + 8
      if (8 * g0 >= row_end || 8 * g0 + 16 <= row_begin) continue;
      __m256 acc[2][1] = {{_mm256_setzero_ps()}, {_mm256_setzero_ps()}};
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* half = w.data() + p * w.panel_bytes() + BfpInt8HalfOffset(F, nb, b, h);
        if (b + kPrefetchTiles < nb)
          for (int64_t o = 0; o < half_bytes; o += 64)
            _mm_prefetch(reinterpret_cast<const char*>(half + kPrefetchTiles * half_bytes + o),
                         _MM_HINT_T0);
        const int8_t* xq = codes + 32 * b;
        const __m256 scale = _mm256_set1_ps(w.Int8Scale(p, b, h) * dx[b]);
        for (int s = 0; s < 2; ++s) {
          __m256i isum = _mm256_setzero_si256();
          for (int v = 0; v < 8; ++v) {
            const __m256i q = Load(half + 32 + 64 * v + 32 * s);
            const __m256i xs8 = _mm256_sign_epi8(Bcast4(xq + 4 * v), q);
            isum = _mm256_add_epi32(
                isum, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(q), xs8), ones));
          }
          acc[s][0] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(isum), acc[s][0]);
        }
      }
      // StoreTile writes only the rows in [row_begin, row_end).
      for (int s = 0; s < 2; ++s)
        StoreTile<1>(acc[s], 0, g0 + s, bias, y, y_stride, row_begin, row_end);
    }
}

// bfp4, calls of 1..kBfp4WordTokens tokens: every token at once over each half of each panel.
template <int NT>
void Bfp4Words(const QuantInput& x, const BfpPanels& w, const float* bias, float* y,
               int64_t y_stride, int64_t row_begin, int64_t row_end, int64_t pa, int64_t pb) {
  for (int64_t p = pa; p < pb; ++p)
    for (int64_t h = 0; h < 2; ++h) {
      const int64_t g0 = 4 * p + 2 * h;
      if (8 * g0 >= row_end || 8 * g0 + 16 <= row_begin) continue;
      __m256 acc[2][NT];
      Bfp4WordTile<NT>(w, p, h, x, 0, acc);
      for (int s = 0; s < 2; ++s)
        StoreTile<NT>(acc[s], 0, g0 + s, bias, y, y_stride, row_begin, row_end);
    }
}

template <BfpFormat F>
void Quarters(const QuantInput& x, const BfpPanels& w, const float* bias, float* y,
              int64_t y_stride, int64_t row_begin, int64_t row_end, int64_t pa, int64_t pb) {
  // Tokens a chunk: bfp4's codes within kChunkBytes (in L2); bfp8's kBfp8Chunk whatever the width.
  const int64_t chunk =
      F == BfpFormat::kBfp8
          ? kBfp8Chunk
          : std::max<int64_t>(
                8, std::min<int64_t>(512, kChunkBytes / std::max<int64_t>(1, x.cols)) / 8 * 8);
  constexpr int64_t kSegmentBlocks = std::max<int64_t>(1, kSegmentBytes / (kStride * 32));
  // bfp4: [kSegmentBlocks][kStride] expanded vectors; bfp8: [kSegmentBlocks][kSignBytes] the
  // segment's signs and magnitudes. And [4 quarters][chunk][8] accumulators. This thread's
  // (64-byte aligned).
  auto* ex = static_cast<__m256i*>(gemm::ThreadBuffer<gemm::kQuantExpandedSlot>(
      static_cast<size_t>(kSegmentBlocks * std::max<int64_t>(kStride * 32, kSignBytes))));
  auto* signs = reinterpret_cast<uint8_t*>(ex);
  auto* acc_buf = static_cast<float*>(
      gemm::ThreadBuffer<gemm::kQuantAccSlot>(static_cast<size_t>(4 * chunk * kR * 4)));
  bool quartered[kSegmentBlocks];
  __m256i corrections[kSegmentBlocks];  // bfp8: the segment's Corrections, block s0 first
  const int64_t nb = w.k_tiles();
  // int7 (bfp_int8.h): the 8-token tiles multiply x + 64 by q in place, their sums started at
  // Int7Correction, and no sign pass is made.
  const bool offset = x.code_max == 63 && !x.codes_by8.empty();
  // Quarter `quarter` of panel p from block b on: bfp8's codes (its 8 vectors, a half tile apart
  // from block to block) and its dW (two floats apart).
  const auto quarter_codes = [&](int64_t p, int64_t quarter, int64_t b) {
    return w.data() + p * w.panel_bytes() + BfpInt8HalfOffset(F, nb, b, quarter / 2) + 32 +
           32 * (quarter % 2);
  };
  const auto quarter_scales = [&](int64_t p, int64_t quarter, int64_t b) {
    return w.int8_scales() + (p * nb + b) * 2 + quarter / 2;
  };
  for (int64_t c0 = 0; c0 < x.n_tokens; c0 += chunk) {
    const int64_t c1 = std::min(x.n_tokens, c0 + chunk);
    // A panel's segments in order, its 4 quarters a segment: the chunk's codes of a segment are
    // then read 4 times running (from L2, 480 KiB at 512 tokens), not once a quarter over the
    // whole chunk's (from L3 at 512 tokens).
    for (int64_t p = pa; p < pb; ++p) {
      // bfp8 calls of under 16 tokens (decoding rows, verify steps) stream their weights from
      // memory: each token tile runs over the whole panel with its quarters inner to each block
      // (DirectTile8 kSigned or kOffset for 8 tokens, DirectTileOverBlocks for 4 and the last 1-3),
      // so both halves are read at one pace. Later tiles find the panel in L2; the first
      // prefetches.
      if constexpr (F == BfpFormat::kBfp8)
        if (x.n_tokens < kSignPassTokens) {
          const uint8_t* codes[4];
          const float* scales[4];
          float* acc[4];
          bool prefetch[4];
          int64_t groups[4];
          int nq = 0;
          for (int64_t quarter = 0; quarter < 4; ++quarter) {
            const int64_t g = 4 * p + quarter;
            if (8 * g >= row_end || 8 * g + 8 <= row_begin) continue;
            codes[nq] = quarter_codes(p, quarter, 0);
            scales[nq] = quarter_scales(p, quarter, 0);
            acc[nq] = acc_buf + quarter * chunk * kR;
            prefetch[nq] = nq == 0 || groups[nq - 1] / 2 != g / 2;  // the half's first quarter
            groups[nq++] = g;
          }
          // Tokens [t, t + NT) over the panel, into y.
          const auto tile = [&](auto nt, int64_t t) {
            constexpr int NT = decltype(nt)::value;
            for (int i = 0; i < nq; ++i) std::memset(acc[i], 0, sizeof(float) * NT * kR);
            const bool* ask = t == c0 ? prefetch : nullptr;
            if constexpr (NT == 8) {
              if (offset)
                DirectTile8<Tile8Form::kOffset>(codes, scales, nullptr, nq, 0, nb, x, t / 8, ask,
                                                acc);
              else
                DirectTile8<Tile8Form::kSigned>(codes, scales, nullptr, nq, 0, nb, x, t / 8, ask,
                                                acc);
            } else
              DirectTileOverBlocks<NT>(codes, scales, nq, 0, nb, x, t, ask, acc);
            for (int i = 0; i < nq; ++i) {
              __m256 sums[NT];
              for (int j = 0; j < NT; ++j) sums[j] = _mm256_load_ps(acc[i] + j * kR);
              StoreTile<NT>(sums, t, groups[i], bias, y, y_stride, row_begin, row_end);
            }
          };
          int64_t t = c0;
          if (!x.codes_by8.empty() && t + 8 <= c1) {
            tile(std::integral_constant<int, 8>(), t);
            t += 8;
          }
          for (; t + kTile <= c1; t += kTile) tile(std::integral_constant<int, kTile>(), t);
          // The last 1-3 in one pass over the panel.
          if (c1 - t == 3) tile(std::integral_constant<int, 3>(), t);
          if (c1 - t == 2) tile(std::integral_constant<int, 2>(), t);
          if (c1 - t == 1) tile(std::integral_constant<int, 1>(), t);
          continue;
        }
      for (int64_t s0 = 0; s0 < nb; s0 += kSegmentBlocks) {
        const int64_t s1 = std::min(nb, s0 + kSegmentBlocks);
        for (int64_t quarter = 0; quarter < 4; ++quarter) {
          const int64_t g = 4 * p + quarter;  // rows 8 g .. 8 g + 8
          if (8 * g >= row_end || 8 * g + 8 <= row_begin) continue;
          float* const acc_q = acc_buf + quarter * chunk * kR;  // this quarter's [chunk][8]
          // bfp8's codes, from block s0 on.
          const uint8_t* codes = quarter_codes(p, quarter, s0);
          if constexpr (F == BfpFormat::kBfp4) {
            for (int64_t b = s0; b < s1; ++b)
              quartered[b - s0] = ExpandQuarter(w, p, quarter, b, ex + (b - s0) * kStride);
          } else {
            // bfp8 calls of 16 tokens or more (the rest ran above): the sign pass, the first
            // read of the segment's codes, so the one that prefetches (the 8-token tiles read
            // only what it writes, in L1). int7's pass makes the corrections alone, and its
            // tiles read the codes it brought into L1.
            for (int64_t b = s0; b < s1; ++b) {
              const uint8_t* q8 = codes + (b - s0) * BfpInt8HalfBytes(F);
              PrefetchHalfAhead(q8, b, nb);
              corrections[b - s0] = offset ? Int7Correction(q8)
                                           : SignsAndMagnitudes(q8, signs + (b - s0) * kSignBytes);
            }
          }
          const bool first = s0 == 0, last = s1 == nb;
          const float* scales = quarter_scales(p, quarter, s0);
          int64_t t = c0;
          if constexpr (F == BfpFormat::kBfp8) {
            // 8-token groups, their float sums in L1 (acc_buf) between blocks as between
            // segments; DirectTileOverBlocks takes the rest below.
            if (!x.codes_by8.empty())
              for (; t + 8 <= c1; t += 8) {
                float* acc = acc_q + (t - c0) * kR;
                if (first) std::memset(acc, 0, sizeof(float) * 8 * kR);
                if (offset) {
                  DirectTile8<Tile8Form::kOffset>(&codes, &scales, corrections, 1, s0, s1, x, t / 8,
                                                  nullptr, &acc);
                } else {
                  const uint8_t* block0 = signs;
                  DirectTile8<Tile8Form::kSignPass>(&block0, &scales, corrections, 1, s0, s1, x,
                                                    t / 8, nullptr, &acc);
                }
                if (last) {
                  __m256 sums[8];
                  for (int i = 0; i < 8; ++i) sums[i] = _mm256_load_ps(acc + i * kR);
                  StoreTile<8>(sums, t, g, bias, y, y_stride, row_begin, row_end);
                }
              }
          }
          const auto tile = [&](auto nt, int64_t t) {
            constexpr int NT = decltype(nt)::value;
            float* const acc_t = acc_q + (t - c0) * kR;  // [NT][8]
            __m256 acc[NT];
            if constexpr (F == BfpFormat::kBfp8) {
              // The tail past the 8-token groups; the sign pass made the first read of the
              // segment's codes.
              if (first) std::memset(acc_t, 0, sizeof(float) * NT * kR);
              DirectTileOverBlocks<NT>(&codes, &scales, 1, s0, s1, x, t, nullptr, &acc_t);
              for (int i = 0; i < NT; ++i) acc[i] = _mm256_load_ps(acc_t + i * kR);
            } else {
              for (int i = 0; i < NT; ++i)
                acc[i] = first ? _mm256_setzero_ps() : _mm256_load_ps(acc_t + i * kR);
              TileOverBlocks<NT>(ex, quartered, s0, s1, x, t, acc);
            }
            if (last)
              StoreTile<NT>(acc, t, g, bias, y, y_stride, row_begin, row_end);
            else
              for (int i = 0; i < NT; ++i) _mm256_store_ps(acc_t + i * kR, acc[i]);
          };
          for (; t + kTile <= c1; t += kTile) tile(std::integral_constant<int, kTile>(), t);
          for (; t < c1; ++t) tile(std::integral_constant<int, 1>(), t);
        }
      }
    }
  }
}

}  // namespace

void BfpInt8Avx2(const QuantInput& x, const BfpPanels& w, const float* bias, float* y,
                 int64_t y_stride, int64_t row_begin, int64_t row_end, int64_t pa, int64_t pb) {
  if (w.format() == BfpFormat::kBfp8) {
    if (x.n_tokens == 1)
      OneTokenBfp8(x, w, bias, y, y_stride, row_begin, row_end, pa, pb);
    else
      Quarters<BfpFormat::kBfp8>(x, w, bias, y, y_stride, row_begin, row_end, pa, pb);
    return;
  }
  if (x.n_tokens > kBfp4WordTokens)
    return Quarters<BfpFormat::kBfp4>(x, w, bias, y, y_stride, row_begin, row_end, pa, pb);
  gemm::WithTileHeight(static_cast<int>(x.n_tokens), [&](auto nt) {
    constexpr int NT = decltype(nt)::value;
    if constexpr (NT <= kBfp4WordTokens)
      Bfp4Words<NT>(x, w, bias, y, y_stride, row_begin, row_end, pa, pb);
  });
}

}  // namespace wc::x86

#pragma GCC pop_options
