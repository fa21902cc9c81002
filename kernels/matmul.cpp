#include "kernels/matmul.h"

#include <omp.h>

#include <cmath>
#include <cstring>

#include "util/bf16.h"
#include "util/error.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// (after highway.h, which it needs; a blank line keeps clang-format from sorting it first)

#include "kernels/lane_sums-inl.h"

HWY_BEFORE_NAMESPACE();
namespace wc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

struct TagF32 {
  using T = float;
};
struct TagBF16 {
  using T = uint16_t;
};
struct TagF16 {
  using T = uint16_t;
};

template <class D>
HWY_INLINE hn::Vec<D> LoadW(TagF32, D df, const float* p) {
  return hn::LoadU(df, p);
}
template <class D>
HWY_INLINE hn::Vec<D> LoadW(TagBF16, D df, const uint16_t* p) {
  const hn::RebindToUnsigned<D> du32;
  const hn::Rebind<uint16_t, D> du16;
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, p))));
}
template <class D>
HWY_INLINE hn::Vec<D> LoadW(TagF16, D df, const uint16_t* p) {
  const hn::Rebind<hwy::float16_t, D> dh;
  return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
}

HWY_INLINE float ScalarW(TagF32, const float* p) {
  float f;
  std::memcpy(&f, p, 4);
  return f;
}
HWY_INLINE float ScalarW(TagBF16, const uint16_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return BF16ToF32(h);
}
HWY_INLINE float ScalarW(TagF16, const uint16_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return F16ToF32(h);
}

// res[t * NR + i] = dot(x[t * x_stride, 0:cols], w[i * w_stride, 0:cols]) for t < NT, i < NR: a
// register tile of NR weight rows by NT tokens, so each loaded x vector feeds NR FMAs and each
// weight vector NT. Every element takes the same operation sequence whatever the tile shape and
// the SIMD target (the header's contract): FMAs into lane_sums-inl.h's 16 lanes, their sum in its
// tree, then a scalar tail in k order.
template <int NR, int NT, class Tag>
HWY_INLINE void DotTile(const float* HWY_RESTRICT x, int64_t x_stride,
                        const typename Tag::T* HWY_RESTRICT w, int64_t w_stride, int64_t cols,
                        float* res) {
  const hn::ScalableTag<float> df;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(df));
  constexpr int kParts = SumParts<decltype(df)>();
  const int64_t step = SumStep<decltype(df)>();
  using V = hn::Vec<decltype(df)>;
  V acc[NT][NR][kParts];
  for (int t = 0; t < NT; ++t)
    for (int i = 0; i < NR; ++i)
      for (int part = 0; part < kParts; ++part) acc[t][i][part] = hn::Zero(df);
  int64_t k = 0;
  for (; k + step <= cols; k += step) {
    for (int part = 0; part < kParts; ++part) {
      V wv[NR];
      for (int i = 0; i < NR; ++i) wv[i] = LoadW(Tag(), df, w + i * w_stride + k + part * nl);
      for (int t = 0; t < NT; ++t) {
        const V xv = hn::LoadU(df, x + t * x_stride + k + part * nl);
        for (int i = 0; i < NR; ++i) acc[t][i][part] = hn::MulAdd(xv, wv[i], acc[t][i][part]);
      }
    }
  }
  for (int t = 0; t < NT; ++t) {
    for (int i = 0; i < NR; ++i) {
      float s = SumOfLanes16(df, acc[t][i]);
      for (int64_t kk = k; kk < cols; ++kk)
        s += x[t * x_stride + kk] * ScalarW(Tag(), w + i * w_stride + kk);
      res[t * NR + i] = s;
    }
  }
}

template <class Tag>
void RowsImpl(const float* x, int64_t n_tokens, int64_t x_stride, const MatrixRef& w,
              const float* bias, float* y, int64_t y_stride, int64_t row_begin, int64_t r0,
              int64_t r1) {
  // AVX-512: 12 accumulators + 4 weight vectors + 1 x vector; a narrower target holds each
  // accumulator in SumParts vectors, so it takes one token at a time (AVX2: 8 + 4 + 1).
  constexpr int kRows = 4, kTokens = SumParts<hn::ScalableTag<float>>() == 1 ? 3 : 1;
  const auto* base = static_cast<const typename Tag::T*>(w.data);
  float res[kRows * kTokens];
  auto store = [&](int64_t t, int nt, int64_t r, int nr) {
    for (int tt = 0; tt < nt; ++tt)
      for (int i = 0; i < nr; ++i)
        y[(t + tt) * y_stride + (r + i - row_begin)] =
            res[tt * nr + i] + (bias != nullptr ? bias[r + i] : 0.0f);
  };
  int64_t r = r0;
  for (; r + kRows <= r1; r += kRows) {
    const typename Tag::T* wr = base + r * w.row_stride;
    int64_t t = 0;
    for (; t + kTokens <= n_tokens; t += kTokens) {
      DotTile<kRows, kTokens, Tag>(x + t * x_stride, x_stride, wr, w.row_stride, w.cols, res);
      store(t, kTokens, r, kRows);
    }
    if (n_tokens - t == 2) {
      DotTile<kRows, 2, Tag>(x + t * x_stride, x_stride, wr, w.row_stride, w.cols, res);
      store(t, 2, r, kRows);
    } else if (n_tokens - t == 1) {
      DotTile<kRows, 1, Tag>(x + t * x_stride, x_stride, wr, w.row_stride, w.cols, res);
      store(t, 1, r, kRows);
    }
  }
  for (; r < r1; ++r) {
    const typename Tag::T* wr = base + r * w.row_stride;
    for (int64_t t = 0; t < n_tokens; ++t) {
      DotTile<1, 1, Tag>(x + t * x_stride, x_stride, wr, w.row_stride, w.cols, res);
      store(t, 1, r, 1);
    }
  }
}

void MatMulRows(const float* x, int64_t n_tokens, int64_t x_stride, const MatrixRef& w,
                const float* bias, float* y, int64_t y_stride, int64_t row_begin, int64_t r0,
                int64_t r1) {
  switch (w.dtype) {
    case DType::kF32:
      return RowsImpl<TagF32>(x, n_tokens, x_stride, w, bias, y, y_stride, row_begin, r0, r1);
    case DType::kBF16:
      return RowsImpl<TagBF16>(x, n_tokens, x_stride, w, bias, y, y_stride, row_begin, r0, r1);
    case DType::kF16:
      return RowsImpl<TagF16>(x, n_tokens, x_stride, w, bias, y, y_stride, row_begin, r0, r1);
  }
}

void AxpyBF16Impl(float a, const uint16_t* v, float* out, int64_t n) {
  const hn::ScalableTag<float> df;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(df));
  const auto va = hn::Set(df, a);
  int64_t i = 0;
  for (; i + nl <= n; i += nl) {
    hn::StoreU(hn::MulAdd(va, LoadW(TagBF16(), df, v + i), hn::LoadU(df, out + i)), df, out + i);
  }
  // The tail fused as the vectors are, so which columns it takes (the target's width) shows in
  // no bit.
  for (; i < n; ++i) out[i] = std::fma(a, ScalarW(TagBF16(), v + i), out[i]);  // v: any alignment
}

const char* TargetName() {
  return hwy::TargetName(HWY_TARGET);
}

}  // namespace HWY_NAMESPACE
}  // namespace wc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wc {

HWY_EXPORT(MatMulRows);
HWY_EXPORT(AxpyBF16Impl);
HWY_EXPORT(TargetName);

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kBF16:
      return "BF16";
    case DType::kF16:
      return "F16";
  }
  return "?";
}

std::optional<DType> DTypeNamed(std::string_view name) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16})
    if (name == DTypeName(d)) return d;
  return std::nullopt;
}

int DTypeSize(DType dtype) {
  return dtype == DType::kF32 ? 4 : 2;
}

int64_t MatrixRowBytes(const MatrixRef& m) {
  if (m.quant) return m.row_stride / GgmlQuantBlockValues(*m.quant) * GgmlQuantBlockBytes(*m.quant);
  return m.row_stride * DTypeSize(m.dtype);
}

const uint8_t* MatrixAt(const MatrixRef& m, int64_t r, int64_t c) {
  const auto* base = static_cast<const uint8_t*>(m.data) + r * MatrixRowBytes(m);
  if (!m.quant) return base + c * DTypeSize(m.dtype);
  const int values = GgmlQuantBlockValues(*m.quant);
  WC_CHECK(c % values == 0, "column ", c, " inside a ", GgmlQuantName(*m.quant), " block");
  return base + c / values * GgmlQuantBlockBytes(*m.quant);
}

void MatMulSerial(const float* x, int64_t n_tokens, int64_t x_stride, const MatrixRef& w,
                  const float* bias, float* y, int64_t y_stride, int64_t row_begin,
                  int64_t row_end) {
  WC_CHECK(row_begin >= 0 && row_end <= w.rows && row_begin <= row_end, "bad row range");
  WC_CHECK(!w.quant, "MatMul of a GGML-quantized matrix (pack it: PackedMatrix::FromGgmlRows)");
  HWY_DYNAMIC_DISPATCH(MatMulRows)
  (x, n_tokens, x_stride, w, bias, y, y_stride, row_begin, row_begin, row_end);
}

void MatMul(const float* x, int64_t n_tokens, int64_t x_stride, const MatrixRef& w,
            const float* bias, float* y, int64_t y_stride, int64_t row_begin, int64_t row_end) {
  WC_CHECK(row_begin >= 0 && row_end <= w.rows && row_begin <= row_end, "bad row range");
  WC_CHECK(!w.quant, "MatMul of a GGML-quantized matrix (pack it: PackedMatrix::FromGgmlRows)");
  const int64_t n_rows = row_end - row_begin;
  // Blocks of 16 rows keep each thread on contiguous weight memory.
  const int64_t block = 16;
  const int64_t n_blocks = (n_rows + block - 1) / block;
  if (n_blocks <= 1 || omp_in_parallel()) {
    MatMulSerial(x, n_tokens, x_stride, w, bias, y, y_stride, row_begin, row_end);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t r0 = row_begin + b * block;
    const int64_t r1 = std::min(row_end, r0 + block);
    HWY_DYNAMIC_DISPATCH(MatMulRows)
    (x, n_tokens, x_stride, w, bias, y, y_stride, row_begin, r0, r1);
  }
}

void AxpyBF16(float a, const uint16_t* v, float* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(AxpyBF16Impl)(a, v, out, n);
}

const char* SimdTargetName() {
  return HWY_DYNAMIC_DISPATCH(TargetName)();
}

}  // namespace wc
#endif  // HWY_ONCE
