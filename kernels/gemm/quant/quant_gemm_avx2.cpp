// The quantized GEMM on AVX2 (quant_gemm_x86.h): vpmaddubsw multiplies a group's unsigned codes
// (lane r = 4 codes of row r, quant_panels.h) by 4 broadcast activation bytes, vpmaddwd sums the
// pairs into 32-bit lanes (times 1, or times a K type's sub-block scale), so 8 rows' block sums
// build up in one register per token with no horizontal sum. Highway 1.0.3 (Debian 12) has no
// vpmaddubsw op, so these are intrinsics, compiled for AVX2 + FMA + F16C and called only where the
// CPU has them. Every integer sum is exact and every float step is the contract's (quant_gemm.h),
// so the results are the portable kernel's bits.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/gemm/quant/quant_gemm_x86.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#include "kernels/gemm/quant/quant_avx2-inl.h"

namespace wc::x86 {
namespace {

using namespace quant_avx2;  // NOLINT: this file's own helpers (quant_avx2-inl.h)

// One group's tokens [t0, t0 + NT) over every block: acc[t] (8 rows) from +0 in the contract's
// order.
template <GgmlQuant T, int NT>
void Group(const QuantInput& x, const uint8_t* gp, int64_t gbytes, int64_t nb, int64_t t0,
           __m256 (&acc)[NT]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1);
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  constexpr bool kQ5 = T == GgmlQuant::kQ5_0 || T == GgmlQuant::kQ5_1;
  constexpr bool kMin = T == GgmlQuant::kQ4_1 || T == GgmlQuant::kQ5_1;
  constexpr int kCodes = QuantGroupCodesOffset(T);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = gp + b * gbytes;
    if constexpr (NT == 1) PrefetchAhead(blk, gbytes);
    __m256i isum[NT];
    for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
    if constexpr (T == GgmlQuant::kQ8_0) {
      for (int v = 0; v < 8; ++v) {
        const __m256i w = Load(blk + 16 + 32 * v);
        const __m256i aw = _mm256_sign_epi8(w, w);
        for (int t = 0; t < NT; ++t) {
          const __m256i xs = _mm256_sign_epi8(Bcast4(x.Codes(t0 + t) + 32 * b + 4 * v), w);
          isum[t] =
              _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, xs), ones));
        }
        PinSums(isum);
      }
    } else {
      __m256i qh = _mm256_setzero_si256();
      if constexpr (kQ5) qh = Load(blk + (kMin ? 32 : 16));
      for (int v = 0; v < 4; ++v) {
        const __m256i raw = Load(blk + kCodes + 32 * v);
        __m256i lo = _mm256_and_si256(raw, m4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
        if constexpr (kQ5) {
          lo = _mm256_or_si256(lo, FifthBits(qh, 4 * v));
          hi = _mm256_or_si256(hi, FifthBits(qh, 16 + 4 * v));
        }
        for (int t = 0; t < NT; ++t) {
          const int8_t* xq = x.Codes(t0 + t) + 32 * b;
          const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, Bcast4(xq + 4 * v)),
                                             _mm256_maddubs_epi16(hi, Bcast4(xq + 16 + 4 * v)));
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p, ones));
        }
        PinSums(isum);
      }
    }
    const __m256 d = Halves(blk);
    for (int t = 0; t < NT; ++t) {
      const float dx = x.Dx(t0 + t)[b];
      const int sum = x.Sums(t0 + t)[b];
      __m256i s = isum[t];
      if constexpr (T == GgmlQuant::kQ4_0) s = _mm256_sub_epi32(s, _mm256_set1_epi32(8 * sum));
      if constexpr (T == GgmlQuant::kQ5_0) s = _mm256_sub_epi32(s, _mm256_set1_epi32(16 * sum));
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(dx)), _mm256_cvtepi32_ps(s), acc[t]);
      if constexpr (kMin)
        acc[t] =
            _mm256_fmadd_ps(Halves(blk + 16), _mm256_set1_ps(dx * static_cast<float>(sum)), acc[t]);
    }
  }
}

// Q4_K / Q5_K: per super-block, each chunk c's 8 code vectors hold sub-blocks 2 c (low nibbles)
// and 2 c + 1 (high). Pair sums build up in 16 bits over at most 8 vectors of 4-bit codes
// (8 * 2 * 15 * 127 < 2^15) or 4 of 5-bit ones, then vpmaddwd by the sub-block's scale.
template <GgmlQuant T, int NT>
void GroupK4(const QuantInput& x, const uint8_t* gp, int64_t gbytes, int64_t nb, int64_t t0,
             __m256 (&acc)[NT]) {
  constexpr bool kQ5 = T == GgmlQuant::kQ5_K;
  constexpr int kRun = kQ5 ? 4 : 8;  // vectors a 16-bit sum may take
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = gp + b * gbytes;
    const uint8_t* codes = blk + (kQ5 ? 416 : 160);
    if constexpr (NT == 1) PrefetchAhead(blk, gbytes);
    __m256i isum[NT], msum[NT];
    for (int t = 0; t < NT; ++t) isum[t] = msum[t] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      for (int half = 0; half < 2; ++half) {  // sub-block 2 c + half
        const int sub = 2 * c + half;
        const __m256i sc = ScalePairsU8(blk + 32 + 8 * sub);
        for (int v0 = 0; v0 < 8; v0 += kRun) {
          __m256i p[NT];
          for (int t = 0; t < NT; ++t) p[t] = _mm256_setzero_si256();
          for (int v = v0; v < v0 + kRun; ++v) {
            const __m256i raw = Load(codes + 32 * (8 * c + v));
            __m256i q =
                half ? _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4) : _mm256_and_si256(raw, m4);
            if constexpr (kQ5) {
              // Bit 2 c + half of each qh byte, moved to 0x10.
              const __m256i h = Load(blk + 160 + 32 * v);
              const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << sub));
              q = _mm256_or_si256(q,
                                  _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit),
                                                   _mm256_set1_epi8(0x10)));
            }
            for (int t = 0; t < NT; ++t)
              p[t] = _mm256_add_epi16(
                  p[t],
                  _mm256_maddubs_epi16(q, Bcast4(x.Codes(t0 + t) + 256 * b + 32 * sub + 4 * v)));
          }
          for (int t = 0; t < NT; ++t)
            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p[t], sc));
        }
      }
    }
    for (int j = 0; j < 8; ++j) {
      const __m256i mins =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 96 + 8 * j)));
      for (int t = 0; t < NT; ++t) {
        const int16_t* bs = x.Sums(t0 + t) + 16 * b;
        msum[t] = _mm256_add_epi32(
            msum[t], _mm256_mullo_epi32(mins, _mm256_set1_epi32(bs[2 * j] + bs[2 * j + 1])));
      }
    }
    const __m256 d = Halves(blk), dmin = Halves(blk + 16);
    for (int t = 0; t < NT; ++t) {
      const __m256 dx = _mm256_set1_ps(x.Dx(t0 + t)[b]);
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(d, dx), _mm256_cvtepi32_ps(isum[t]), acc[t]);
      const __m256 neg = _mm256_xor_ps(_mm256_mul_ps(dmin, dx), _mm256_set1_ps(-0.0f));
      acc[t] = _mm256_fmadd_ps(neg, _mm256_cvtepi32_ps(msum[t]), acc[t]);
    }
  }
}

// Q6_K: for each n < 2 and v < 8, one qh vector (n, v) holds the top 2 bits of 4 code vectors:
// ql vector (n, v)'s low nibbles (values 128 n + 4 v + b, sub-block 8 n + v / 4, qh bits 0-1),
// ql (n, v + 8)'s low nibbles (+ 32, sub-block + 2, bits 2-3), ql (n, v)'s high nibbles (+ 64,
// sub-block + 4, bits 4-5) and ql (n, v + 8)'s high nibbles (+ 96, sub-block + 6, bits 6-7); so
// each qh vector is loaded once and its bits moved to 0x30 by one shift and one mask. 6-bit codes
// take 2 vectors per 16-bit sum (2 * 2 * 63 * 127 < 2^15). The - 32 of every code is taken off
// once per super-block: 32 sum_j sc_j bsum_j, two sub-blocks per vpmaddwd.
constexpr int kPrefetchBlocks = 8;
template <int NT>
void GroupQ6K(const QuantInput& x, const uint8_t* gp, int64_t gbytes, int64_t nb, int64_t t0,
              __m256 (&acc)[NT]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m30 = _mm256_set1_epi8(0x30);
  // Sub-block 2 i + j's scales from the 16 bytes of sub-blocks 2 i, 2 i + 1 in both halves:
  // lane r = (sc, sc) as 16-bit, by placing sc in each half's high byte, then an arithmetic shift.
  const __m256i pick[2] = {
      _mm256_setr_epi8(-1, 0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1, 4, -1, 4, -1, 5,
                       -1, 5, -1, 6, -1, 6, -1, 7, -1, 7),
      _mm256_setr_epi8(-1, 8, -1, 8, -1, 9, -1, 9, -1, 10, -1, 10, -1, 11, -1, 11, -1, 12, -1, 12,
                       -1, 13, -1, 13, -1, 14, -1, 14, -1, 15, -1, 15)};
  // Sub-blocks 2 i, 2 i + 1 interleaved: lane r = (sc_2i[r], sc_2i+1[r]) as bytes, then widened.
  const __m128i interleave = _mm_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = gp + b * gbytes;
    const uint8_t* scb = blk + 16;
    const uint8_t* ql = blk + 144;
    const uint8_t* qh = ql + 1024;
    if constexpr (NT == 1) PrefetchAhead(blk, gbytes);
    const int8_t* xb[NT];
    for (int t = 0; t < NT; ++t) xb[t] = x.Codes(t0 + t) + 256 * b;
    __m256i isum[NT];
    for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
    for (int n = 0; n < 2; ++n)
      for (int j = 0; j < 2; ++j) {  // v in [4 j, 4 j + 4): sub-blocks 8 n + j + 2 k
        __m256i sc[4];
        for (int k = 0; k < 4; ++k)
          sc[k] = _mm256_srai_epi16(
              _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128(
                                      reinterpret_cast<const __m128i*>(scb + 8 * (8 * n + 2 * k)))),
                                  pick[j]),
              8);
        for (int v0 = 4 * j; v0 < 4 * j + 4; v0 += 2) {
          __m256i p[4][NT];
          for (int v = v0; v < v0 + 2; ++v) {
            const __m256i h = Load(qh + 32 * (8 * n + v));
            const __m256i l0 = Load(ql + 32 * (16 * n + v));
            const __m256i l1 = Load(ql + 32 * (16 * n + v + 8));
            const __m256i q[4] = {_mm256_or_si256(_mm256_and_si256(l0, m4),
                                                  _mm256_and_si256(_mm256_slli_epi16(h, 4), m30)),
                                  _mm256_or_si256(_mm256_and_si256(l1, m4),
                                                  _mm256_and_si256(_mm256_slli_epi16(h, 2), m30)),
                                  _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                                  _mm256_and_si256(h, m30)),
                                  _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                                  _mm256_and_si256(_mm256_srli_epi16(h, 2), m30))};
            for (int k = 0; k < 4; ++k)
              for (int t = 0; t < NT; ++t) {
                const __m256i d =
                    _mm256_maddubs_epi16(q[k], Bcast4(xb[t] + 128 * n + 32 * k + 4 * v));
                p[k][t] = v == v0 ? d : _mm256_add_epi16(p[k][t], d);
              }
          }
          for (int k = 0; k < 4; ++k)
            for (int t = 0; t < NT; ++t)
              isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p[k][t], sc[k]));
        }
      }
    // - 32 sum_j sc_j bsum_j
    __m256i corr[NT];
    for (int i = 0; i < 8; ++i) {
      const __m256i sc2 = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(scb + 16 * i)), interleave));
      for (int t = 0; t < NT; ++t) {
        const __m256i m = _mm256_madd_epi16(sc2, Bcast4(x.Sums(t0 + t) + 16 * b + 2 * i));
        corr[t] = i == 0 ? m : _mm256_add_epi32(corr[t], m);
      }
    }
    const __m256 d = Halves(blk);
    for (int t = 0; t < NT; ++t) {
      const __m256i s = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(corr[t], 5));
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(x.Dx(t0 + t)[b])),
                               _mm256_cvtepi32_ps(s), acc[t]);
    }
  }
}

template <GgmlQuant T, int NT>
void Tile(const QuantInput& x, const QuantPanels& w, int64_t g, int64_t t0, __m256 (&acc)[NT]) {
  if constexpr (T == GgmlQuant::kQ4_K || T == GgmlQuant::kQ5_K)
    GroupK4<T, NT>(x, w.group(g), w.group_block_bytes(), w.blocks(), t0, acc);
  else if constexpr (T == GgmlQuant::kQ6_K)
    GroupQ6K<NT>(x, w.group(g), w.group_block_bytes(), w.blocks(), t0, acc);
  else
    Group<T, NT>(x, w.group(g), w.group_block_bytes(), w.blocks(), t0, acc);
}

template <GgmlQuant T>
void Groups(const QuantInput& x, const QuantPanels& w, const float* bias, float* y,
            int64_t y_stride, int64_t row_begin, int64_t row_end, int64_t g0, int64_t g1) {
  constexpr int kTile = IsKQuant(T) ? 2 : 4;  // tokens a tile holds (registers)
  for (int64_t g = g0; g < g1; ++g) {
    int64_t t0 = 0;
    for (; t0 + kTile <= x.n_tokens; t0 += kTile) {
      __m256 acc[kTile];
      Tile<T, kTile>(x, w, g, t0, acc);
      StoreTile<kTile>(acc, t0, g, bias, y, y_stride, row_begin, row_end);
    }
    for (; t0 < x.n_tokens; ++t0) {
      __m256 acc[1];
      Tile<T, 1>(x, w, g, t0, acc);
      StoreTile<1>(acc, t0, g, bias, y, y_stride, row_begin, row_end);
    }
  }
}

}  // namespace

bool QuantizeBlockAvx2(const float* x, int n, int8_t* q, int16_t* sums, int per_sum, int code_max,
                       float* dx) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8)
    m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask));
  // A NaN lane may have been dropped by vmaxps: look for one separately.
  __m256 nan = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  if (!_mm256_testz_ps(nan, nan)) return false;
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
  const float amax = _mm_cvtss_f32(h);
  const float top = static_cast<float>(code_max);
  const float id = top / amax;
  if (!(amax > 0.0f) || !(amax <= 3.4028235e38f) || !(id <= 3.4028235e38f)) return false;
  const __m256 vid = _mm256_set1_ps(id);
  for (int s = 0; s < n / per_sum; ++s) {
    __m256i acc = _mm256_setzero_si256();
    for (int i = s * per_sum; i < (s + 1) * per_sum; i += 16) {
      // Rounded to nearest even by vcvtps2dq under the default MXCSR, as nearbyint; |c| <= top.
      const __m256i c0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i), vid));
      const __m256i c1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8), vid));
      acc = _mm256_add_epi32(acc, _mm256_add_epi32(c0, c1));
      const __m256i w = _mm256_packs_epi32(c0, c1);  // lanes (0-3, 8-11 | 4-7, 12-15)
      const __m128i b = _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
      // b holds 0-3, 8-11, 4-7, 12-15: put them in order.
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i),
                       _mm_shuffle_epi32(b, _MM_SHUFFLE(3, 1, 2, 0)));
    }
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, _MM_SHUFFLE(1, 0, 3, 2)));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, _MM_SHUFFLE(2, 3, 0, 1)));
    sums[s] = static_cast<int16_t>(_mm_cvtsi128_si32(t));
  }
  *dx = amax / top;
  return true;
}

void QuantGemmAvx2(const QuantInput& x, const QuantPanels& w, const float* bias, float* y,
                   int64_t y_stride, int64_t row_begin, int64_t row_end, int64_t g0, int64_t g1) {
  ForQuantType(w.type(), [&](auto type) {
    Groups<decltype(type)::value>(x, w, bias, y, y_stride, row_begin, row_end, g0, g1);
  });
}

}  // namespace wc::x86

#pragma GCC pop_options
