// The portable decode-attention kernels (Highway): f32 FMAs on rows of any format, dequantized in
// registers (row_sources-inl.h) - the scores here, the weighted sum of V in
// decode_attention_weighted.cpp - and the softmax's MaxOf / ExpShiftSum. kernel_table.cpp runs them
// where no faster kernel of the format applies.
#include "kernels/attention/decode_attention.h"

#include "kernels/attention/decode_attention_f32.h"
#include "kernels/attention/prefetch_stream.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "util/bf16.h"
#include "util/error.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention/decode_attention.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// (after highway.h, which they need; a blank line keeps clang-format from sorting them first)

#include "hwy/cache_control.h"
#include "hwy/contrib/math/math-inl.h"
#include "kernels/attention/head_groups-inl.h"
#include "kernels/attention/row_sources-inl.h"

HWY_BEFORE_NAMESPACE();
namespace wc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

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

}  // namespace HWY_NAMESPACE
}  // namespace wc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wc {

HWY_EXPORT(AttentionScoresImpl);
HWY_EXPORT(MaxOfImpl);
HWY_EXPORT(ExpShiftSumImpl);

void F32FmaScoresPerHead(const float* q, int n_heads, const RowsRef& k, const float* head_scale,
                         float* scores, const RowsRef& along) {
  HWY_DYNAMIC_DISPATCH(AttentionScoresImpl)(q, n_heads, k, head_scale, scores, along);
}

void F32FmaScores(const float* q, int n_heads, const RowsRef& k, float scale, float* scores,
                  const RowsRef& along) {
  thread_local std::vector<float> head_scale;  // [n_heads]
  head_scale.assign(static_cast<size_t>(n_heads), scale);
  F32FmaScoresPerHead(q, n_heads, k, head_scale.data(), scores, along);
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

}  // namespace wc
#endif  // HWY_ONCE
