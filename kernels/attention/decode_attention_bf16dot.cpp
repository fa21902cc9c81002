#include "kernels/attention/decode_attention_bf16dot.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/attention/x86_avx512.h"
#include "util/bf16.h"

#define WC_BF16DOT \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx512vbmi")))
// Everything below runs only on a CPU with these instructions; the pragma gives them to the
// lambdas of the head ladders too (x86_head_ladder-inl.h).
#pragma GCC push_options
// GCC 12 reports the "undefined" source operand inside its own AVX-512 intrinsics
// (_mm512_undefined_*), wherever they inline into the kernels below.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx512vbmi")

#include "kernels/attention/x86_bf16_widen.h"
#include "kernels/attention/x86_head_ladder-inl.h"

namespace wc {
namespace {

using x86::kAheadRows;

using x86::RowScales;
using x86::Widen;

// qp[h, :] = the bf16 (nearest even) of q[h, :], each 64-column block in Widen's order: w0's 32
// columns (16j + i, i < 8, per 128-bit block j), then w1's (16j + 8 + i). cols % 64 == 0.
WC_BF16DOT void QueryWords(const float* q, int n_heads, int64_t cols, uint16_t* qp) {
  alignas(64) int16_t order[2][32];
  for (int i = 0; i < 32; ++i) {
    order[0][i] = static_cast<int16_t>(16 * (i / 8) + i % 8);
    order[1][i] = static_cast<int16_t>(16 * (i / 8) + 8 + i % 8);
  }
  const __m512i even = _mm512_load_si512(order[0]), odd = _mm512_load_si512(order[1]);
  for (int h = 0; h < n_heads; ++h)
    for (int64_t c = 0; c < cols; c += 64) {
      const float* src = q + h * cols + c;
      // Columns 0-31 and 32-63 as bf16, in order.
      const __m512i a =
          (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + 16), _mm512_loadu_ps(src));
      const __m512i b =
          (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + 48), _mm512_loadu_ps(src + 32));
      uint16_t* dst = qp + h * cols + c;
      _mm512_storeu_si512(dst, _mm512_permutex2var_epi16(a, even, b));
      _mm512_storeu_si512(dst + 32, _mm512_permutex2var_epi16(a, odd, b));
    }
}

// Groups of fewer than kAvx512SharedBlockHeads (kernel_table.h) heads (widening and transposing a
// block would cost more than the heads save): scores of NH heads (qp: [NH, cols] bf16 in Widen's
// column order per 64-column block) against every row, R = 16 / NH rows per tile (accumulator h * R
// + r: head h, row r), unscaled; the scales are applied after.
template <int NH, int KC>
WC_BF16DOT void ScoresGroup(const uint16_t* qp, int n_out, const RowsRef& k, float* scores,
                            const RowsRef& along) {
  const Widen widen(k);
  constexpr int R = 16 / NH;
  const int64_t rows = k.rows, cols = KC > 0 ? 64 * KC : k.cols, stride = k.row_bytes;
  alignas(64) int32_t perm[NH][16];
  for (int h = 0; h < NH; ++h)
    for (int i = 0; i < 16; ++i) perm[h][i] = (h * R + i) & 15;  // head h's lanes first
  const PrefetchStream ahead(k), along_rows(along);
  for (int64_t p = 0; p < rows; p += R) {
    const int valid = static_cast<int>(std::min<int64_t>(R, rows - p));
    ahead.Rows(p + kAheadRows, p + kAheadRows + R);
    along_rows.Rows(p, p + R);
    __m512 acc[16];
    for (auto& a : acc) a = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int64_t c = 0; c < cols; c += 64) {
      for (int r = 0; r < R; ++r) {  // the tail repeats the last row (its lanes are not stored)
        __m512i w0, w1;
        widen.Row(k.data + (p + std::min(r, valid - 1)) * stride, c, &w0, &w1);
        for (int h = 0; h < NH; ++h) {
          const uint16_t* qh = qp + h * cols + c;
          acc[h * R + r] =
              _mm512_dpbf16_ps(acc[h * R + r], (__m512bh)w0, (__m512bh)_mm512_loadu_si512(qh));
          acc[h * R + r] =
              _mm512_dpbf16_ps(acc[h * R + r], (__m512bh)w1, (__m512bh)_mm512_loadu_si512(qh + 32));
        }
      }
    }
    const __m512 dot = x86::Sum16Ps(acc);
    const __mmask16 store = static_cast<__mmask16>((1u << valid) - 1);
    for (int h = 0; h < n_out; ++h)
      _mm512_mask_storeu_ps(scores + h * rows + p, store,
                            _mm512_permutexvar_ps(_mm512_load_si512(perm[h]), dot));
  }
}

// The scores of NH heads (qp rows of n2 32-bit words: two bf16 each) against one block of 16 rows
// whose widened codes kt holds transposed ([n2] words, lane r = row r's word): one vdpbf16ps per
// word and head gives 16 rows' partial sums, so no horizontal sums. Each lane sums the products
// of even and of odd words in two chains, in word order, then adds the two (the same for every
// head, whatever the group it is computed in). out[j * out_stride + r] = sum * (head_scale[j] *
// row_scale[r]) for r in `store`.
template <int NH>
WC_BF16DOT inline __attribute__((always_inline)) void HeadsOfBlock(
    const uint16_t* qp, int64_t n2, const __m512i* kt, const float* head_scale, __m512 row_scale,
    __mmask16 store, float* out, int64_t out_stride) {
  __m512 acc[NH][2];  // even and odd words: two dependency chains per head
  for (int j = 0; j < NH; ++j) acc[j][0] = acc[j][1] = _mm512_setzero_ps();
  for (int64_t w = 0; w < n2; w += 2) {
    for (int e = 0; e < 2; ++e) {
      const __m512bh kv = (__m512bh)_mm512_load_si512(kt + w + e);
      for (int j = 0; j < NH; ++j) {
        int32_t word;
        std::memcpy(&word, qp + j * 2 * n2 + 2 * (w + e), 4);
        acc[j][e] = _mm512_dpbf16_ps(acc[j][e], kv, (__m512bh)_mm512_set1_epi32(word));
      }
    }
  }
  for (int j = 0; j < NH; ++j) {
    const __m512 factor = _mm512_mul_ps(_mm512_set1_ps(head_scale[j]), row_scale);
    const __m512 dot = _mm512_add_ps(acc[j][0], acc[j][1]);
    _mm512_mask_storeu_ps(out + j * out_stride, store, _mm512_mul_ps(dot, factor));
  }
}

// Scores of all n_heads (qp: [n_heads, cols] bf16 in Widen's order per 64-column block) against
// every row of k (cols = 64 * KC, or k.cols for KC = 0), 16 rows at a time: the block's codes are
// widened and transposed once (two Transpose16x16Epi32 per 64 columns) and read by every head,
// in groups of 8, 4, 2 and 1.
template <int KC>
WC_BF16DOT void ScoresTransposed(const uint16_t* qp, int n_heads, const float* head_scale,
                                 const RowsRef& k, float* scores, const RowsRef& along) {
  const Widen widen(k);
  const int64_t rows = k.rows, cols = KC > 0 ? 64 * KC : k.cols, stride = k.row_bytes;
  const int64_t n2 = cols / 2;
  thread_local std::vector<x86::Block64>
      kt_buf;  // [n2]: word w of the block's rows, lane r = row r
  if (kt_buf.size() < static_cast<size_t>(n2)) kt_buf.resize(static_cast<size_t>(n2));
  __m512i* kt = reinterpret_cast<__m512i*>(kt_buf.data());
  for (x86::RowBlocks block(k, along); block.Next();) {
    const int64_t p = block.p, valid = block.valid;
    for (int64_t c = 0; c < cols; c += 64) {
      __m512i w0[16], w1[16];
      for (int i = 0; i < 16; ++i)  // the tail repeats the last row (its lanes are not stored)
        widen.Row(k.data + (p + std::min<int64_t>(i, valid - 1)) * stride, c, &w0[i], &w1[i]);
      x86::Transpose16x16Epi32(w0);
      x86::Transpose16x16Epi32(w1);
      for (int i = 0; i < 16; ++i) {
        kt[c / 2 + i] = w0[i];
        kt[c / 2 + 16 + i] = w1[i];
      }
    }
    const __m512 row_scale = RowScales(k, p);
    const __mmask16 store = x86::FirstLanes(valid);
    x86::ForHeadLadder(n_heads, [&](auto nh, int h) {
      HeadsOfBlock<decltype(nh)::value>(qp + h * cols, n2, kt, head_scale + h, row_scale, store,
                                        scores + h * rows + p, rows);
    });
  }
}

// o[h, c0 : c0 + 64] += the weighted rows for NH heads, rows in pairs: a pair's two bf16 per
// column share a 32-bit lane (vdpbf16ps sums both products), the pair's weights are one 32-bit
// broadcast (wp: [NH, wp_stride] pairs). Accumulator m of a head holds columns 16j + 4m + i of
// block j (i < 4); a 4 x 4 transpose of 128-bit blocks restores the order.
template <int NH>
WC_BF16DOT void WeightedBlock(const uint32_t* wp, int64_t wp_stride, const RowsRef& v, int64_t c0,
                              float* o, const RowsRef& along) {
  const Widen widen(v);
  const int64_t rows = v.rows, cols = v.cols, stride = v.row_bytes;
  const PrefetchStream ahead(c0 == 0 ? v : RowsRef{}), along_rows(c0 == 0 ? along : RowsRef{});
  __m512 acc[NH][4];
  for (int h = 0; h < NH; ++h)
    for (int m = 0; m < 4; ++m) acc[h][m] = _mm512_setzero_ps();
  for (int64_t p = 0; p < rows; p += 2) {
    ahead.Rows(p + kAheadRows, p + kAheadRows + 2);
    along_rows.Rows(p, p + 2);
    const uint8_t* ra = v.data + p * stride;
    const uint8_t* rb = p + 1 < rows ? ra + stride : ra;  // an odd last row: weight 0
    __m512i a0, a1, b0, b1;
    widen.Row(ra, c0, &a0, &a1);
    widen.Row(rb, c0, &b0, &b1);
    const __m512bh d[4] = {
        (__m512bh)_mm512_unpacklo_epi16(a0, b0), (__m512bh)_mm512_unpackhi_epi16(a0, b0),
        (__m512bh)_mm512_unpacklo_epi16(a1, b1), (__m512bh)_mm512_unpackhi_epi16(a1, b1)};
    for (int h = 0; h < NH; ++h) {
      const __m512bh w = (__m512bh)_mm512_set1_epi32(static_cast<int>(wp[h * wp_stride + p / 2]));
      for (int m = 0; m < 4; ++m) acc[h][m] = _mm512_dpbf16_ps(acc[h][m], d[m], w);
    }
  }
  for (int h = 0; h < NH; ++h) x86::AddBlockTransposed(acc[h], o + h * cols + c0);
}

// At least kAvx512SharedBlockHeads (kernel_table.h) heads: each block of kPairBlock row pairs is
// widened and interleaved once into vw (WeightedBlock's d[4] per pair and 64 columns) and read by
// every group of 4 heads; each head's f32 accumulators (WeightedBlock's lane order) live in `sums`
// between blocks, so every output is the same chain of vdpbf16ps over the rows in order as
// WeightedBlock's, bit for bit.
constexpr int64_t kPairBlock = 32;  // 64 rows: 16 KB of widened pairs at 64 columns

template <int NH>
WC_BF16DOT inline __attribute__((always_inline)) void AccumulatePairs(
    const uint32_t* wp, int64_t wp_stride, int64_t pair0, const __m512i* vw, int64_t n_pairs,
    int64_t n64, int64_t j, float* sums, int64_t sums_stride) {
  __m512 acc[NH][4];
  for (int h = 0; h < NH; ++h)
    for (int m = 0; m < 4; ++m)
      acc[h][m] = _mm512_load_ps(sums + h * sums_stride + 64 * j + 16 * m);
  for (int64_t i = 0; i < n_pairs; ++i) {
    __m512bh d[4];
    for (int m = 0; m < 4; ++m) d[m] = (__m512bh)_mm512_load_si512(vw + (i * n64 + j) * 4 + m);
    for (int h = 0; h < NH; ++h) {
      const __m512bh w =
          (__m512bh)_mm512_set1_epi32(static_cast<int>(wp[h * wp_stride + pair0 + i]));
      for (int m = 0; m < 4; ++m) acc[h][m] = _mm512_dpbf16_ps(acc[h][m], d[m], w);
    }
  }
  for (int h = 0; h < NH; ++h)
    for (int m = 0; m < 4; ++m)
      _mm512_store_ps(sums + h * sums_stride + 64 * j + 16 * m, acc[h][m]);
}

WC_BF16DOT void WeightedAllHeads(const uint32_t* wp, int64_t wp_stride, int n_heads,
                                 const RowsRef& v, float* o, const RowsRef& along) {
  const Widen widen(v);
  const int64_t rows = v.rows, cols = v.cols, n64 = cols / 64, stride = v.row_bytes;
  // sums: [n_heads, cols] f32 in WeightedBlock's lane order; vw: [kPairBlock, n64, 4].
  const x86::WidenScratch scratch(n_heads * n64 * 4, kPairBlock * n64 * 4);
  float* sums = scratch.sums->f32;
  __m512i* vw = scratch.widened;
  for (x86::PairBlocks block(v, along, kPairBlock); block.Next();) {
    const int64_t pair0 = block.pair0, n_pairs = block.n_pairs, p0 = 2 * pair0;
    for (int64_t i = 0; i < n_pairs; ++i) {
      const uint8_t* ra = v.data + (p0 + 2 * i) * stride;
      const uint8_t* rb = p0 + 2 * i + 1 < rows ? ra + stride : ra;  // odd last row: weight 0
      for (int64_t j = 0; j < n64; ++j) {
        __m512i a0, a1, b0, b1;
        widen.Row(ra, 64 * j, &a0, &a1);
        widen.Row(rb, 64 * j, &b0, &b1);
        __m512i* d = vw + (i * n64 + j) * 4;
        d[0] = _mm512_unpacklo_epi16(a0, b0);
        d[1] = _mm512_unpackhi_epi16(a0, b0);
        d[2] = _mm512_unpacklo_epi16(a1, b1);
        d[3] = _mm512_unpackhi_epi16(a1, b1);
      }
    }
    x86::ForHeadGroupsOf4(n_heads, [&](auto nh, int h) {
      for (int64_t j = 0; j < n64; ++j)
        AccumulatePairs<decltype(nh)::value>(wp + h * wp_stride, wp_stride, pair0, vw, n_pairs, n64,
                                             j, sums + h * cols, cols);
    });
  }
  for (int h = 0; h < n_heads; ++h)
    for (int64_t j = 0; j < n64; ++j) {
      const float* s = sums + h * cols + 64 * j;
      const __m512 acc[4] = {_mm512_load_ps(s), _mm512_load_ps(s + 16), _mm512_load_ps(s + 32),
                             _mm512_load_ps(s + 48)};
      x86::AddBlockTransposed(acc, o + h * cols + 64 * j);
    }
}

// wp[h * wp_stride + i] = bf16(w[h, 2i] * s[2i]) | bf16(w[h, 2i + 1] * s[2i + 1]) << 16, s the
// rows' scales times the code factor, rounded to nearest even (a zero pads an odd row count).
WC_BF16DOT void PairWeights(const float* w, int64_t w_stride, int n_heads, const RowsRef& v,
                            uint32_t* wp, int64_t wp_stride) {
  const int64_t rows = v.rows;
  for (int64_t p = 0; p < rows; p += 32) {
    const __m512 s0 = RowScales(v, p);
    const __m512 s1 = p + 16 < rows ? RowScales(v, p + 16) : _mm512_setzero_ps();
    const __mmask16 m0 = x86::FirstLanes(rows - p), m1 = x86::FirstLanes(rows - p - 16);
    for (int h = 0; h < n_heads; ++h) {
      const float* wh = w + h * w_stride + p;
      const __m512 x0 = _mm512_mul_ps(_mm512_maskz_loadu_ps(m0, wh), s0);
      const __m512 x1 = _mm512_mul_ps(_mm512_maskz_loadu_ps(m1, wh + 16), s1);
      // 32 bf16 in row order: pairs (2i, 2i + 1) are 32-bit words i.
      const __m512i pairs = (__m512i)_mm512_cvtne2ps_pbh(x1, x0);
      const int64_t n_pairs = (std::min<int64_t>(32, rows - p) + 1) / 2;
      _mm512_mask_storeu_epi32(wp + h * wp_stride + p / 2, x86::FirstLanes(n_pairs), pairs);
    }
  }
}

// scores[h * m.rows + p] (dot products of unscaled codes) *= head_scale[h] * RowScales(m)[p]:
// after the dot products, so the gathers of row scales never wait in their dependency chain.
WC_BF16DOT void ScaleByRows(const RowsRef& k, const float* head_scale, int n_heads, float* scores) {
  for (int64_t p = 0; p < k.rows; p += 16) {
    const __mmask16 lanes = x86::FirstLanes(k.rows - p);
    const __m512 row_scale = RowScales(k, p);
    for (int h = 0; h < n_heads; ++h) {
      float* s = scores + h * k.rows + p;
      const __m512 factor = _mm512_mul_ps(_mm512_set1_ps(head_scale[h]), row_scale);
      _mm512_mask_storeu_ps(s, lanes, _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, s), factor));
    }
  }
}

// The query as bf16 in Widen's order and the heads' scale, in per-thread buffers.
struct Bf16Query {
  const uint16_t* qp;       // [n_heads rounded up to 4, cols]; heads past n_heads: not written
  const float* head_scale;  // [n_heads]
  Bf16Query(const float* q, int n_heads, int64_t cols, float scale) {
    thread_local std::vector<uint16_t> qp_buf;
    thread_local std::vector<float> hs_buf;
    qp_buf.resize(static_cast<size_t>((n_heads + 3) / 4 * 4 * cols));
    hs_buf.assign(static_cast<size_t>(n_heads), scale);
    QueryWords(q, n_heads, cols, qp_buf.data());
    qp = qp_buf.data();
    head_scale = hs_buf.data();
  }
};

// The P.V weights as bf16 pairs (PairWeights) in a per-thread buffer: [n_heads, stride].
struct Bf16Weights {
  const uint32_t* wp;
  int64_t stride;
  Bf16Weights(const float* w, int64_t w_stride, int n_heads, const RowsRef& v)
      : stride((v.rows + 1) / 2 + 16) {
    thread_local std::vector<uint32_t> buf;
    buf.resize(static_cast<size_t>(n_heads * stride));
    PairWeights(w, w_stride, n_heads, v, buf.data(), stride);
    wp = buf.data();
  }
};

}  // namespace

void Bf16DotScoresRowsInLanes(const float* q, int n_heads, const RowsRef& k, float scale,
                              float* scores, const RowsRef& along) {
  const Bf16Query query(q, n_heads, k.cols, scale);
  switch (k.cols) {
    case 64:
      return ScoresTransposed<1>(query.qp, n_heads, query.head_scale, k, scores, along);
    case 128:
      return ScoresTransposed<2>(query.qp, n_heads, query.head_scale, k, scores, along);
    default:
      return ScoresTransposed<0>(query.qp, n_heads, query.head_scale, k, scores, along);
  }
}

void Bf16DotScoresGroups(const float* q, int n_heads, const RowsRef& k, float scale, float* scores,
                         const RowsRef& along) {
  const int64_t cols = k.cols;
  const Bf16Query query(q, n_heads, cols, scale);
  uint16_t* qp = const_cast<uint16_t*>(query.qp);
  for (int h0 = 0; h0 < n_heads; h0 += 4) {  // one group when n_heads <= 4, as the table calls it
    const int n = std::min(4, n_heads - h0), group = n == 3 ? 4 : n;  // 3 heads: a zero fourth
    uint16_t* qg = qp + h0 * cols;
    if (group > n) std::fill(qg + n * cols, qg + group * cols, uint16_t{0});
    x86::WithGroupAndWidth(group, cols, [&](auto nh_c, auto kc_c) {
      ScoresGroup<decltype(nh_c)::value, decltype(kc_c)::value>(qg, n, k, scores + h0 * k.rows,
                                                                h0 == 0 ? along : RowsRef{});
    });
  }
  ScaleByRows(k, query.head_scale, n_heads, scores);
}

void Bf16DotWeightedShared(const float* w, int64_t w_stride, int n_heads, const RowsRef& v,
                           float* o, const RowsRef& along) {
  const Bf16Weights pairs(w, w_stride, n_heads, v);
  WeightedAllHeads(pairs.wp, pairs.stride, n_heads, v, o, along);
}

void Bf16DotWeightedGroups(const float* w, int64_t w_stride, int n_heads, const RowsRef& v,
                           float* o, const RowsRef& along) {
  const Bf16Weights pairs(w, w_stride, n_heads, v);
  x86::ForHeadGroupsOf4(n_heads, [&](auto nh, int h0) {
    for (int64_t c = 0; c < v.cols; c += 64)
      WeightedBlock<decltype(nh)::value>(pairs.wp + h0 * pairs.stride, pairs.stride, v, c,
                                         o + h0 * v.cols, h0 == 0 ? along : RowsRef{});
  });
}

}  // namespace wc

#pragma GCC diagnostic pop
#pragma GCC pop_options
