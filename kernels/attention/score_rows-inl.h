// The portable decode-attention scores, per SIMD target: f32 FMAs of the query heads with rows of
// any format (row_sources-inl.h), heads in groups of 4 (head_groups-inl.h), four rows at a time.
// ScoresOf<formats...> runs them on rows of those formats; each KV format's instantiation is
// compiled in its own file (decode_attention_scores_*.cpp), side by side. A Highway per-target
// header: included once per target by each of those files' foreach_target.

// Include guard toggled per target (Highway's -inl.h convention).
#if defined(WC_KERNELS_SCORE_ROWS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef WC_KERNELS_SCORE_ROWS_INL_H_
#undef WC_KERNELS_SCORE_ROWS_INL_H_
#else
#define WC_KERNELS_SCORE_ROWS_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"
#include "kernels/attention/head_groups-inl.h"
#include "kernels/attention/kv_rows.h"
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

template <class Rows>
void ScoresImpl(const float* q, int n_heads, const Rows& k, int64_t rows, int64_t cols,
                const float* head_scale, float* scores, const Along& along) {
  ForHeadGroups(n_heads, along, [&](auto nh, int h, const Along& al) {
    ScoresHeads<decltype(nh)::value>(q + h * cols, cols, k, rows, head_scale + h, scores + h * rows,
                                     al);
  });
}

// scores[h * k.rows + p] = head_scale[h] * dot(q[h], k[p]) (scaled codes: times the row's scale)
// for rows k of one of kFormats (another format: nothing is written).
template <RowFormat... kFormats>
HWY_INLINE void ScoresOf(const float* q, int n_heads, const RowsRef& k, const float* head_scale,
                         float* scores, const RowsRef& along_m) {
  static_assert(sizeof...(kFormats) > 0, "name the formats");
  const Along along(along_m);
  WithRows<kFormats...>(k, [&](const auto& rows) {
    ScoresImpl(q, n_heads, rows, k.rows, k.cols, head_scale, scores, along);
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace wc
HWY_AFTER_NAMESPACE();

#endif  // WC_KERNELS_SCORE_ROWS_INL_H_
