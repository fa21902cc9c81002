// The int8 attention kernels on AVX-512 VNNI (int8.h). Highway 1.0.3 (Debian 12)
// has no op for the VNNI dot products, so these are intrinsics, compiled for AVX-512 VNNI and
// called only where KernelsOn(CpuKernels::kAvx512Vnni) (kernel_table.cpp).
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/attention/int8.h"
#include "kernels/attention/x86_avx512.h"

// Everything below runs only on a CPU with WC_VNNI's instructions; the pragma (the same list) gives
// them to the lambdas of the head ladders too (x86_head_ladder-inl.h).
#pragma GCC push_options
// GCC 12 reports the "undefined" source operand inside its own AVX-512 intrinsics
// (_mm512_undefined_*), wherever they inline into the kernels below.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")

#include "kernels/attention/x86_head_ladder-inl.h"

namespace wc {
namespace {

using x86::kAheadRows;

// The scores of NH heads (q8 rows of n4 32-bit words: 4 codes each) against one block of 16 rows
// held transposed in kt ([n4][16] words: lane r = row r's 4 codes of that word, offset to
// unsigned): one vpdpbusd per word and head gives 16 rows' partial sums at once, so no horizontal
// sums. vpdpbusd multiplies unsigned by signed bytes: the codes are offset (c ^ 0x80 = c + 128)
// and bias[h] = 128 * sum(q8[h]) taken off each sum. out[j * out_stride + r] for r in `store`.
template <int NH>
WC_VNNI inline __attribute__((always_inline)) void HeadsOfBlock(
    const int8_t* q8, int64_t n4, const __m512i* kt, const int32_t* bias, const float* head_scale,
    __m512 row_scale, __mmask16 store, float* out, int64_t out_stride) {
  __m512i acc[NH];
  for (auto& a : acc) a = _mm512_setzero_si512();
  for (int64_t w = 0; w < n4; ++w) {
    const __m512i kv = _mm512_load_si512(kt + w);
    for (int j = 0; j < NH; ++j) {
      int32_t word;
      std::memcpy(&word, q8 + (j * n4 + w) * 4, 4);
      acc[j] = _mm512_dpbusd_epi32(acc[j], kv, _mm512_set1_epi32(word));
    }
  }
  // float(dot) * (head_scale * row_scale), the portable path's two products.
  for (int j = 0; j < NH; ++j) {
    const __m512 dot = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[j], _mm512_set1_epi32(bias[j])));
    const __m512 factor = _mm512_mul_ps(_mm512_set1_ps(head_scale[j]), row_scale);
    _mm512_mask_storeu_ps(out + j * out_stride, store, _mm512_mul_ps(dot, factor));
  }
}

// Scores of all n_heads against every row of k (cols = 64 * KC, or k.cols for KC = 0), 16 rows at
// a time: the block's codes are loaded and transposed once (Transpose16x16Epi32 per 64 columns)
// and read by every head, in groups of 8, 4, 2 and 1 heads.
template <int KC>
WC_VNNI void ScoresTransposed(const int8_t* q8, int n_heads, const int32_t* bias,
                              const float* head_scale, const RowsRef& k, float* scores,
                              const RowsRef& along) {
  const int64_t rows = k.rows, cols = KC > 0 ? 64 * KC : k.cols, stride = k.row_bytes;
  const int64_t codes = k.row_scale ? 2 : 0, n4 = cols / 4;
  constexpr int64_t kMaxWords = KC > 0 ? 16 * KC : kInt8QueryMaxCols / 4;
  __m512i kt[kMaxWords];  // [n4]: word w of the block's 16 rows, lane r = row r
  const __m512i to_unsigned = _mm512_set1_epi8(static_cast<char>(0x80));
  for (x86::RowBlocks block(k, along); block.Next();) {
    const int64_t p = block.p, valid = block.valid;
    for (int64_t c = 0; c < cols; c += 64) {
      __m512i r[16];
      for (int i = 0; i < 16; ++i)  // the tail repeats the last row (its lanes are not stored)
        r[i] = _mm512_xor_si512(
            _mm512_loadu_si512(k.data + (p + std::min<int64_t>(i, valid - 1)) * stride + codes + c),
            to_unsigned);
      x86::Transpose16x16Epi32(r);
      for (int i = 0; i < 16; ++i) kt[c / 4 + i] = r[i];
    }
    const __m512 row_scale = x86::RowScales16(k, p, 1.0f);
    const __mmask16 store = x86::FirstLanes(valid);
    x86::ForHeadLadder(n_heads, [&](auto nh, int h) {
      HeadsOfBlock<decltype(nh)::value>(q8 + h * cols, n4, kt, bias + h, head_scale + h, row_scale,
                                        store, scores + h * rows + p, rows);
    });
  }
}

// P.V for int8 rows takes the rows in pairs (vpdpwssd sums two int16 products per lane): a pair's
// codes are widened and interleaved once per block of rows into vw, and every head reads them.
// Word i of 32-column block j: the low vector's lane 4b + i holds column 32j + 8b + i of both rows
// (b the 128-bit block, i < 4), the high vector's column 32j + 8b + 4 + i. A pair's two weights
// are one int32 broadcast. Each head's int32 sums (the same lane order) live in `sums` across
// blocks; exact, so the order of rows does not matter.
constexpr int64_t kPairBlock = 32;  // row pairs widened at a time: 64 rows, 8 KB at 64 columns

// vw[(i * n32 + j) * 2 + {0, 1}] for pairs i < n_pairs of the rows from `first` (an odd last
// row pairs with itself; its weight is 0).
WC_VNNI inline void WidenPairs(const uint8_t* first, int64_t rows_left, int64_t stride, int64_t n32,
                               int64_t n_pairs, __m512i* vw) {
  for (int64_t i = 0; i < n_pairs; ++i) {
    const uint8_t* ra = first + 2 * i * stride;
    const uint8_t* rb = 2 * i + 1 < rows_left ? ra + stride : ra;
    for (int64_t j = 0; j < n32; ++j) {
      const __m512i a =
          _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ra + 32 * j)));
      const __m512i b =
          _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rb + 32 * j)));
      vw[(i * n32 + j) * 2] = _mm512_unpacklo_epi16(a, b);
      vw[(i * n32 + j) * 2 + 1] = _mm512_unpackhi_epi16(a, b);
    }
  }
}

// sums of NH heads for 32-column blocks [j0, j0 + NB) += the pairs [0, n_pairs) of vw, whose
// weights start at pair `pair0` of each head's wq row. 2 * NB * NH accumulators (16 at most).
template <int NH, int NB>
WC_VNNI inline __attribute__((always_inline)) void AccumulatePairs(
    const int16_t* wq, int64_t wq_stride, int64_t pair0, const __m512i* vw, int64_t n_pairs,
    int64_t n32, int64_t j0, int32_t* sums, int64_t sums_stride) {
  __m512i acc[NH][NB][2];
  for (int h = 0; h < NH; ++h)
    for (int j = 0; j < NB; ++j)
      for (int m = 0; m < 2; ++m)
        acc[h][j][m] = _mm512_load_si512(sums + h * sums_stride + (j0 + j) * 32 + 16 * m);
  for (int64_t i = 0; i < n_pairs; ++i) {
    __m512i d[NB][2];
    for (int j = 0; j < NB; ++j)
      for (int m = 0; m < 2; ++m) d[j][m] = _mm512_load_si512(vw + (i * n32 + j0 + j) * 2 + m);
    for (int h = 0; h < NH; ++h) {
      int32_t pair;
      std::memcpy(&pair, wq + h * wq_stride + 2 * (pair0 + i), 4);
      const __m512i wp = _mm512_set1_epi32(pair);
      for (int j = 0; j < NB; ++j)
        for (int m = 0; m < 2; ++m) acc[h][j][m] = _mm512_dpwssd_epi32(acc[h][j][m], d[j][m], wp);
    }
  }
  for (int h = 0; h < NH; ++h)
    for (int j = 0; j < NB; ++j)
      for (int m = 0; m < 2; ++m)
        _mm512_store_si512(sums + h * sums_stride + (j0 + j) * 32 + 16 * m, acc[h][j][m]);
}

// Every head of a group over the columns, 64 at a time then a last 32.
template <int NH>
WC_VNNI inline void AccumulateHeads(const int16_t* wq, int64_t wq_stride, int64_t pair0,
                                    const __m512i* vw, int64_t n_pairs, int64_t n32, int32_t* sums,
                                    int64_t sums_stride) {
  int64_t j = 0;
  for (; j + 2 <= n32; j += 2)
    AccumulatePairs<NH, 2>(wq, wq_stride, pair0, vw, n_pairs, n32, j, sums, sums_stride);
  if (j < n32) AccumulatePairs<NH, 1>(wq, wq_stride, pair0, vw, n_pairs, n32, j, sums, sums_stride);
}

// o[0 : 32] = fma(float(sum), unit, o) for one 32-column block of int32 sums in the pairwise P.V
// layout (the low vector's lane 4b + i: column 8b + i; the high one's: 8b + 4 + i).
WC_VNNI inline __attribute__((always_inline)) void FmaBlockInOrder(__m512i lo, __m512i hi,
                                                                   float unit, float* oh) {
  const __m512i low_cols =
      _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i high_cols =
      _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  const __m512 l = _mm512_cvtepi32_ps(lo), u = _mm512_cvtepi32_ps(hi);
  const __m512 vunit = _mm512_set1_ps(unit);
  _mm512_storeu_ps(
      oh, _mm512_fmadd_ps(_mm512_permutex2var_ps(l, low_cols, u), vunit, _mm512_loadu_ps(oh)));
  _mm512_storeu_ps(oh + 16, _mm512_fmadd_ps(_mm512_permutex2var_ps(l, high_cols, u), vunit,
                                            _mm512_loadu_ps(oh + 16)));
}

// Up to 4 heads (one group): o[h, c0 : c0 + 32 * NB] for NH heads over rows taken in pairs,
// widened in registers (a buffer would only add stores, with no other head to read it) (vpdpwssd
// sums two int16 products per lane): a pair's codes are widened and interleaved, so lane i of
// 128-bit block b of the low / high accumulator of a 32-column block holds column 8b + i / 8b + 4 +
// i, and a pair's weights are one int32 broadcast. 2 * NB * NH accumulators (16 at most) stay in
// registers.
template <int NH, int NB>
WC_VNNI void WeightedBlock(const int16_t* wq, int64_t wq_stride, const float* unit,
                           const RowsRef& v, int64_t c0, float* o, const RowsRef& along) {
  const int64_t rows = v.rows, cols = v.cols, stride = v.row_bytes;
  const uint8_t* base = v.data + (v.row_scale ? 2 : 0) + c0;
  const PrefetchStream ahead(c0 == 0 ? v : RowsRef{}), along_rows(c0 == 0 ? along : RowsRef{});
  __m512i lo[NB][NH], hi[NB][NH];
  for (int j = 0; j < NB; ++j)
    for (int h = 0; h < NH; ++h) lo[j][h] = hi[j][h] = _mm512_setzero_si512();
  for (int64_t p = 0; p < rows; p += 2) {
    ahead.Rows(p + kAheadRows, p + kAheadRows + 2);
    along_rows.Rows(p, p + 2);
    const uint8_t* ra = base + p * stride;
    const uint8_t* rb = p + 1 < rows ? ra + stride : ra;  // an odd last row: weight 0
    __m512i ab_lo[NB], ab_hi[NB];
    for (int j = 0; j < NB; ++j) {
      const __m512i a =
          _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ra + 32 * j)));
      const __m512i b =
          _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rb + 32 * j)));
      ab_lo[j] = _mm512_unpacklo_epi16(a, b);
      ab_hi[j] = _mm512_unpackhi_epi16(a, b);
    }
    for (int h = 0; h < NH; ++h) {
      int32_t pair;
      std::memcpy(&pair, wq + h * wq_stride + p, 4);
      const __m512i wp = _mm512_set1_epi32(pair);
      for (int j = 0; j < NB; ++j) {
        lo[j][h] = _mm512_dpwssd_epi32(lo[j][h], ab_lo[j], wp);
        hi[j][h] = _mm512_dpwssd_epi32(hi[j][h], ab_hi[j], wp);
      }
    }
  }
  for (int j = 0; j < NB; ++j)
    for (int h = 0; h < NH; ++h)
      FmaBlockInOrder(lo[j][h], hi[j][h], unit[h], o + h * cols + c0 + 32 * j);
}

// All columns of NH heads: 64 at a time, then a last 32.
template <int NH>
WC_VNNI void WeightedGroup(const int16_t* wq, int64_t wq_stride, const float* unit,
                           const RowsRef& v, float* o, const RowsRef& along) {
  int64_t c = 0;
  for (; c + 64 <= v.cols; c += 64) WeightedBlock<NH, 2>(wq, wq_stride, unit, v, c, o, along);
  if (c < v.cols) WeightedBlock<NH, 1>(wq, wq_stride, unit, v, c, o, along);
}

}  // namespace

void Int8ScoresVnniKernel(const int8_t* q8, int n_heads, const float* head_scale, const RowsRef& k,
                          float* scores, const RowsRef& along) {
  const int64_t cols = k.cols;
  thread_local std::vector<int32_t> bias;  // [n_heads]: 128 * sum(q8[h])
  bias.resize(static_cast<size_t>(n_heads));
  for (int h = 0; h < n_heads; ++h) {
    int32_t sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += q8[h * cols + c];
    bias[h] = 128 * sum;
  }
  switch (cols) {
    case 64:
      return ScoresTransposed<1>(q8, n_heads, bias.data(), head_scale, k, scores, along);
    case 128:
      return ScoresTransposed<2>(q8, n_heads, bias.data(), head_scale, k, scores, along);
    case 256:
      return ScoresTransposed<4>(q8, n_heads, bias.data(), head_scale, k, scores, along);
    default:
      return ScoresTransposed<0>(q8, n_heads, bias.data(), head_scale, k, scores, along);
  }
}

namespace {
WC_VNNI void WeightedAllHeads(const int16_t* wq, int64_t wq_stride, const float* unit, int n_heads,
                              const RowsRef& v, float* o, const RowsRef& along) {
  const int64_t rows = v.rows, cols = v.cols, n32 = cols / 32, stride = v.row_bytes;
  const uint8_t* codes = v.data + (v.row_scale ? 2 : 0);
  // sums: [n_heads, cols] int32 in vw's lane order; vw: [kPairBlock, n32, 2] widened pairs.
  const x86::WidenScratch scratch(n_heads * n32 * 2, kPairBlock * n32 * 2);
  int32_t* sums = scratch.sums->i32;
  __m512i* vw = scratch.widened;
  for (x86::PairBlocks block(v, along, kPairBlock); block.Next();) {
    const int64_t pair0 = block.pair0, n_pairs = block.n_pairs, p0 = 2 * pair0;
    WidenPairs(codes + p0 * stride, rows - p0, stride, n32, n_pairs, vw);
    x86::ForHeadGroupsOf4(n_heads, [&](auto nh, int h) {
      AccumulateHeads<decltype(nh)::value>(wq + h * wq_stride, wq_stride, pair0, vw, n_pairs, n32,
                                           sums + h * cols, cols);
    });
  }
  // o = fma(float(sum), unit[h], o), the lanes put back in column order.
  for (int h = 0; h < n_heads; ++h)
    for (int64_t j = 0; j < n32; ++j) {
      const int32_t* sj = sums + h * cols + 32 * j;
      FmaBlockInOrder(_mm512_load_si512(sj), _mm512_load_si512(sj + 16), unit[h],
                      o + h * cols + 32 * j);
    }
}

}  // namespace

void Int8WeightedVnniSharedKernel(const int16_t* wq, int64_t wq_stride, const float* unit,
                                  int n_heads, const RowsRef& v, float* o, const RowsRef& along) {
  WeightedAllHeads(wq, wq_stride, unit, n_heads, v, o, along);
}

void Int8WeightedVnniGroupsKernel(const int16_t* wq, int64_t wq_stride, const float* unit,
                                  int n_heads, const RowsRef& v, float* o, const RowsRef& along) {
  x86::ForHeadGroupsOf4(n_heads, [&](auto nh, int h) {
    WeightedGroup<decltype(nh)::value>(wq + h * wq_stride, wq_stride, unit + h, v, o + h * v.cols,
                                       h == 0 ? along : RowsRef{});
  });
}

}  // namespace wc

#pragma GCC diagnostic pop
#pragma GCC pop_options
