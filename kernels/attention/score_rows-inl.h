// The portable decode-attention scores, per SIMD target: f32 FMAs of the query heads with rows of
// any format (row_sources-inl.h), heads in groups of 4 (head_groups-inl.h), four rows at a time,
// each a sum over lane_sums-inl.h's 16 lanes (so AVX2 and AVX-512 give the same bits).
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
#include "kernels/lane_sums-inl.h"

HWY_BEFORE_NAMESPACE();
namespace wc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR
// Per 128-bit block, the block sums of (a, b, c, d): lane 4b + i of the result is the sum of the
// four lanes of a, b, c or d (i = 0..3) in block b, (l0 + l2) + (l1 + l3) as lane_sums-inl.h.
HWY_INLINE VF BlockSums4(DF df, VF a, VF b, VF c, VF d) {
  const hn::Repartition<uint64_t, DF> du64;
  // Per 128-bit block: [a0+a2, b0+b2, a1+a3, b1+b3] and the same for c, d.
  const VF ab = hn::Add(hn::InterleaveLower(df, a, b), hn::InterleaveUpper(df, a, b));
  const VF cd = hn::Add(hn::InterleaveLower(df, c, d), hn::InterleaveUpper(df, c, d));
  // Per block: [a, b, c, d] partial sums.
  return hn::Add(
      hn::BitCast(df, hn::InterleaveLower(du64, hn::BitCast(du64, ab), hn::BitCast(du64, cd))),
      hn::BitCast(df, hn::InterleaveUpper(du64, hn::BitCast(du64, ab), hn::BitCast(du64, cd))));
}
#endif

// The dot products of NR <= 4 rows (from row p) with NH <= 4 heads, one accumulator per row and
// head, each a sum over 16 lanes (lane_sums-inl.h): the same bits on every FMA target. Each Q
// vector is loaded once for the NR rows. A row's operations never depend on NR or on the other
// rows, so grouping rows does not change any score. A target narrower than 16 lanes walks the
// columns once per part of the 16 lanes (AVX2: twice, columns 0-7 then 8-15 of every 16), so its
// accumulators fit its registers as the AVX-512 ones do.
template <int NR, int NH, class Rows>
HWY_INLINE void ScoreRows(const float* HWY_RESTRICT q, int64_t cols, const Rows& k, int64_t p,
                          int64_t rows, const float* head_scale, float* HWY_RESTRICT scores) {
  const DF df;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(df));
  constexpr int kParts = SumParts<DF>();
  const int64_t step = SumStep<DF>();
  const int64_t whole = cols - cols % step;  // the columns the 16 lanes take; the rest in order
  // Scaled codes: (q . codes) * (head_scale * the row's scale); otherwise (q . row) * head_scale.
  float row_scale[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  for (int r = 0; r < NR; ++r) {
    if constexpr (Rows::kScaled) row_scale[r] = k.Scale(p + r);
  }
#if HWY_TARGET == HWY_SCALAR
  (void)nl;
  (void)kParts;
  for (int h = 0; h < NH; ++h) {
    for (int r = 0; r < NR; ++r) {
      float sum = 0.0f;
      for (int64_t c = 0; c < whole; ++c)
        sum = hn::GetLane(
            hn::MulAdd(hn::Set(df, q[h * cols + c]), k.Vec(df, p + r, c), hn::Set(df, sum)));
      const float factor = Rows::kScaled ? head_scale[h] * row_scale[r] : head_scale[h];
      scores[h * rows + p + r] = sum * factor;
    }
  }
#else
  VF parts[NH][kParts];  // per head: each part's block sums of the NR rows (BlockSums4)
  for (int part = 0; part < kParts; ++part) {
    VF acc[NH][4];
    for (int h = 0; h < NH; ++h)
      for (int r = 0; r < 4; ++r) acc[h][r] = hn::Zero(df);
    for (int64_t c = part * nl; c < whole; c += step) {
      VF kv[NR];
      for (int r = 0; r < NR; ++r) kv[r] = k.Vec(df, p + r, c);
      for (int h = 0; h < NH; ++h) {
        const VF qv = hn::LoadU(df, q + h * cols + c);
        for (int r = 0; r < NR; ++r) acc[h][r] = hn::MulAdd(qv, kv[r], acc[h][r]);
      }
    }
    for (int h = 0; h < NH; ++h)
      parts[h][part] = BlockSums4(df, acc[h][0], acc[h][1], acc[h][2], acc[h][3]);
  }
  const hn::Full128<float> d4;
  for (int h = 0; h < NH; ++h) {
    float factor[4];
    for (int r = 0; r < 4; ++r)
      factor[r] = Rows::kScaled ? head_scale[h] * row_scale[r] : head_scale[h];
    const auto sums4 = FoldBlocks(df, JoinParts<kParts>(parts[h]));  // [row 0, .., row 3]
    if (NR == 4 && whole == cols) {  // no columns left: four scores per store
      hn::StoreU(hn::Mul(sums4, hn::LoadU(d4, factor)), d4, scores + h * rows + p);
      continue;
    }
    HWY_ALIGN float sums[4];
    hn::Store(sums4, d4, sums);
    for (int r = 0; r < NR; ++r) {
      float sum = sums[r];
      for (int64_t c = whole; c < cols; ++c) sum += q[h * cols + c] * k.At(p + r, c);
      scores[h * rows + p + r] = sum * factor[r];
    }
  }
#endif
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
