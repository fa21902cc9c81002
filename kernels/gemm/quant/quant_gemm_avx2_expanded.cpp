// The quantized GEMM's many-token AVX2 kernel (quant_gemm_x86.h): each group block is expanded
// once into 8-bit codes and scale vectors in L1, then multiplied by every token of a chunk, so the
// bit unpacking (nibbles, 5th and 6th bits, K types' scales) is paid once per chunk of tokens, not
// once per tile of 2-4 tokens as in quant_gemm_avx2.cpp (ik_llama.cpp expands its 4-bit layouts to
// 8 bits for large batches for the same reason). The products are the same exact int32 sums and
// the float steps the contract's (quant_gemm.h), in the same block order for each (token, row), so
// the bits are the other kernels'.
//
// Loop order, per thread (its row groups): token chunks, then groups, then segments of blocks in k
// order (each block expanded once), then token tiles over the segment's blocks with their 8-row
// accumulators in registers (in a small buffer between segments).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/gemm/gemm_schedule.h"
#include "kernels/gemm/quant/quant_gemm_x86.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#include "kernels/gemm/quant/quant_avx2-inl.h"

namespace wc::x86 {
namespace {

using namespace quant_avx2;  // NOLINT: the helpers both AVX2 kernels share
constexpr int kTile = 4;     // tokens a tile holds in registers
// A chunk's activation codes (about 1 MiB: a token chunk) and a segment's expanded blocks (about
// 16 KiB, in L1 while every tile of the chunk runs over them): sizes chosen on a wide down
// projection, where expanding a whole group per small chunk ran slower than the register tiles
// (docs/performance.md, "Each block expanded once for many tokens").
constexpr int64_t kChunkBytes = 1 << 20;
constexpr int64_t kSegmentBytes = 16 << 10;

// Two rows' worth of signed bytes a and b (8 each) as each lane's 16-bit pair (a[r], b[r]).
inline __m256i ExPairI8(const uint8_t* a, const uint8_t* b) {
  const __m256i lo = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a)));
  const __m256i hi = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b)));
  return _mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi32(0xFFFF)),
                         _mm256_slli_epi32(hi, 16));
}

// One group block expanded, as vectors at e (Layout<T>'s offsets; every type but Q8_0, whose codes
// are bytes already). q[v]: lane r = row r's codes of the block's values 4 v .. 4 v + 3 as
// unsigned bytes; sc[j]: sub-block j's scales as vpmaddwd factors (K types); mins[j]: Q4_K / Q5_K
// lane r = (min_j, min_j), against the activations' 16-value sums 2 j, 2 j + 1; Q6_K lane r =
// (sc_2j, sc_2j+1), against sums 2 j, 2 j + 1; d, m: the f16 fields as f32.
template <GgmlQuant T>
struct Layout {
  static constexpr int kVectors = IsKQuant(T) ? 64 : 8;
  static constexpr int kSc = kVectors;
  static constexpr int kMins = kSc + (T == GgmlQuant::kQ6_K ? 16 : IsKQuant(T) ? 8 : 0);
  static constexpr int kD = kMins + (IsKQuant(T) ? 8 : 0);
  static constexpr int kM = kD + 1;
  static constexpr int kStride = kM + 1;  // vectors a block takes
};

template <GgmlQuant T>
void Expand(const uint8_t* blk, __m256i* ev) {
  using L = Layout<T>;
  struct {
    __m256i *q, *sc, *mins;
    __m256* d;
    __m256* m;
  } ex{ev, ev + L::kSc, ev + L::kMins, reinterpret_cast<__m256*>(ev + L::kD),
       reinterpret_cast<__m256*>(ev + L::kM)};
  auto* e = &ex;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  *e->d = Halves(blk);
  *e->m = _mm256_setzero_ps();
  if constexpr (!IsKQuant(T)) {
    constexpr bool kQ5 = T == GgmlQuant::kQ5_0 || T == GgmlQuant::kQ5_1;
    constexpr bool kMin = T == GgmlQuant::kQ4_1 || T == GgmlQuant::kQ5_1;
    constexpr int kCodes = QuantGroupCodesOffset(T);
    if constexpr (kMin) *e->m = Halves(blk + 16);
    __m256i qh = _mm256_setzero_si256();
    if constexpr (kQ5) qh = Load(blk + (kMin ? 32 : 16));
    for (int v = 0; v < 4; ++v) {
      const __m256i raw = Load(blk + kCodes + 32 * v);
      e->q[v] = _mm256_and_si256(raw, m4);
      e->q[4 + v] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
      if constexpr (kQ5) {
        e->q[v] = _mm256_or_si256(e->q[v], FifthBits(qh, 4 * v));
        e->q[4 + v] = _mm256_or_si256(e->q[4 + v], FifthBits(qh, 16 + 4 * v));
      }
    }
  } else if constexpr (T == GgmlQuant::kQ4_K || T == GgmlQuant::kQ5_K) {
    constexpr bool kQ5 = T == GgmlQuant::kQ5_K;
    *e->m = Halves(blk + 16);
    for (int j = 0; j < 8; ++j) {
      e->sc[j] = ScalePairsU8(blk + 32 + 8 * j);
      e->mins[j] = ScalePairsU8(blk + 96 + 8 * j);
    }
    const uint8_t* codes = blk + (kQ5 ? 416 : 160);
    for (int c = 0; c < 4; ++c)
      for (int v = 0; v < 8; ++v) {
        const __m256i raw = Load(codes + 32 * (8 * c + v));
        __m256i lo = _mm256_and_si256(raw, m4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
        if constexpr (kQ5) {
          const __m256i h = Load(blk + 160 + 32 * v);
          const __m256i b0 = _mm256_set1_epi8(static_cast<char>(1 << (2 * c)));
          const __m256i b1 = _mm256_set1_epi8(static_cast<char>(1 << (2 * c + 1)));
          const __m256i x10 = _mm256_set1_epi8(0x10);
          lo = _mm256_or_si256(
              lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(h, b0), b0), x10));
          hi = _mm256_or_si256(
              hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(h, b1), b1), x10));
        }
        e->q[16 * c + v] = lo;
        e->q[16 * c + 8 + v] = hi;
      }
  } else {  // Q6_K
    const __m256i m3 = _mm256_set1_epi8(0x03);
    for (int j = 0; j < 16; ++j) e->sc[j] = ScalePairsI8(blk + 16 + 8 * j);
    for (int i = 0; i < 8; ++i) e->mins[i] = ExPairI8(blk + 16 + 16 * i, blk + 24 + 16 * i);
    const uint8_t* ql = blk + 144;
    const uint8_t* qh = ql + 1024;
    for (int n = 0; n < 2; ++n)
      for (int v = 0; v < 16; ++v) {
        const __m256i raw = Load(ql + 32 * (16 * n + v));
        const __m256i h = Load(qh + 32 * (8 * n + v % 8));
        const int s = 2 * (v / 8);  // the low nibble's 2 high bits in its qh byte; the high's s + 4
        const __m256i h_lo = _mm256_and_si256(_mm256_srl_epi16(h, _mm_cvtsi32_si128(s)), m3);
        const __m256i h_hi = _mm256_and_si256(_mm256_srl_epi16(h, _mm_cvtsi32_si128(s + 4)), m3);
        e->q[32 * n + v] = _mm256_or_si256(_mm256_and_si256(raw, m4), _mm256_slli_epi16(h_lo, 4));
        e->q[32 * n + 16 + v] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), m4),
                                                _mm256_slli_epi16(h_hi, 4));
      }
  }
}

// The block's exact int32 sums I for tokens [t0, t0 + NT) (the contract's integer part, before
// the float steps), at block b expanded at e.
template <GgmlQuant T, int NT>
inline void BlockSums(const __m256i* e, const QuantInput& x, int64_t t0, int64_t b,
                      __m256i (&isum)[NT]) {
  using L = Layout<T>;
  const __m256i ones = _mm256_set1_epi16(1);
  constexpr int kValues = IsKQuant(T) ? 256 : 32;
  const int8_t* xq[NT];
  for (int t = 0; t < NT; ++t) {
    xq[t] = x.Codes(t0 + t) + kValues * b;
    isum[t] = _mm256_setzero_si256();
  }
  // Unsigned codes: pair sums build up in 16 bits over a run of vectors (a run's largest sum,
  // 2 * qmax * 127 * run, stays below 2^15), then vpmaddwd by 1 or by the sub-block's scale.
  constexpr int kBits = T == GgmlQuant::kQ6_K ? 6
                        : (T == GgmlQuant::kQ5_0 || T == GgmlQuant::kQ5_1 || T == GgmlQuant::kQ5_K)
                            ? 5
                            : 4;
  constexpr int kRun = kBits == 4 ? 8 : kBits == 5 ? 4 : 2;
  constexpr int kSub = T == GgmlQuant::kQ6_K ? 4 : 8;  // vectors a sub-block (or block) takes
  for (int v0 = 0; v0 < L::kVectors; v0 += kRun) {
    __m256i p[NT];
    for (int t = 0; t < NT; ++t) p[t] = _mm256_maddubs_epi16(e[v0], Bcast4(xq[t] + 4 * v0));
    PinSums(p);
    for (int v = v0 + 1; v < v0 + kRun; ++v) {
      for (int t = 0; t < NT; ++t)
        p[t] = _mm256_add_epi16(p[t], _mm256_maddubs_epi16(e[v], Bcast4(xq[t] + 4 * v)));
      PinSums(p);
    }
    const __m256i f = IsKQuant(T) ? e[L::kSc + v0 / kSub] : ones;
    for (int t = 0; t < NT; ++t) isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p[t], f));
    PinSums(isum);
  }
  if constexpr (T == GgmlQuant::kQ4_0 || T == GgmlQuant::kQ5_0) {
    for (int t = 0; t < NT; ++t) {
      const int sum = x.Sums(t0 + t)[b];
      isum[t] =
          _mm256_sub_epi32(isum[t], _mm256_set1_epi32((T == GgmlQuant::kQ4_0 ? 8 : 16) * sum));
    }
  }
  if constexpr (T == GgmlQuant::kQ6_K) {  // - 32 sum_j sc_j bsum_j
    for (int t = 0; t < NT; ++t) {
      const int16_t* bs = x.Sums(t0 + t) + 16 * b;
      __m256i s = _mm256_madd_epi16(e[L::kMins], Bcast4(bs));
      for (int i = 1; i < 8; ++i)
        s = _mm256_add_epi32(s, _mm256_madd_epi16(e[L::kMins + i], Bcast4(bs + 2 * i)));
      isum[t] = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(s, 5));
    }
  }
}

// Tokens [t0, t0 + NT) over blocks [b0, b1) of the group, expanded from ex (block b0): acc[t]
// (8 rows) carried on with the float steps in the contract's order.
template <GgmlQuant T, int NT>
void TileOverBlocks(const __m256i* ex, int64_t b0, int64_t b1, const QuantInput& x, int64_t t0,
                    __m256 (&acc)[NT]) {
  using L = Layout<T>;
  for (int64_t b = b0; b < b1; ++b) {
    const __m256i* e = ex + (b - b0) * L::kStride;
    __m256i isum[NT];
    BlockSums<T, NT>(e, x, t0, b, isum);
    const __m256 d = _mm256_castsi256_ps(e[L::kD]);
    for (int t = 0; t < NT; ++t) {
      const float dx = x.Dx(t0 + t)[b];
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(dx)), _mm256_cvtepi32_ps(isum[t]),
                               acc[t]);
      if constexpr (T == GgmlQuant::kQ4_1 || T == GgmlQuant::kQ5_1) {
        const int sum = x.Sums(t0 + t)[b];
        acc[t] = _mm256_fmadd_ps(_mm256_castsi256_ps(e[L::kM]),
                                 _mm256_set1_ps(dx * static_cast<float>(sum)), acc[t]);
      }
      if constexpr (T == GgmlQuant::kQ4_K || T == GgmlQuant::kQ5_K) {
        const int16_t* bs = x.Sums(t0 + t) + 16 * b;
        __m256i ms = _mm256_madd_epi16(e[L::kMins], Bcast4(bs));
        for (int j = 1; j < 8; ++j)
          ms = _mm256_add_epi32(ms, _mm256_madd_epi16(e[L::kMins + j], Bcast4(bs + 2 * j)));
        const __m256 neg =
            _mm256_xor_ps(_mm256_mul_ps(_mm256_castsi256_ps(e[L::kM]), _mm256_set1_ps(dx)),
                          _mm256_set1_ps(-0.0f));
        acc[t] = _mm256_fmadd_ps(neg, _mm256_cvtepi32_ps(ms), acc[t]);
      }
    }
  }
}

template <GgmlQuant T>
void ExpandedGroups(const QuantInput& x, const QuantPanels& w, const float* bias, float* y,
                    int64_t y_stride, int64_t row_begin, int64_t row_end, int64_t g0, int64_t g1) {
  using L = Layout<T>;
  const int64_t chunk = std::max<int64_t>(
      kTile, std::min<int64_t>(512, kChunkBytes / std::max<int64_t>(1, x.cols)) / kTile * kTile);
  const int64_t seg = std::max<int64_t>(1, kSegmentBytes / (L::kStride * 32));
  // [seg][kStride] expanded vectors and [chunk][8] accumulators, this thread's (64-byte aligned).
  auto* ex = static_cast<__m256i*>(
      gemm::ThreadBuffer<gemm::kQuantExpandedSlot>(static_cast<size_t>(seg * L::kStride * 32)));
  auto* acc_buf = static_cast<float*>(
      gemm::ThreadBuffer<gemm::kQuantAccSlot>(static_cast<size_t>(chunk * kR * 4)));
  const int64_t nb = w.blocks();
  for (int64_t c0 = 0; c0 < x.n_tokens; c0 += chunk) {
    const int64_t c1 = std::min(x.n_tokens, c0 + chunk);
    for (int64_t g = g0; g < g1; ++g) {
      const uint8_t* gp = w.group(g);
      for (int64_t s0 = 0; s0 < nb; s0 += seg) {
        const int64_t s1 = std::min(nb, s0 + seg);
        for (int64_t b = s0; b < s1; ++b)
          Expand<T>(gp + b * w.group_block_bytes(), ex + (b - s0) * L::kStride);
        const bool first = s0 == 0, last = s1 == nb;
        int64_t t = c0;
        for (; t + kTile <= c1; t += kTile) {
          __m256 acc[kTile];
          for (int i = 0; i < kTile; ++i)
            acc[i] = first ? _mm256_setzero_ps() : _mm256_load_ps(acc_buf + (t - c0 + i) * kR);
          TileOverBlocks<T, kTile>(ex, s0, s1, x, t, acc);
          if (last)
            StoreTile<kTile>(acc, t, g, bias, y, y_stride, row_begin, row_end);
          else
            for (int i = 0; i < kTile; ++i) _mm256_store_ps(acc_buf + (t - c0 + i) * kR, acc[i]);
        }
        for (; t < c1; ++t) {
          __m256 acc[1];
          acc[0] = first ? _mm256_setzero_ps() : _mm256_load_ps(acc_buf + (t - c0) * kR);
          TileOverBlocks<T, 1>(ex, s0, s1, x, t, acc);
          if (last)
            StoreTile<1>(acc, t, g, bias, y, y_stride, row_begin, row_end);
          else
            _mm256_store_ps(acc_buf + (t - c0) * kR, acc[0]);
        }
      }
    }
  }
}

}  // namespace

void QuantGemmAvx2Expanded(const QuantInput& x, const QuantPanels& w, const float* bias, float* y,
                           int64_t y_stride, int64_t row_begin, int64_t row_end, int64_t g0,
                           int64_t g1) {
  ForQuantType(w.type(), [&](auto type) {
    constexpr GgmlQuant T = decltype(type)::value;
    if constexpr (T == GgmlQuant::kQ8_0)  // bytes already: nothing to expand (the table never asks)
      QuantGemmAvx2(x, w, bias, y, y_stride, row_begin, row_end, g0, g1);
    else
      ExpandedGroups<T>(x, w, bias, y, y_stride, row_begin, row_end, g0, g1);
  });
}

}  // namespace wc::x86

#pragma GCC pop_options
