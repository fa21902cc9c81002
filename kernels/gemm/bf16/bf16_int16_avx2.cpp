// BF16 weights as int16 codes times 12-bit activations on AVX2 (bf16_int16.h's contract, bit for
// bit): a register holds 8 rows' (k, k + 1) code pairs as the panels store them, vpmaddwd
// multiplies it by a token's broadcast pair into 8 exact int32 sums of two products (16 products
// an instruction, an FMA's 8), and vpaddd sums a block's 16 pairs. Each block's sums go into the
// f32 accumulators once, as the contract's step. A tile is a whole panel (4 quarters of 8 rows) x
// 3 tokens in prefill, x 1 token in decode (each weight line read once, in order); its 12 sums
// stay in registers and the weights are read from L1 as vpmaddwd's memory operand, so a k pair
// costs 3 broadcasts for 12 products' instructions (2 quarters x 4 tokens, weights in registers,
// ran 10% slower: docs/performance.md, "BF16 weights in 16-bit integers"). Calls of many tokens
// take the activations in chunks that stay in L2 and the weights in segments of 8 blocks (16 KiB
// of the panel) that stay in L1 while every tile of the chunk passes over them.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/gemm/bf16/bf16_int16.h"
#include "kernels/gemm/gemm_schedule.h"
#include "kernels/gemm/packed_matrix.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#include "kernels/gemm/quant/quant_avx2-inl.h"

namespace wc::x86 {
namespace {

using quant_avx2::StoreTile;
constexpr int kBlock = 32;                // k a scale covers
constexpr int kPanel = 32;                // rows a panel
constexpr int64_t kChunkBytes = 1 << 20;  // a chunk's activation codes (L2)
constexpr int64_t kSegment = 8;           // blocks a segment (32 rows x 256 k x 2 B = 16 KiB)

// dW = 2^e of 8 rows' exponent bytes e (-126 .. 113: normal floats).
inline __m256 RowScales(const int8_t* e) {
  int64_t bytes;
  std::memcpy(&bytes, e, 8);
  const __m256i v = _mm256_cvtepi8_epi32(_mm_cvtsi64_si128(bytes));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(v, _mm256_set1_epi32(127)), 23));
}

inline __m256i PairOf(const int16_t* x) {
  int32_t pair;
  std::memcpy(&pair, x, 4);
  return _mm256_set1_epi32(pair);
}

// The block's sums held in registers across a k pair: GCC 12 otherwise unrolls the pairs, sums
// the products in another order (integer adds reassociate) and keeps most of them on the stack,
// and the tile ran at about half its rate. The tiles used: 4 quarters x 3 tokens, 4 x 1.
inline void Pin(__m256i (&s)[4][3]) {
  __asm__(""
          : "+x"(s[0][0]), "+x"(s[0][1]), "+x"(s[0][2]), "+x"(s[1][0]), "+x"(s[1][1]),
            "+x"(s[1][2]), "+x"(s[2][0]), "+x"(s[2][1]), "+x"(s[2][2]), "+x"(s[3][0]),
            "+x"(s[3][1]), "+x"(s[3][2]));
}
inline void Pin(__m256i (&s)[4][1]) {
  __asm__("" : "+x"(s[0][0]), "+x"(s[1][0]), "+x"(s[2][0]), "+x"(s[3][0]));
}

// A panel's 4 quarters (rows 8 q .. 8 q + 8; `panel` its codes, `exps` its [blocks][32]
// exponents) for tokens [t0, t0 + NT) of x over blocks [b0, b1): acc[q][t] carried on with the
// contract's step.
template <int NT>
void TileOverBlocks(const int16_t* panel, const int8_t* exps, const Int16Input& x, int64_t t0,
                    int64_t b0, int64_t b1, __m256 (&acc)[4][NT]) {
  const int16_t* xt[NT];
  const float* dx[NT];
  for (int t = 0; t < NT; ++t) {
    xt[t] = x.Codes(t0 + t);
    dx[t] = x.Dx(t0 + t);
  }
  for (int64_t b = b0; b < b1; ++b) {
    __m256i s[4][NT];
    for (int q = 0; q < 4; ++q)
      for (int t = 0; t < NT; ++t) s[q][t] = _mm256_setzero_si256();
    const int16_t* wb = panel + b * kBlock * kPanel;  // the block's 16 pairs x 32 rows x 2
#pragma GCC unroll 2
    for (int j = 0; j < kBlock / 2; ++j) {
      const auto* wj = reinterpret_cast<const __m256i*>(wb + j * 2 * kPanel);
      for (int t = 0; t < NT; ++t) {
        const __m256i xp = PairOf(xt[t] + b * kBlock + 2 * j);
        for (int q = 0; q < 4; ++q)
          s[q][t] = _mm256_add_epi32(s[q][t], _mm256_madd_epi16(_mm256_load_si256(wj + q), xp));
      }
      Pin(s);
    }
    for (int q = 0; q < 4; ++q) {
      const __m256 dw = RowScales(exps + b * kPanel + 8 * q);
      for (int t = 0; t < NT; ++t)
        acc[q][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(dx[t][b])),
                                    _mm256_cvtepi32_ps(s[q][t]), acc[q][t]);
    }
  }
}

// One token: the panel's 4 quarters together, every weight line read once, in order.
void OneToken(const Int16Input& x, const PackedMatrix& w, const float* bias, float* y,
              int64_t y_stride, int64_t row_begin, int64_t row_end, int64_t pa, int64_t pb) {
  const int64_t nb = w.padded_cols() / kBlock;
  for (int64_t p = pa; p < pb; ++p) {
    __m256 acc[4][1];
    for (auto& a : acc) a[0] = _mm256_setzero_ps();
    TileOverBlocks<1>(w.int16_codes() + p * w.panel_elems(), w.int16_exps() + p * nb * kPanel, x, 0,
                      0, nb, acc);
    for (int q = 0; q < 4; ++q)
      StoreTile<1>(acc[q], 0, 4 * p + q, bias, y, y_stride, row_begin, row_end);
  }
}

// Many tokens: chunks of tokens, then for each panel segments of blocks, each passed over by every
// tile of the chunk while it is in L1.
void Chunked(const Int16Input& x, const PackedMatrix& w, const float* bias, float* y,
             int64_t y_stride, int64_t row_begin, int64_t row_end, int64_t pa, int64_t pb) {
  constexpr int kTile = 3;  // tokens a tile (4 quarters x 3 tokens: 12 sums in registers)
  const int64_t nb = w.padded_cols() / kBlock;
  const int64_t chunk =
      std::max<int64_t>(kTile, std::min<int64_t>(510, kChunkBytes / (2 * x.cols)) / kTile * kTile);
  // [chunk][4 quarters][8] accumulators between segments, this thread's (64-byte aligned).
  auto* acc_buf = static_cast<float*>(
      gemm::ThreadBuffer<gemm::kQuantAccSlot>(static_cast<size_t>(chunk * kPanel * 4)));
  for (int64_t c0 = 0; c0 < x.n_tokens; c0 += chunk) {
    const int64_t c1 = std::min(x.n_tokens, c0 + chunk);
    for (int64_t p = pa; p < pb; ++p) {
      const int16_t* panel = w.int16_codes() + p * w.panel_elems();
      const int8_t* exps = w.int16_exps() + p * nb * kPanel;
      for (int64_t s0 = 0; s0 < nb; s0 += kSegment) {
        const int64_t s1 = std::min(nb, s0 + kSegment);
        const bool first = s0 == 0, last = s1 == nb;
        const auto tile = [&](auto nt, int64_t t) {
          constexpr int NT = decltype(nt)::value;
          __m256 acc[4][NT];
          for (int q = 0; q < 4; ++q)
            for (int i = 0; i < NT; ++i)
              acc[q][i] = first ? _mm256_setzero_ps()
                                : _mm256_load_ps(acc_buf + ((t - c0 + i) * 4 + q) * 8);
          TileOverBlocks<NT>(panel, exps, x, t, s0, s1, acc);
          for (int q = 0; q < 4; ++q) {
            if (last)
              StoreTile<NT>(acc[q], t, 4 * p + q, bias, y, y_stride, row_begin, row_end);
            else
              for (int i = 0; i < NT; ++i)
                _mm256_store_ps(acc_buf + ((t - c0 + i) * 4 + q) * 8, acc[q][i]);
          }
        };
        int64_t t = c0;
        for (; t + kTile <= c1; t += kTile) tile(std::integral_constant<int, kTile>(), t);
        for (; t < c1; ++t) tile(std::integral_constant<int, 1>(), t);
      }
    }
  }
}

}  // namespace

void Int16Avx2Range(const Int16Input& x, const PackedMatrix& w, const float* bias, float* y,
                    int64_t y_stride, int64_t row_begin, int64_t row_end, int64_t pa, int64_t pb) {
  if (x.n_tokens == 1)
    OneToken(x, w, bias, y, y_stride, row_begin, row_end, pa, pb);
  else
    Chunked(x, w, bias, y, y_stride, row_begin, row_end, pa, pb);
}

}  // namespace wc::x86

#pragma GCC pop_options
