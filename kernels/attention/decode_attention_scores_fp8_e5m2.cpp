// The portable decode-attention scores (score_rows-inl.h) of fp8 E5M2 (f16's top byte) rows, row
// or tensor scale.
#include "kernels/attention/decode_attention_scores.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention/decode_attention_scores_fp8_e5m2.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// (after highway.h, which they need; a blank line keeps clang-format from sorting them first)

#include "kernels/attention/score_rows-inl.h"

HWY_BEFORE_NAMESPACE();
namespace wc {
namespace HWY_NAMESPACE {

void ScoresFP8E5M2Impl(const float* q, int n_heads, const RowsRef& k, const float* head_scale,
                       float* scores, const RowsRef& along) {
  ScoresOf<RowFormat::kFP8E5M2>(q, n_heads, k, head_scale, scores, along);
}

}  // namespace HWY_NAMESPACE
}  // namespace wc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wc {

HWY_EXPORT(ScoresFP8E5M2Impl);

void F32FmaScoresFP8E5M2(const float* q, int n_heads, const RowsRef& k, const float* head_scale,
                         float* scores, const RowsRef& along) {
  HWY_DYNAMIC_DISPATCH(ScoresFP8E5M2Impl)(q, n_heads, k, head_scale, scores, along);
}

}  // namespace wc
#endif  // HWY_ONCE
