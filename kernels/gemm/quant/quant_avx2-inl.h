// What the quantized GEMM's two AVX2 kernels share (quant_gemm_avx2.cpp, the register tiles;
// quant_gemm_avx2_expanded.cpp, many tokens): loads of the packed group blocks (quant_panels.h),
// the K types' scale vectors, the Q5 types' 5th bits, the store of a tile's rows, and the sums
// kept in registers (also bfp_int8_avx2.cpp's). Included
// inside each file's `#pragma GCC target("avx2,fma,f16c")` region, in namespace wc::x86.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/gemm/quant/quant_panels.h"

namespace wc::x86::quant_avx2 {

constexpr int kR = QuantPanels::kGroupRows;

// A tile's integer sums (4 tokens' or 1's) held in registers at this point: GCC 12 otherwise
// unrolls the k steps, reassociates the integer adds and keeps the products on the stack, each add
// then waiting on a store and a load (a tile ran at two thirds of its rate; docs/performance.md,
// "the AVX2 integer tiles in registers").
inline void PinSums(__m256i (&s)[4]) {
  __asm__("" : "+x"(s[0]), "+x"(s[1]), "+x"(s[2]), "+x"(s[3]));
}
inline void PinSums(__m256i (&s)[1]) {
  __asm__("" : "+x"(s[0]));
}

// 4 activation bytes at p in every 32-bit lane.
inline __m256i Bcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

inline __m256i Load(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// The 8 rows' f16 fields at p, as f32 (exact).
inline __m256 Halves(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// 8 bytes (one per row) at p as each row's 32-bit lane holding the value twice as 16-bit halves:
// vpmaddwd by it multiplies both of a lane's pair sums by the row's value. Unsigned or signed.
inline __m256i ScalePairsU8(const uint8_t* p) {
  const __m256i s = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_or_si256(s, _mm256_slli_epi32(s, 16));
}
inline __m256i ScalePairsI8(const uint8_t* p) {
  const __m256i s = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_or_si256(_mm256_and_si256(s, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(s, 16));
}

// Bits [shift, shift + 4) of each row's 32-bit word in qh, as byte b of the row's lane set to 0x10
// when bit shift + b is: the 5th bits of 4 codes.
inline __m256i FifthBits(__m256i qh, int shift) {
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12, 0, 0,
                                          0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12);
  const __m256i bit = _mm256_set1_epi32(0x08040201);
  const __m256i b = _mm256_shuffle_epi8(_mm256_srl_epi32(qh, _mm_cvtsi32_si128(shift)), spread);
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(b, bit), bit), _mm256_set1_epi8(0x10));
}

// Prefetches the block that starts kPrefetchBytes past blk (gbytes long) into L1. A group's
// blocks, and the groups of a thread's range, are one forward stream, but within a block the
// kernels read several interleaved runs (Q6_K's low nibbles, their other half and the top bits),
// which the hardware prefetchers did not follow: one token over a 23040 x 3072 Q6_K matrix read
// 3.2 GB/s on one thread without this, 7.9 with it (docs/performance.md, "Prefetching the next
// blocks"). Past the end of the matrix a prefetch is a no-op, never a fault.
constexpr int64_t kPrefetchBytes = 6 << 10;
inline void PrefetchAhead(const uint8_t* blk, int64_t gbytes) {
  for (int64_t o = 0; o < gbytes; o += 64)
    _mm_prefetch(reinterpret_cast<const char*>(blk + kPrefetchBytes + o), _MM_HINT_T0);
}

// Tokens [t0, t0 + NT) of group g's accumulators into y: rows [max(8 g, row_begin), min(8 g + 8,
// row_end)), plus the bias (one addition).
template <int NT>
void StoreTile(const __m256 (&acc)[NT], int64_t t0, int64_t g, const float* bias, float* y,
               int64_t y_stride, int64_t row_begin, int64_t row_end) {
  const int64_t r0 = std::max(g * kR, row_begin), r1 = std::min(g * kR + kR, row_end);
  alignas(32) float v[kR];
  for (int t = 0; t < NT; ++t) {
    _mm256_store_ps(v, acc[t]);
    for (int64_t r = r0; r < r1; ++r) {
      const float a = v[r - g * kR];
      y[(t0 + t) * y_stride + (r - row_begin)] = bias ? a + bias[r] : a;
    }
  }
}

}  // namespace wc::x86::quant_avx2
