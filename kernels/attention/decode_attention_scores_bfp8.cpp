// The portable decode-attention scores (score_rows-inl.h) of BFP8_B rows (blocks of 16 values
// sharing an exponent).
#include "kernels/attention/decode_attention_scores.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention/decode_attention_scores_bfp8.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// (after highway.h, which they need; a blank line keeps clang-format from sorting them first)

#include "kernels/attention/score_rows-inl.h"

HWY_BEFORE_NAMESPACE();
namespace wc {
namespace HWY_NAMESPACE {

void ScoresBfp8Impl(const float* q, int n_heads, const RowsRef& k, const float* head_scale,
                    float* scores, const RowsRef& along) {
  ScoresOf<RowFormat::kBFP8>(q, n_heads, k, head_scale, scores, along);
}

}  // namespace HWY_NAMESPACE
}  // namespace wc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wc {

HWY_EXPORT(ScoresBfp8Impl);

void F32FmaScoresBfp8(const float* q, int n_heads, const RowsRef& k, const float* head_scale,
                      float* scores, const RowsRef& along) {
  HWY_DYNAMIC_DISPATCH(ScoresBfp8Impl)(q, n_heads, k, head_scale, scores, along);
}

}  // namespace wc
#endif  // HWY_ONCE
