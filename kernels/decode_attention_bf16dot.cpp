#include "kernels/decode_attention_bf16dot.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "kernels/decode_attention.h"
#include "kernels/x86_avx512.h"
#include "util/bf16.h"

#define WC_BF16DOT \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx512vbmi")))

namespace wc {
namespace {

using x86::kAheadRows;

std::atomic<bool> g_bf16dot_enabled{true};

bool CpuHasBf16Dot() {
  static const bool has = x86::CpuHasAvx512() && __builtin_cpu_supports("avx512bf16") &&
                          __builtin_cpu_supports("avx512vbmi");
  return has;
}

// The kernels read E4M3 through its f16 bit pattern (its value times 2^-8), as the f32 kernels
// do; the row scale carries the 2^8 back.
float CodeFactor(RowFormat f) {
  return f == RowFormat::kFP8E4M3 ? 256.0f : 1.0f;
}

// The scales of rows [p, p + 16) (lanes past m.rows: 0): the row or tensor scale times the code
// factor, or 1 for BFP8 (its exponents are widened into the values).
WC_BF16DOT inline __m512 RowScales(const RowsRef& m, int64_t p) {
  if (m.format == RowFormat::kBFP8)
    return _mm512_maskz_mov_ps(x86::FirstLanes(m.rows - p), _mm512_set1_ps(1.0f));
  return x86::RowScales16(m, p, CodeFactor(m.format));
}

// The bf16 of every magnitude code m < 128 of one fp8 format (E4M3 as its f16 bit pattern), or of
// the integer m (BFP8's magnitudes), split into high and low bytes: two 128-entry tables, one
// vpermi2b each; the lookup ignores the sign bit, which is ORed into the high byte.
struct CodeTables {
  alignas(64) uint8_t hi[128];
  alignas(64) uint8_t lo[128];
};
struct AllTables {
  CodeTables e4m3, e5m2, integers;
  AllTables() {
    for (int m = 0; m < 128; ++m) {
      const uint16_t i = F32ToBF16(static_cast<float>(m));  // exact: 7 bits
      integers.hi[m] = static_cast<uint8_t>(i >> 8);
      integers.lo[m] = static_cast<uint8_t>(i & 0xff);
      const uint16_t a = F32ToBF16(F16ToF32(static_cast<uint16_t>(m << 7)));  // exact
      const uint16_t b = F32ToBF16(F16ToF32(static_cast<uint16_t>(m << 8)));
      e4m3.hi[m] = static_cast<uint8_t>(a >> 8);
      e4m3.lo[m] = static_cast<uint8_t>(a & 0xff);
      e5m2.hi[m] = static_cast<uint8_t>(b >> 8);
      e5m2.lo[m] = static_cast<uint8_t>(b & 0xff);
    }
  }
};
const CodeTables& TablesFor(RowFormat f) {
  static const AllTables tables;
  return f == RowFormat::kFP8E4M3   ? tables.e4m3
         : f == RowFormat::kFP8E5M2 ? tables.e5m2
                                    : tables.integers;
}

// 64 values of a row as 64 bf16 in two vectors: w0 holds columns 16j + i and w1 columns
// 16j + 8 + i of 128-bit block j, i < 8 (the in-block order of the byte unpacks).
//   fp8: the codes by table. Exact.
//   BFP8: the magnitudes m by table (bf16 of the integer), the sign ORed, then the block's shared
//   exponent e added to the exponent field: bf16(+-m * 2^(e - 133)), BFP8_B's value. 128-bit
//   block j of the vectors is BFP8 block c / 16 + j. Exact where the value is a normal bf16;
//   below 2^-126 (e < 7 only) it is 0, as vdpbf16ps reads every subnormal, and above the bf16
//   range (e = 255: Inf and NaN's exponent, which the encoder never writes) +-Inf.
struct Widen {
  __m512i hi0, hi1, lo0, lo1, sign;
  int64_t code_offset = 0;  // fp8: bytes before a row's codes (its bf16 scale)
  int64_t blocks = 0;       // BFP8: cols / 16 (the exponents lead the row); 0 for fp8
  WC_BF16DOT explicit Widen(const RowsRef& m) {
    const CodeTables& t = TablesFor(m.format);
    hi0 = _mm512_load_si512(t.hi);
    hi1 = _mm512_load_si512(t.hi + 64);
    lo0 = _mm512_load_si512(t.lo);
    lo1 = _mm512_load_si512(t.lo + 64);
    sign = _mm512_set1_epi8(static_cast<char>(0x80));
    if (m.format == RowFormat::kBFP8) {
      blocks = m.cols / 16;
    } else {
      code_offset = m.row_scale ? 2 : 0;
    }
  }
  // The high and low bytes of the 64 codes' bf16.
  WC_BF16DOT inline __attribute__((always_inline)) void Bytes(__m512i codes, __m512i* hi,
                                                              __m512i* lo) const {
    // hi | (codes & 0x80)
    *hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(hi0, codes, hi1), codes, sign, 0xf8);
    *lo = _mm512_permutex2var_epi8(lo0, codes, lo1);
  }
  WC_BF16DOT inline __attribute__((always_inline)) void Words(const uint8_t* p, __m512i* w0,
                                                              __m512i* w1) const {
    __m512i hi, lo;
    Bytes(_mm512_loadu_si512(p), &hi, &lo);
    *w0 = _mm512_unpacklo_epi8(lo, hi);
    *w1 = _mm512_unpackhi_epi8(lo, hi);
  }
  // Columns [c, c + 64) of the row starting at `row`.
  WC_BF16DOT inline __attribute__((always_inline)) void Row(const uint8_t* row, int64_t c,
                                                            __m512i* w0, __m512i* w1) const {
    if (blocks == 0) return Words(row + code_offset + c, w0, w1);
    Words(row + blocks + c, w0, w1);
    int32_t four;  // the exponents of blocks c / 16 .. c / 16 + 3
    std::memcpy(&four, row + c / 16, 4);
    // e: 16-bit lanes of 128-bit block j = exponent byte j.
    const __m512i spread = _mm512_set_epi64(
        0x8003800380038003LL, 0x8003800380038003LL, 0x8002800280028002LL, 0x8002800280028002LL,
        0x8001800180018001LL, 0x8001800180018001LL, 0x8000800080008000LL, 0x8000800080008000LL);
    const __m512i e = _mm512_shuffle_epi8(_mm512_set1_epi32(four), spread);
    const __m512i delta = _mm512_slli_epi16(_mm512_sub_epi16(e, _mm512_set1_epi16(133)), 7);
    const __m512i magnitude = _mm512_set1_epi16(0x7fff);
    if (_mm512_cmplt_epu16_mask(_mm512_sub_epi16(e, _mm512_set1_epi16(7)),
                                _mm512_set1_epi16(248)) == 0xffffffffu) {
      // Every e in [7, 254]: the new exponent field, 127..133 + e - 133, stays in [1, 254].
      *w0 = _mm512_mask_add_epi16(*w0, _mm512_test_epi16_mask(*w0, magnitude), *w0, delta);
      *w1 = _mm512_mask_add_epi16(*w1, _mm512_test_epi16_mask(*w1, magnitude), *w1, delta);
      return;
    }
    Rare(w0, e, delta);
    Rare(w1, e, delta);
  }
  // Exponents outside [7, 254]: lane by lane, a field below 1 gives +-0 and above 254 +-Inf.
  WC_BF16DOT inline void Rare(__m512i* w, __m512i e, __m512i delta) const {
    const __mmask32 nonzero = _mm512_test_epi16_mask(*w, _mm512_set1_epi16(0x7fff));
    const __m512i field =
        _mm512_add_epi16(_mm512_and_si512(_mm512_srli_epi16(*w, 7), _mm512_set1_epi16(0xff)),
                         _mm512_sub_epi16(e, _mm512_set1_epi16(133)));  // signed, in [-133, 255]
    const __m512i signs = _mm512_and_si512(*w, _mm512_set1_epi16(static_cast<int16_t>(0x8000)));
    const __mmask32 under = _mm512_cmplt_epi16_mask(field, _mm512_set1_epi16(1));
    const __mmask32 over = _mm512_cmpgt_epi16_mask(field, _mm512_set1_epi16(254));
    __m512i out = _mm512_add_epi16(*w, delta);
    out = _mm512_mask_mov_epi16(out, nonzero & under, signs);
    out = _mm512_mask_mov_epi16(out, nonzero & over,
                                _mm512_or_si512(signs, _mm512_set1_epi16(0x7f80)));
    *w = _mm512_mask_mov_epi16(out, ~nonzero, *w);
  }
};

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

// Groups of fewer than x86::kWidenOnceHeads heads (widening and transposing a block would cost
// more than the heads save): scores of NH heads (qp: [NH, cols]
// bf16 in Widen's column order per 64-column block) against every row, R = 16 / NH rows per tile
// (accumulator h * R + r: head h, row r), unscaled; the scales are applied after.
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
    int h = 0;
    for (; h + 8 <= n_heads; h += 8)
      HeadsOfBlock<8>(qp + h * cols, n2, kt, head_scale + h, row_scale, store,
                      scores + h * rows + p, rows);
    if (h + 4 <= n_heads) {
      HeadsOfBlock<4>(qp + h * cols, n2, kt, head_scale + h, row_scale, store,
                      scores + h * rows + p, rows);
      h += 4;
    }
    if (h + 2 <= n_heads) {
      HeadsOfBlock<2>(qp + h * cols, n2, kt, head_scale + h, row_scale, store,
                      scores + h * rows + p, rows);
      h += 2;
    }
    if (h < n_heads)
      HeadsOfBlock<1>(qp + h * cols, n2, kt, head_scale + h, row_scale, store,
                      scores + h * rows + p, rows);
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

// At least x86::kWidenOnceHeads heads: each block of kPairBlock row pairs is widened and
// interleaved once into vw (WeightedBlock's d[4] per pair and 64 columns) and read by every group
// of 4 heads; each head's f32 accumulators (WeightedBlock's lane order) live in `sums` between
// blocks, so every output is the same chain of vdpbf16ps over the rows in order as WeightedBlock's,
// bit for bit.
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
    for (int h = 0; h < n_heads; h += 4) {
      const int nh = std::min(4, n_heads - h);
      for (int64_t j = 0; j < n64; ++j) {
        const uint32_t* wh = wp + h * wp_stride;
        float* sh = sums + h * cols;
        switch (nh) {
          case 1:
            AccumulatePairs<1>(wh, wp_stride, pair0, vw, n_pairs, n64, j, sh, cols);
            break;
          case 2:
            AccumulatePairs<2>(wh, wp_stride, pair0, vw, n_pairs, n64, j, sh, cols);
            break;
          case 3:
            AccumulatePairs<3>(wh, wp_stride, pair0, vw, n_pairs, n64, j, sh, cols);
            break;
          default:
            AccumulatePairs<4>(wh, wp_stride, pair0, vw, n_pairs, n64, j, sh, cols);
        }
      }
    }
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

}  // namespace

bool Bf16DotUsable(const RowsRef& m) {
  return (m.format == RowFormat::kFP8E4M3 || m.format == RowFormat::kFP8E5M2 ||
          m.format == RowFormat::kBFP8) &&
         m.cols % 64 == 0 && CpuHasBf16Dot() && g_bf16dot_enabled.load(std::memory_order_relaxed);
}

void SetBf16DotKernels(bool enabled) {
  g_bf16dot_enabled.store(enabled);
}

bool CpuHasBf16DotKernels() {
  return CpuHasBf16Dot();
}

void Bf16DotScores(const float* q, int n_heads, const RowsRef& k, float scale, float* scores,
                   const RowsRef& along) {
  const int64_t cols = k.cols;
  thread_local std::vector<uint16_t> qp;  // [max(n_heads, 4), cols] bf16 in Widen's order
  qp.resize(static_cast<size_t>(std::max(n_heads, 4) * cols));
  thread_local std::vector<float> head_scale;  // [n_heads]
  head_scale.assign(static_cast<size_t>(n_heads), scale);
  QueryWords(q, n_heads, cols, qp.data());
  if (n_heads >= x86::kWidenOnceHeads) {
    switch (cols) {
      case 64:
        return ScoresTransposed<1>(qp.data(), n_heads, head_scale.data(), k, scores, along);
      case 128:
        return ScoresTransposed<2>(qp.data(), n_heads, head_scale.data(), k, scores, along);
      default:
        return ScoresTransposed<0>(qp.data(), n_heads, head_scale.data(), k, scores, along);
    }
  }
  const int group = n_heads == 3 ? 4 : n_heads;  // 3 heads: a zero fourth
  std::fill(qp.begin() + n_heads * cols, qp.begin() + group * cols, uint16_t{0});
  x86::WithGroupAndWidth(group, cols, [&](auto nh_c, auto kc_c) {
    ScoresGroup<decltype(nh_c)::value, decltype(kc_c)::value>(qp.data(), n_heads, k, scores, along);
  });
  ScaleByRows(k, head_scale.data(), n_heads, scores);
}

void Bf16DotWeighted(const float* w, int64_t w_stride, int n_heads, const RowsRef& v, float* o,
                     const RowsRef& along) {
  const int64_t wp_stride = (v.rows + 1) / 2 + 16;
  thread_local std::vector<uint32_t> wp;  // [n_heads, wp_stride]
  wp.resize(static_cast<size_t>(n_heads * wp_stride));
  PairWeights(w, w_stride, n_heads, v, wp.data(), wp_stride);
  if (n_heads >= x86::kWidenOnceHeads)
    return WeightedAllHeads(wp.data(), wp_stride, n_heads, v, o, along);
  for (int h0 = 0; h0 < n_heads; h0 += 4) {
    const int nh = std::min(4, n_heads - h0);
    const uint32_t* wg = wp.data() + h0 * wp_stride;
    float* og = o + h0 * v.cols;
    for (int64_t c = 0; c < v.cols; c += 64) {
      const RowsRef& al = h0 == 0 ? along : RowsRef{};
      switch (nh) {
        case 1:
          WeightedBlock<1>(wg, wp_stride, v, c, og, al);
          break;
        case 2:
          WeightedBlock<2>(wg, wp_stride, v, c, og, al);
          break;
        case 3:
          WeightedBlock<3>(wg, wp_stride, v, c, og, al);
          break;
        default:
          WeightedBlock<4>(wg, wp_stride, v, c, og, al);
      }
    }
  }
}

}  // namespace wc
