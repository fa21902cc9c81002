#include "kernels/decode_attention.h"

#include "kernels/decode_attention_bf16dot.h"
#include "kernels/decode_attention_vnni.h"
#include "kernels/prefetch_stream.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "util/bf16.h"
#include "util/error.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/decode_attention.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// (after highway.h, which they need; a blank line keeps clang-format from sorting them first)

#include "hwy/cache_control.h"
#include "hwy/contrib/math/math-inl.h"
#include "kernels/row_sources-inl.h"

HWY_BEFORE_NAMESPACE();
namespace wc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Rows ahead of the one being computed whose cache lines are prefetched: the chunk streams from
// DRAM, and the prefetches keep enough misses in flight while the core computes.
constexpr int64_t kPrefetchRows = kChunkPrefetchRows;

// The rows of a second matrix (the V of this chunk, the K of the next), prefetched at the pace a
// kernel walks its own rows, so memory keeps streaming while the core computes.
using Along = PrefetchStream;

// Calls fn(std::integral_constant<int, NH>(), h, along_or_none) for the heads [h, h + NH) in
// groups of 4 and one last group of 1-3: the head-group kernels are templates on NH. Only the
// first group prefetches `along` (one pass over it is enough).
template <class Fn>
HWY_INLINE void ForHeadGroups(int n_heads, const Along& along, const Fn& fn) {
  int h = 0;
  for (; h + 4 <= n_heads; h += 4)
    fn(std::integral_constant<int, 4>(), h, h == 0 ? along : Along());
  const Along& rest = h == 0 ? along : Along();
  switch (n_heads - h) {
    case 3:
      return fn(std::integral_constant<int, 3>(), h, rest);
    case 2:
      return fn(std::integral_constant<int, 2>(), h, rest);
    case 1:
      return fn(std::integral_constant<int, 1>(), h, rest);
    default:
      return;
  }
}

#if HWY_TARGET != HWY_SCALAR
// The 128-bit blocks of v added together (one block for 128-bit targets).
template <class D>
HWY_INLINE auto FoldBlocks(D d, hn::Vec<D> v) {
  if constexpr (hn::MaxLanes(D()) <= 4) {
    (void)d;
    return v;
  } else {
    const hn::Half<D> dh;
    return FoldBlocks(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  }
}
#endif

// out[i] = (sum of the lanes of (a, b, c, d)[i]) * scale[i], i < 4, each with the same fixed
// pairing (so a vector's sum does not depend on its position or on the other three).
HWY_INLINE void Sums4(DF df, VF a, VF b, VF c, VF d, const float* scale, float* out) {
#if HWY_TARGET == HWY_SCALAR
  out[0] = hn::GetLane(a) * scale[0];
  out[1] = hn::GetLane(b) * scale[1];
  out[2] = hn::GetLane(c) * scale[2];
  out[3] = hn::GetLane(d) * scale[3];
  (void)df;
#else
  const hn::Repartition<uint64_t, DF> du64;
  // Per 128-bit block: [a0+a2, b0+b2, a1+a3, b1+b3] and the same for c, d.
  const VF ab = hn::Add(hn::InterleaveLower(df, a, b), hn::InterleaveUpper(df, a, b));
  const VF cd = hn::Add(hn::InterleaveLower(df, c, d), hn::InterleaveUpper(df, c, d));
  // Per block: [a, b, c, d] partial sums; then the blocks added together.
  const VF abcd = hn::Add(
      hn::BitCast(df, hn::InterleaveLower(du64, hn::BitCast(du64, ab), hn::BitCast(du64, cd))),
      hn::BitCast(df, hn::InterleaveUpper(du64, hn::BitCast(du64, ab), hn::BitCast(du64, cd))));
  const hn::Full128<float> d4;
  hn::StoreU(hn::Mul(FoldBlocks(df, abcd), hn::LoadU(d4, scale)), d4, out);
#endif
}
HWY_INLINE void Sums4(DF df, VF a, VF b, VF c, VF d, float scale, float* out) {
  const float s4[4] = {scale, scale, scale, scale};
  Sums4(df, a, b, c, d, s4, out);
}

// The dot products of NR <= 4 rows (from row p) with NH <= 4 heads, one accumulator per row and
// head: each Q vector is loaded once for the NR rows. A row's operations never depend on NR or
// on the other rows, so grouping rows does not change any score.
template <int NR, int NH, class Rows>
HWY_INLINE void ScoreRows(const float* HWY_RESTRICT q, int64_t cols, const Rows& k, int64_t p,
                          int64_t rows, const float* head_scale, float* HWY_RESTRICT scores) {
  const DF df;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(df));
  VF acc[NH][4];
  for (int h = 0; h < NH; ++h)
    for (int r = 0; r < 4; ++r) acc[h][r] = hn::Zero(df);
  int64_t c = 0;
  for (; c + nl <= cols; c += nl) {
    VF kv[NR];
    for (int r = 0; r < NR; ++r) kv[r] = k.Vec(df, p + r, c);
    for (int h = 0; h < NH; ++h) {
      const VF qv = hn::LoadU(df, q + h * cols + c);
      for (int r = 0; r < NR; ++r) acc[h][r] = hn::MulAdd(qv, kv[r], acc[h][r]);
    }
  }
  // Scaled codes: (q . codes) * (head_scale * the row's scale); otherwise (q . row) * head_scale.
  float row_scale[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  for (int r = 0; r < NR; ++r) {
    if constexpr (Rows::kScaled) row_scale[r] = k.Scale(p + r);
  }
  for (int h = 0; h < NH; ++h) {
    float factor[4];
    for (int r = 0; r < 4; ++r)
      factor[r] = Rows::kScaled ? head_scale[h] * row_scale[r] : head_scale[h];
    if (NR == 4 && c == cols) {  // whole rows in vectors: four scores per store
      Sums4(df, acc[h][0], acc[h][1], acc[h][2], acc[h][3], factor, scores + h * rows + p);
      continue;
    }
    float sums[4];
    Sums4(df, acc[h][0], acc[h][1], acc[h][2], acc[h][3], 1.0f, sums);
    for (int r = 0; r < NR; ++r) {
      float sum = sums[r];
      for (int64_t cc = c; cc < cols; ++cc) sum += q[h * cols + cc] * k.At(p + r, cc);
      scores[h * rows + p + r] = sum * factor[r];
    }
  }
}

// Scores of NH <= 4 heads against every row, four rows at a time.
template <int NH, class Rows>
HWY_INLINE void ScoresHeads(const float* HWY_RESTRICT q, int64_t cols, const Rows& k, int64_t rows,
                            const float* head_scale, float* HWY_RESTRICT scores,
                            const Along& along) {
  static_assert(NH >= 1 && NH <= 4, "up to 4 heads per pass");
  int64_t p = 0;
  for (; p + 4 <= rows; p += 4) {
    k.ahead.template Rows<3>(p + kPrefetchRows, p + kPrefetchRows + 4);
    for (int64_t r = p; r < p + 4; ++r) along.Row(r);
    ScoreRows<4, NH>(q, cols, k, p, rows, head_scale, scores);
  }
  for (; p < rows; ++p) ScoreRows<1, NH>(q, cols, k, p, rows, head_scale, scores);
}

#if HWY_TARGET != HWY_SCALAR
// ScoreRows for BF16 K rows, 2 * lanes columns per load: one 32-bit load holds columns 2i (low
// half) and 2i + 1 (high half), so the even columns are (bits << 16) and the odd ones
// (bits & 0xffff0000) - no widening shuffles. qd is Q with each 2 * lanes block deinterleaved the
// same way: [even columns, odd columns].
template <int NR, int NH>
HWY_INLINE void ScoreRowsBF16(const float* HWY_RESTRICT qd, int64_t cols,
                              const Half16Rows<DType::kBF16>& k, int64_t p, int64_t rows,
                              const float* head_scale, float* HWY_RESTRICT scores) {
  const DF df;
  const hn::RebindToUnsigned<DF> du;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(df));
  const auto high = hn::Set(du, 0xffff0000u);
  VF acc[NH][4];
  for (int h = 0; h < NH; ++h)
    for (int r = 0; r < 4; ++r) acc[h][r] = hn::Zero(df);
  for (int64_t c = 0; c < cols; c += 2 * nl) {
    VF ke[NR], ko[NR];
    for (int r = 0; r < NR; ++r) {
      const auto bits =
          hn::LoadU(du, reinterpret_cast<const uint32_t*>(k.base + (p + r) * k.stride + c));
      ke[r] = hn::BitCast(df, hn::ShiftLeft<16>(bits));
      ko[r] = hn::BitCast(df, hn::And(bits, high));
    }
    for (int h = 0; h < NH; ++h) {
      const VF qe = hn::LoadU(df, qd + h * cols + c), qo = hn::LoadU(df, qd + h * cols + c + nl);
      for (int r = 0; r < NR; ++r) {
        acc[h][r] = hn::MulAdd(qe, ke[r], acc[h][r]);
        acc[h][r] = hn::MulAdd(qo, ko[r], acc[h][r]);
      }
    }
  }
  for (int h = 0; h < NH; ++h) {
    if (NR == 4) {
      Sums4(df, acc[h][0], acc[h][1], acc[h][2], acc[h][3], head_scale[h], scores + h * rows + p);
    } else {
      float sums[4];
      Sums4(df, acc[h][0], acc[h][1], acc[h][2], acc[h][3], head_scale[h], sums);
      for (int r = 0; r < NR; ++r) scores[h * rows + p + r] = sums[r];
    }
  }
}

template <int NH>
HWY_INLINE void ScoresHeadsBF16(const float* HWY_RESTRICT qd, int64_t cols,
                                const Half16Rows<DType::kBF16>& k, int64_t rows,
                                const float* head_scale, float* HWY_RESTRICT scores,
                                const Along& along) {
  int64_t p = 0;
  for (; p + 4 <= rows; p += 4) {
    k.ahead.template Rows<3>(p + kPrefetchRows, p + kPrefetchRows + 4);
    for (int64_t r = p; r < p + 4; ++r) along.Row(r);
    ScoreRowsBF16<4, NH>(qd, cols, k, p, rows, head_scale, scores);
  }
  for (; p < rows; ++p) ScoreRowsBF16<1, NH>(qd, cols, k, p, rows, head_scale, scores);
}

void ScoresBF16(const float* q, int n_heads, const Half16Rows<DType::kBF16>& k, int64_t rows,
                int64_t cols, const float* head_scale, float* scores, const Along& along) {
  const DF df;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(df));
  thread_local std::vector<float> qd;  // [n_heads, cols] deinterleaved
  qd.resize(static_cast<size_t>(n_heads) * cols);
  for (int h = 0; h < n_heads; ++h)
    for (int64_t c = 0; c < cols; c += 2 * nl)
      for (int64_t i = 0; i < nl; ++i) {
        qd[h * cols + c + i] = q[h * cols + c + 2 * i];
        qd[h * cols + c + nl + i] = q[h * cols + c + 2 * i + 1];
      }
  ForHeadGroups(n_heads, along, [&](auto nh, int h, const Along& al) {
    ScoresHeadsBF16<decltype(nh)::value>(qd.data() + h * cols, cols, k, rows, head_scale + h,
                                         scores + h * rows, al);
  });
}
#endif

template <class Rows>
void ScoresImpl(const float* q, int n_heads, const Rows& k, int64_t rows, int64_t cols,
                const float* head_scale, float* scores, const Along& along) {
  ForHeadGroups(n_heads, along, [&](auto nh, int h, const Along& al) {
    ScoresHeads<decltype(nh)::value>(q + h * cols, cols, k, rows, head_scale + h, scores + h * rows,
                                     al);
  });
}

void AttentionScoresImpl(const float* q, int n_heads, const RowsRef& k, const float* head_scale,
                         float* scores, const RowsRef& along_m) {
  const Along along(along_m);
  WithRows(k, [&](const auto& rows) {
#if HWY_TARGET != HWY_SCALAR
    if constexpr (std::is_same_v<std::decay_t<decltype(rows)>, Half16Rows<DType::kBF16>>) {
      if (k.cols % (2 * static_cast<int64_t>(hn::Lanes(DF()))) == 0)
        return ScoresBF16(q, n_heads, rows, k.rows, k.cols, head_scale, scores, along);
    }
#endif
    ScoresImpl(q, n_heads, rows, k.rows, k.cols, head_scale, scores, along);
  });
}

float MaxOfImpl(const float* x, int64_t n) {
  const DF df;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(df));
  VF m = hn::Set(df, -std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + nl <= n; i += nl) m = hn::Max(m, hn::LoadU(df, x + i));
  float r = hn::GetLane(hn::MaxOfLanes(df, m));
  for (; i < n; ++i) r = std::max(r, x[i]);
  return r;
}

float ExpShiftSumImpl(float* x, int64_t n, float shift) {
  const DF df;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(df));
  const VF vs = hn::Set(df, shift);
  VF sum = hn::Zero(df);
  int64_t i = 0;
  for (; i + nl <= n; i += nl) {
    const VF e = hn::Exp(df, hn::Sub(hn::LoadU(df, x + i), vs));
    hn::StoreU(e, df, x + i);
    sum = hn::Add(sum, e);
  }
  if (i < n) {  // the tail through the same vector code, padded with -inf (exp = 0)
    HWY_ALIGN float tail[HWY_MAX_BYTES / sizeof(float)];
    std::fill(tail, tail + nl, -std::numeric_limits<float>::infinity());
    std::memcpy(tail, x + i, static_cast<size_t>(n - i) * sizeof(float));
    const VF e = hn::Exp(df, hn::Sub(hn::Load(df, tail), vs));
    hn::Store(e, df, tail);
    std::memcpy(x + i, tail, static_cast<size_t>(n - i) * sizeof(float));
    sum = hn::Add(sum, e);
  }
  return hn::GetLane(hn::SumOfLanes(df, sum));
}

// o[h, c0:c0 + NV * lanes] for NH heads over every row, accumulators in registers.
template <int NH, int NV, class Rows>
HWY_INLINE void WeightedBlock(const float* HWY_RESTRICT w, int64_t w_stride, const Rows& v,
                              int64_t rows, int64_t cols, int64_t c0, float* HWY_RESTRICT o,
                              const Along& along) {
  const DF df;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(df));
  VF acc[NH][NV];
  for (int h = 0; h < NH; ++h)
    for (int j = 0; j < NV; ++j) acc[h][j] = hn::LoadU(df, o + h * cols + c0 + j * nl);
  for (int64_t p = 0; p < rows; ++p) {
    if (c0 == 0) {
      v.ahead.template Row<3>(p + kPrefetchRows);
      along.Row(p);
    }
    VF vv[NV];
    for (int j = 0; j < NV; ++j) vv[j] = v.Vec(df, p, c0 + j * nl);
    float row_scale = 1.0f;  // scaled codes: the row's scale goes into its weights
    if constexpr (Rows::kScaled) row_scale = v.Scale(p);
    for (int h = 0; h < NH; ++h) {
      const VF a =
          hn::Set(df, Rows::kScaled ? w[h * w_stride + p] * row_scale : w[h * w_stride + p]);
      for (int j = 0; j < NV; ++j) acc[h][j] = hn::MulAdd(a, vv[j], acc[h][j]);
    }
  }
  for (int h = 0; h < NH; ++h)
    for (int j = 0; j < NV; ++j) hn::StoreU(acc[h][j], df, o + h * cols + c0 + j * nl);
}

template <int NH, class Rows>
HWY_INLINE void WeightedHeads(const float* w, int64_t w_stride, const Rows& v, int64_t rows,
                              int64_t cols, float* o, const Along& along) {
  const DF df;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(df));
  int64_t c = 0;
  for (; c + 4 * nl <= cols; c += 4 * nl)
    WeightedBlock<NH, 4>(w, w_stride, v, rows, cols, c, o, along);
  for (; c + nl <= cols; c += nl)
    WeightedBlock<NH, 1>(w, w_stride, v, rows, cols, c, o, c == 0 ? along : Along());
  for (; c < cols; ++c) {  // scalar tail columns, same order over rows
    for (int h = 0; h < NH; ++h) {
      float acc = o[h * cols + c];
      for (int64_t p = 0; p < rows; ++p) {
        float a = w[h * w_stride + p];
        if constexpr (Rows::kScaled) a *= v.Scale(p);
        acc = std::fma(a, v.At(p, c), acc);
      }
      o[h * cols + c] = acc;
    }
  }
}

template <class Rows>
void WeightedImpl(const float* w, int64_t w_stride, int n_heads, const Rows& v, int64_t rows,
                  int64_t cols, float* o, const Along& along) {
  ForHeadGroups(n_heads, along, [&](auto nh, int h, const Along& al) {
    WeightedHeads<decltype(nh)::value>(w + h * w_stride, w_stride, v, rows, cols, o + h * cols, al);
  });
}

void AccumulateWeightedRowsImpl(const float* w, int64_t w_stride, int n_heads, const RowsRef& v,
                                float* o, const RowsRef& along_m) {
  const Along along(along_m);
  WithRows(v, [&](const auto& rows) {
    WeightedImpl(w, w_stride, n_heads, rows, v.rows, v.cols, o, along);
  });
}

// int8 rows with int16 weights (decode_attention_vnni.h), one head at a time, for groups too small
// to share the widened pairs: exact int32 sums per column, then o = fma(float(sum), unit[h], o) -
// the VNNI kernel's arithmetic, portably.
void WeightedInt16Impl(const int16_t* wq, int64_t wq_stride, const float* unit, int n_heads,
                       const RowsRef& v, float* o) {
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<int8_t, DF> d8;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(di)), cols = v.cols;
  const uint8_t* codes = v.data + (v.row_scale ? 2 : 0);
  for (int h = 0; h < n_heads; ++h) {
    const int16_t* wh = wq + h * wq_stride;
    float* oh = o + h * cols;
    int64_t c = 0;
    for (; c + nl <= cols; c += nl) {
      auto acc = hn::Zero(di);
      for (int64_t p = 0; p < v.rows; ++p) {
        const auto code = hn::PromoteTo(
            di, hn::LoadU(d8, reinterpret_cast<const int8_t*>(codes + p * v.row_bytes + c)));
        acc = hn::Add(acc, hn::Mul(code, hn::Set(di, wh[p])));
      }
      // A fused multiply-add on every target (MulAdd is two roundings without FMA).
      HWY_ALIGN int32_t sums[HWY_MAX_BYTES / sizeof(int32_t)];
      hn::Store(acc, di, sums);
      for (int64_t l = 0; l < nl; ++l)
        oh[c + l] = std::fma(static_cast<float>(sums[l]), unit[h], oh[c + l]);
    }
    for (; c < cols; ++c) {
      int32_t acc = 0;
      for (int64_t p = 0; p < v.rows; ++p)
        acc += wh[p] * static_cast<int8_t>(codes[p * v.row_bytes + c]);
      oh[c] = std::fma(static_cast<float>(acc), unit[h], oh[c]);
    }
  }
}

#if HWY_TARGET != HWY_SCALAR
// int8 Q.K^T without the VNNI kernel (decode_attention_vnni.h's contract, bit for bit): the heads
// in the lanes of a vector, the query transposed once per call into words of two int16 (qt:
// [groups][cols / 2][lanes]), each row's codes widened to int16 once and its words broadcast, so
// one int16 multiply-add pair (vpmaddwd) per word and 4 rows at a time give every head's partial
// sums with no horizontal reduction; exact int32, then float(dot) * (head_scale * row_scale).
// An odd last column pairs with a zero.
void Int8ScoresHeadsInLanesImpl(const int8_t* q8, int n_heads, const float* head_scale,
                                const RowsRef& k, float* scores) {
  const hn::ScalableTag<int32_t> di;
  const hn::Repartition<int16_t, decltype(di)> d16;
  const hn::Rebind<float, decltype(di)> df;
  const hn::Rebind<int8_t, decltype(d16)> d8;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(di)), cols = k.cols, n2 = (cols + 1) / 2;
  const int64_t rows = k.rows, groups = (n_heads + nl - 1) / nl;
  const int64_t n16 = static_cast<int64_t>(hn::Lanes(d16));
  thread_local std::vector<int32_t> qt;    // [groups, n2, nl]; heads past n_heads: 0
  thread_local std::vector<int16_t> krow;  // [4, cols + n16]: rows widened
  thread_local std::vector<float> hs;      // [groups * nl] head scales
  qt.assign(static_cast<size_t>(groups * n2 * nl), 0);
  krow.resize(static_cast<size_t>(4 * (cols + n16)));
  hs.assign(static_cast<size_t>(groups * nl), 0.0f);
  for (int h = 0; h < n_heads; ++h) {
    hs[h] = head_scale[h];
    for (int64_t w = 0; w < n2; ++w) {
      const uint32_t lo = static_cast<uint16_t>(q8[h * cols + 2 * w]);
      const uint32_t hi = 2 * w + 1 < cols ? static_cast<uint16_t>(q8[h * cols + 2 * w + 1]) : 0;
      qt[((h / nl) * n2 + w) * nl + h % nl] = static_cast<int32_t>(lo | hi << 16);
    }
  }
  const int64_t code0 = k.row_scale ? 2 : 0, kstride = cols + n16;
  HWY_ALIGN float out[HWY_MAX_BYTES / sizeof(float)];
  for (int64_t p0 = 0; p0 < rows; p0 += 4) {
    const int nr = static_cast<int>(std::min<int64_t>(4, rows - p0));
    for (int r = 0; r < 4; ++r) {  // a tail repeats its last row (not stored)
      const int8_t* codes = reinterpret_cast<const int8_t*>(
          k.data + (p0 + std::min(r, nr - 1)) * k.row_bytes + code0);
      int16_t* dst = krow.data() + r * kstride;
      int64_t c = 0;
      for (; c + n16 <= cols; c += n16)
        hn::StoreU(hn::PromoteTo(d16, hn::LoadU(d8, codes + c)), d16, dst + c);
      for (; c < cols; ++c) dst[c] = codes[c];
      dst[cols] = 0;  // an odd last column's partner
    }
    float row_scale[4];
    for (int r = 0; r < nr; ++r) row_scale[r] = k.RowScale(p0 + r);
    for (int64_t g = 0; g < groups; ++g) {
      const int32_t* qg = qt.data() + g * n2 * nl;
      auto a0 = hn::Zero(di), a1 = hn::Zero(di), a2 = hn::Zero(di), a3 = hn::Zero(di);
      auto b0 = hn::Zero(di), b1 = hn::Zero(di), b2 = hn::Zero(di), b3 = hn::Zero(di);
      for (int64_t w = 0; w < n2; ++w) {
        const auto qw = hn::BitCast(d16, hn::LoadU(di, qg + w * nl));
        int32_t kw[4];
        for (int r = 0; r < 4; ++r) std::memcpy(&kw[r], krow.data() + r * kstride + 2 * w, 4);
        a0 = hn::ReorderWidenMulAccumulate(di, qw, hn::BitCast(d16, hn::Set(di, kw[0])), a0, b0);
        a1 = hn::ReorderWidenMulAccumulate(di, qw, hn::BitCast(d16, hn::Set(di, kw[1])), a1, b1);
        a2 = hn::ReorderWidenMulAccumulate(di, qw, hn::BitCast(d16, hn::Set(di, kw[2])), a2, b2);
        a3 = hn::ReorderWidenMulAccumulate(di, qw, hn::BitCast(d16, hn::Set(di, kw[3])), a3, b3);
      }
      const decltype(a0) acc[4] = {
          hn::RearrangeToOddPlusEven(a0, b0), hn::RearrangeToOddPlusEven(a1, b1),
          hn::RearrangeToOddPlusEven(a2, b2), hn::RearrangeToOddPlusEven(a3, b3)};
      const auto vhs = hn::LoadU(df, hs.data() + g * nl);
      const int valid = static_cast<int>(std::min<int64_t>(nl, n_heads - g * nl));
      for (int r = 0; r < nr; ++r) {
        // float(dot) * (head_scale * row_scale), the contract's two products.
        const auto factor = hn::Mul(vhs, hn::Set(df, row_scale[r]));
        hn::Store(hn::Mul(hn::ConvertTo(df, acc[r]), factor), df, out);
        for (int j = 0; j < valid; ++j) scores[(g * nl + j) * rows + p0 + r] = out[j];
      }
    }
  }
}

// int8 P.V without the VNNI kernel (its contract, bit for bit): rows taken in pairs, each pair's
// codes widened to int16 and interleaved once per segment for every head (vw), a pair's two
// int16 weights one broadcast word, one int16 multiply-add pair per 2 * lanes products; exact
// int32 sums, then o = fma(float(sum), unit[h], o). Columns past the last whole vector: scalar.
void WeightedInt16PairsImpl(const int16_t* wq, int64_t wq_stride, const float* unit, int n_heads,
                            const RowsRef& v, float* o) {
  const hn::ScalableTag<int32_t> di;
  const hn::Repartition<int16_t, decltype(di)> d16;
  const hn::Rebind<int8_t, decltype(d16)> d8;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(di)), n16 = 2 * nl;
  const int64_t rows = v.rows, cols = v.cols, n_pairs = (rows + 1) / 2, blocks = cols / n16;
  const uint8_t* codes = v.data + (v.row_scale ? 2 : 0);
  // vw: [n_pairs, blocks, 2 (interleaved low / high halves), n16] int16.
  thread_local std::vector<int16_t> vw;
  vw.resize(static_cast<size_t>(n_pairs * blocks * 2 * n16));
  for (int64_t i = 0; i < n_pairs; ++i) {
    const int8_t* ra = reinterpret_cast<const int8_t*>(codes + 2 * i * v.row_bytes);
    const int8_t* rb = 2 * i + 1 < rows ? ra + v.row_bytes : ra;  // odd last row: weight 0
    for (int64_t j = 0; j < blocks; ++j) {
      const auto a = hn::PromoteTo(d16, hn::LoadU(d8, ra + j * n16));
      const auto b = hn::PromoteTo(d16, hn::LoadU(d8, rb + j * n16));
      int16_t* dst = vw.data() + ((i * blocks + j) * 2) * n16;
      hn::StoreU(hn::InterleaveLower(d16, a, b), d16, dst);
      hn::StoreU(hn::InterleaveUpper(d16, a, b), d16, dst + n16);
    }
  }
  // The column of each 32-bit lane of the low / high vectors: the same interleave of indices.
  HWY_ALIGN int32_t lane_col[2][HWY_MAX_BYTES / sizeof(int32_t)];
  {
    const auto idx = hn::Iota(d16, 0);
    const auto mask = hn::Set(di, 0xffff);
    hn::Store(hn::And(hn::BitCast(di, hn::InterleaveLower(d16, idx, idx)), mask), di, lane_col[0]);
    hn::Store(hn::And(hn::BitCast(di, hn::InterleaveUpper(d16, idx, idx)), mask), di, lane_col[1]);
  }
  HWY_ALIGN int32_t sums[2][HWY_MAX_BYTES / sizeof(int32_t)];
  for (int h = 0; h < n_heads; ++h) {
    const int16_t* wh = wq + h * wq_stride;
    for (int64_t j = 0; j < blocks; ++j) {
      auto lo0 = hn::Zero(di), lo1 = hn::Zero(di), hi0 = hn::Zero(di), hi1 = hn::Zero(di);
      for (int64_t i = 0; i < n_pairs; ++i) {
        int32_t pair;
        std::memcpy(&pair, wh + 2 * i, 4);
        const auto wp = hn::BitCast(d16, hn::Set(di, pair));
        const int16_t* src = vw.data() + ((i * blocks + j) * 2) * n16;
        lo0 = hn::ReorderWidenMulAccumulate(di, hn::LoadU(d16, src), wp, lo0, lo1);
        hi0 = hn::ReorderWidenMulAccumulate(di, hn::LoadU(d16, src + n16), wp, hi0, hi1);
      }
      hn::Store(hn::RearrangeToOddPlusEven(lo0, lo1), di, sums[0]);
      hn::Store(hn::RearrangeToOddPlusEven(hi0, hi1), di, sums[1]);
      float* oh = o + h * cols + j * n16;
      for (int m = 0; m < 2; ++m)
        for (int64_t l = 0; l < nl; ++l) {
          float& out = oh[lane_col[m][l]];
          out = std::fma(static_cast<float>(sums[m][l]), unit[h], out);
        }
    }
    for (int64_t c = blocks * n16; c < cols; ++c) {
      int32_t acc = 0;
      for (int64_t p = 0; p < rows; ++p)
        acc += wh[p] * static_cast<int8_t>(codes[p * v.row_bytes + c]);
      o[h * cols + c] = std::fma(static_cast<float>(acc), unit[h], o[h * cols + c]);
    }
  }
}
#else
// HWY_SCALAR (no lanes to share): the same integers one at a time, and the per-head P.V kernel.
void Int8ScoresHeadsInLanesImpl(const int8_t* q8, int n_heads, const float* head_scale,
                                const RowsRef& k, float* scores) {
  const int64_t cols = k.cols, code0 = k.row_scale ? 2 : 0;
  for (int64_t p = 0; p < k.rows; ++p) {
    const int8_t* codes = reinterpret_cast<const int8_t*>(k.data + p * k.row_bytes + code0);
    const float row_scale = k.RowScale(p);
    for (int h = 0; h < n_heads; ++h) {
      int32_t dot = 0;
      for (int64_t c = 0; c < cols; ++c) dot += q8[h * cols + c] * codes[c];
      scores[h * k.rows + p] = static_cast<float>(dot) * (head_scale[h] * row_scale);
    }
  }
}
void WeightedInt16PairsImpl(const int16_t* wq, int64_t wq_stride, const float* unit, int n_heads,
                            const RowsRef& v, float* o) {
  WeightedInt16Impl(wq, wq_stride, unit, n_heads, v, o);
}
#endif

}  // namespace HWY_NAMESPACE
}  // namespace wc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wc {

// Heads per KV group from which the portable int8 kernels put heads in lanes (Q.K^T) and share
// V's widened row pairs (P.V); fewer heads would leave most lanes idle.
constexpr int kHeadsInLanes = 8;

HWY_EXPORT(AttentionScoresImpl);
HWY_EXPORT(MaxOfImpl);
HWY_EXPORT(ExpShiftSumImpl);
HWY_EXPORT(AccumulateWeightedRowsImpl);
HWY_EXPORT(WeightedInt16Impl);
HWY_EXPORT(Int8ScoresHeadsInLanesImpl);
HWY_EXPORT(WeightedInt16PairsImpl);

void AttentionScores(const float* q, int n_heads, const RowsRef& k, float scale, float* scores,
                     const RowsRef& along) {
  if (Bf16DotUsable(k)) return Bf16DotScores(q, n_heads, k, scale, scores, along);
  thread_local std::vector<float> head_scale;  // [n_heads]
  head_scale.assign(static_cast<size_t>(n_heads), scale);
  if (k.format == RowFormat::kInt8 && k.cols <= kInt8QueryMaxCols) {
    thread_local std::vector<int8_t> q8;  // [n_heads, cols]
    thread_local std::vector<float> q8f;  // the same values as f32 for the few-heads path
    q8.resize(static_cast<size_t>(n_heads * k.cols));
    QuantizeQueryInt8(q, n_heads, k.cols, scale, q8.data(), head_scale.data());
    if (VnniInt8ScoresUsable(k))
      return Int8ScoresVnni(q8.data(), n_heads, head_scale.data(), k, scores, along);
    if (n_heads >= kHeadsInLanes) {
      PrefetchRows(along, along.rows);  // V, while the scores are computed
      return HWY_DYNAMIC_DISPATCH(Int8ScoresHeadsInLanesImpl)(q8.data(), n_heads, head_scale.data(),
                                                              k, scores);
    }
    q8f.assign(q8.begin(), q8.end());  // few heads: the f32 kernels on the integer values
    return HWY_DYNAMIC_DISPATCH(AttentionScoresImpl)(q8f.data(), n_heads, k, head_scale.data(),
                                                     scores, along);
  }
  HWY_DYNAMIC_DISPATCH(AttentionScoresImpl)(q, n_heads, k, head_scale.data(), scores, along);
}

std::string AttentionKernelName(const RowsRef& m) {
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  const std::string simd = targets.empty() ? "scalar" : hwy::TargetName(targets.front());
  if (m.format == RowFormat::kInt8 && m.cols <= kInt8QueryMaxCols)
    return VnniInt8ScoresUsable(m) ? "int8 dot (AVX-512 VNNI)" : "int8 dot (" + simd + ")";
  if (Bf16DotUsable(m)) return "bf16 dot (AVX-512 BF16)";
  return "f32 FMA (" + simd + ")";
}

void PrefetchRows(const RowsRef& m, int64_t n) {
  PrefetchStream(m).Rows<3>(0, n);
}

float MaxOf(const float* x, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(MaxOfImpl)(x, n);
}

float ExpShiftSum(float* x, int64_t n, float shift) {
  WC_CHECK(std::isfinite(shift), "ExpShiftSum needs a finite shift");
  return HWY_DYNAMIC_DISPATCH(ExpShiftSumImpl)(x, n, shift);
}

void AccumulateWeightedRows(const float* w, int64_t w_stride, int n_heads, const RowsRef& v,
                            float* o, const RowsRef& along) {
  if (Bf16DotUsable(v)) return Bf16DotWeighted(w, w_stride, n_heads, v, o, along);
  if (v.format != RowFormat::kInt8)
    return HWY_DYNAMIC_DISPATCH(AccumulateWeightedRowsImpl)(w, w_stride, n_heads, v, o, along);
  // int8: int16 weights per segment of rows (decode_attention_vnni.h).
  constexpr int64_t kSeg = kInt8WeightSegmentRows, kWqStride = kSeg + 2;
  thread_local std::vector<float> row_scale(kSeg);
  thread_local std::vector<int16_t> wq;  // [n_heads, kWqStride]
  thread_local std::vector<float> unit;  // [n_heads]
  wq.resize(static_cast<size_t>(n_heads * kWqStride));
  unit.resize(static_cast<size_t>(n_heads));
  for (int64_t s0 = 0; s0 < v.rows; s0 += kSeg) {
    RowsRef seg = v;
    seg.rows = std::min(kSeg, v.rows - s0);
    seg.data = v.data + s0 * v.row_bytes;
    QuantizeWeightsInt16(w + s0, w_stride, n_heads, seg, row_scale.data(), wq.data(), kWqStride,
                         unit.data());
    if (VnniInt8WeightsUsable(seg)) {
      Int8WeightedVnni(wq.data(), kWqStride, unit.data(), n_heads, seg, o,
                       s0 + kSeg >= v.rows ? along : RowsRef{});
    } else if (n_heads >= kHeadsInLanes) {
      HWY_DYNAMIC_DISPATCH(WeightedInt16PairsImpl)
      (wq.data(), kWqStride, unit.data(), n_heads, seg, o);
    } else {
      HWY_DYNAMIC_DISPATCH(WeightedInt16Impl)(wq.data(), kWqStride, unit.data(), n_heads, seg, o);
    }
  }
}

}  // namespace wc
#endif  // HWY_ONCE
