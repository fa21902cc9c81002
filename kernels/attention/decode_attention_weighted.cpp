// The portable decode-attention kernels' weighted sum of V rows (Highway): o[h] += sum over rows
// of w[h, p] * v[p], f32 FMAs on rows of any format dequantized in registers (row_sources-inl.h).
// Its own file so that it compiles beside the scores (decode_attention_scores_*.cpp, one file per
// KV format): it is every row format times every head group times every SIMD target.
#include "kernels/attention/decode_attention_f32.h"

#include <cmath>
#include <cstdint>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention/decode_attention_weighted.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// (after highway.h, which they need; a blank line keeps clang-format from sorting them first)

#include "kernels/attention/head_groups-inl.h"
#include "kernels/attention/row_sources-inl.h"

HWY_BEFORE_NAMESPACE();
namespace wc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

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

}  // namespace HWY_NAMESPACE
}  // namespace wc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wc {

HWY_EXPORT(AccumulateWeightedRowsImpl);

void F32FmaWeighted(const float* w, int64_t w_stride, int n_heads, const RowsRef& v, float* o,
                    const RowsRef& along) {
  HWY_DYNAMIC_DISPATCH(AccumulateWeightedRowsImpl)(w, w_stride, n_heads, v, o, along);
}

}  // namespace wc
#endif  // HWY_ONCE
