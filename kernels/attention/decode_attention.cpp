// The portable decode-attention kernels' entry points (Highway): the scores of rows of any format,
// each format's f32 FMAs in its own file (decode_attention_scores.h), the weighted sum of V in
// decode_attention_weighted.cpp - and the softmax's MaxOf / ExpShiftSum. kernel_table.cpp runs
// them where no faster kernel of the format applies.
#include "kernels/attention/decode_attention.h"

#include "kernels/attention/decode_attention_f32.h"
#include "kernels/attention/decode_attention_scores.h"
#include "kernels/attention/prefetch_stream.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "util/error.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention/decode_attention.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// (after highway.h, which they need; a blank line keeps clang-format from sorting them first)

#include "hwy/contrib/math/math-inl.h"
#include "kernels/lane_sums-inl.h"

HWY_BEFORE_NAMESPACE();
namespace wc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

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

// The sum over lane_sums-inl.h's 16 lanes (x[p] in lane p mod 16), so its bits are the same on
// every FMA target: a narrower target keeps one accumulator per part of the 16 lanes.
float ExpShiftSumImpl(float* x, int64_t n, float shift) {
  const DF df;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(df));
  constexpr int kParts = SumParts<DF>();
  const int64_t step = SumStep<DF>();
  const VF vs = hn::Set(df, shift);
  VF sum[kParts];
  for (int part = 0; part < kParts; ++part) sum[part] = hn::Zero(df);
  int64_t i = 0;
  for (; i + step <= n; i += step) {
    for (int part = 0; part < kParts; ++part) {
      const VF e = hn::Exp(df, hn::Sub(hn::LoadU(df, x + i + part * nl), vs));
      hn::StoreU(e, df, x + i + part * nl);
      sum[part] = hn::Add(sum[part], e);
    }
  }
  if (i < n) {  // the tail through the same vector code, padded with -inf (exp = 0)
    HWY_ALIGN float tail[kSumLanes];
    std::fill(tail, tail + step, -std::numeric_limits<float>::infinity());
    std::memcpy(tail, x + i, static_cast<size_t>(n - i) * sizeof(float));
    for (int part = 0; part < kParts; ++part) {
      const VF e = hn::Exp(df, hn::Sub(hn::Load(df, tail + part * nl), vs));
      hn::Store(e, df, tail + part * nl);
      sum[part] = hn::Add(sum[part], e);
    }
    std::memcpy(x + i, tail, static_cast<size_t>(n - i) * sizeof(float));
  }
  return SumOfLanes16(df, sum);
}

}  // namespace HWY_NAMESPACE
}  // namespace wc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wc {

HWY_EXPORT(MaxOfImpl);
HWY_EXPORT(ExpShiftSumImpl);

void F32FmaScoresPerHead(const float* q, int n_heads, const RowsRef& k, const float* head_scale,
                         float* scores, const RowsRef& along) {
  switch (k.format) {
    case RowFormat::kF32:
    case RowFormat::kF16:
      return F32FmaScoresFloat(q, n_heads, k, head_scale, scores, along);
    case RowFormat::kBF16:
      return F32FmaScoresBF16(q, n_heads, k, head_scale, scores, along);
    case RowFormat::kInt8:
      return F32FmaScoresInt8(q, n_heads, k, head_scale, scores, along);
    case RowFormat::kFP8E4M3:
      return F32FmaScoresFP8E4M3(q, n_heads, k, head_scale, scores, along);
    case RowFormat::kFP8E5M2:
      return F32FmaScoresFP8E5M2(q, n_heads, k, head_scale, scores, along);
    case RowFormat::kBFP8:
      return F32FmaScoresBfp8(q, n_heads, k, head_scale, scores, along);
  }
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
