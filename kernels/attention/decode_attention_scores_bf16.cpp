// The portable decode-attention scores of bf16 rows: two columns a 32-bit load (the even ones
// shifted up, the odd ones masked) against a deinterleaved query where rows are whole 32-column
// steps, score_rows-inl.h's widening loads otherwise; either way each score's bits are the same on
// every FMA target (lane_sums-inl.h).
#include "kernels/attention/decode_attention_scores.h"

#include <cstdint>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention/decode_attention_scores_bf16.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// (after highway.h, which they need; a blank line keeps clang-format from sorting them first)

#include "kernels/attention/score_rows-inl.h"

HWY_BEFORE_NAMESPACE();
namespace wc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR
// ScoreRows for BF16 K rows, 2 * lanes columns per load: one 32-bit load holds columns 2i (low
// half) and 2i + 1 (high half), so the even columns are (bits << 16) and the odd ones
// (bits & 0xffff0000) - no widening shuffles. qd is Q with each 2 * lanes block deinterleaved the
// same way: [even columns, odd columns]. The 16 lanes of lane_sums-inl.h: lane i sums columns
// 2i then 2i + 1 of every 32 (requires cols % 32 == 0), a narrower target taking them in parts.
template <int NR, int NH>
HWY_INLINE void ScoreRowsBF16(const float* HWY_RESTRICT qd, int64_t cols,
                              const Half16Rows<DType::kBF16>& k, int64_t p, int64_t rows,
                              const float* head_scale, float* HWY_RESTRICT scores) {
  const DF df;
  const hn::RebindToUnsigned<DF> du;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(df));
  const auto high = hn::Set(du, 0xffff0000u);
  constexpr int kParts = SumParts<DF>();
  VF parts[NH][kParts];  // per head: each part's block sums of the NR rows (BlockSums4)
  for (int part = 0; part < kParts; ++part) {
    VF acc[NH][4];
    for (int h = 0; h < NH; ++h)
      for (int r = 0; r < 4; ++r) acc[h][r] = hn::Zero(df);
    for (int64_t c = 2 * nl * part; c < cols; c += 2 * kSumLanes) {
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
    for (int h = 0; h < NH; ++h)
      parts[h][part] = BlockSums4(df, acc[h][0], acc[h][1], acc[h][2], acc[h][3]);
  }
  const hn::Full128<float> d4;
  for (int h = 0; h < NH; ++h) {
    const auto scores4 =
        hn::Mul(FoldBlocks(df, JoinParts<kParts>(parts[h])), hn::Set(d4, head_scale[h]));
    if (NR == 4) {
      hn::StoreU(scores4, d4, scores + h * rows + p);
    } else {
      HWY_ALIGN float sums[4];
      hn::Store(scores4, d4, sums);
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

void ScoresBF16Impl(const float* q, int n_heads, const RowsRef& k, const float* head_scale,
                    float* scores, const RowsRef& along_m) {
#if HWY_TARGET != HWY_SCALAR
  if (k.cols % (2 * kSumLanes) == 0) {  // the same rule on every target: the same bits
    const Along along(along_m);
    WithRows<RowFormat::kBF16>(k, [&](const Half16Rows<DType::kBF16>& rows) {
      ScoresBF16(q, n_heads, rows, k.rows, k.cols, head_scale, scores, along);
    });
    return;
  }
#endif
  ScoresOf<RowFormat::kBF16>(q, n_heads, k, head_scale, scores, along_m);
}

}  // namespace HWY_NAMESPACE
}  // namespace wc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wc {

HWY_EXPORT(ScoresBF16Impl);

void F32FmaScoresBF16(const float* q, int n_heads, const RowsRef& k, const float* head_scale,
                      float* scores, const RowsRef& along) {
  HWY_DYNAMIC_DISPATCH(ScoresBF16Impl)(q, n_heads, k, head_scale, scores, along);
}

}  // namespace wc
#endif  // HWY_ONCE
