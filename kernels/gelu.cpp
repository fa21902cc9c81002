// GeluErf (ops.h) vectorized: GELU(x) = 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2),
// with erfc from the Chebyshev fit of Numerical Recipes' erfcc (fractional error below 1.2e-7 for
// every argument, so no cancellation for large negative x, where 1 + erf would lose the digits)
//   erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + |z| / 2), for z >= 0;  erfc(-z) = 2 - erfc(z)
// and exp from Highway's contrib/math (1 ulp). Needs an FMA for z^2's exact split (MulSub): every
// x86 target since AVX2; SSE4 and scalar give a few ulp more. Each element is a pure function of
// its value, the same in every lane position, tail and thread split (tails go through the vector
// code padded).
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/ops.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/gelu.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// After highway.h, once per target.
#include "hwy/contrib/math/math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace wc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class D, class V = hn::Vec<D>>
HWY_INLINE V Gelu(D d, V x) {
  const V one = hn::Set(d, 1.0f), half = hn::Set(d, 0.5f);
  // Beyond |x| = 20, erfc is 0 or 2 to float precision; clamping keeps x^2 finite.
  const V xc = hn::Min(hn::Max(x, hn::Set(d, -20.0f)), hn::Set(d, 20.0f));
  const V z = hn::Mul(xc, hn::Set(d, -0.70710678118654752f));
  const V az = hn::Abs(z);
  const V t = hn::Div(one, hn::MulAdd(half, az, one));
  // P(t), Horner from the highest coefficient.
  V p = hn::Set(d, 0.17087277f);
  p = hn::MulAdd(p, t, hn::Set(d, -0.82215223f));
  p = hn::MulAdd(p, t, hn::Set(d, 1.48851587f));
  p = hn::MulAdd(p, t, hn::Set(d, -1.13520398f));
  p = hn::MulAdd(p, t, hn::Set(d, 0.27886807f));
  p = hn::MulAdd(p, t, hn::Set(d, -0.18628806f));
  p = hn::MulAdd(p, t, hn::Set(d, 0.09678418f));
  p = hn::MulAdd(p, t, hn::Set(d, 0.37409196f));
  p = hn::MulAdd(p, t, hn::Set(d, 1.00002368f));
  p = hn::MulAdd(p, t, hn::Set(d, -1.26551223f));
  // exp(-z^2 + P) with z^2 = x^2 / 2 = h + l exactly (an FMA gives the product's rounding error),
  // as exp(-h) exp(P - l): rounding z^2 itself would cost a relative 2 z^2 2^-24 (1e-5 at z = 8).
  const V half_x = hn::Mul(half, xc);
  const V h = hn::Mul(half_x, xc);
  const V l = hn::MulSub(half_x, xc, h);
  const V ans = hn::Mul(hn::Mul(t, hn::Exp(d, hn::Neg(h))), hn::Exp(d, hn::Sub(p, l)));  // erfc|z|
  const V erfc = hn::IfThenElse(hn::Ge(z, hn::Zero(d)), ans, hn::Sub(hn::Set(d, 2.0f), ans));
  return hn::Mul(hn::Mul(half, x), erfc);
}

void GeluBlock(float* x, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + nl <= n; i += nl) hn::StoreU(Gelu(d, hn::LoadU(d, x + i)), d, x + i);
  if (i < n) {
    HWY_ALIGN float tail[HWY_MAX_BYTES / sizeof(float)] = {};
    std::memcpy(tail, x + i, static_cast<size_t>(n - i) * sizeof(float));
    hn::Store(Gelu(d, hn::Load(d, tail)), d, tail);
    std::memcpy(x + i, tail, static_cast<size_t>(n - i) * sizeof(float));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace wc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wc {

HWY_EXPORT(GeluBlock);

void GeluErf(float* x, int64_t n) {
  constexpr int64_t kBlock = 1 << 14;  // a multiple of every vector length
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (blocks > 1 && !omp_in_parallel())
  for (int64_t b = 0; b < blocks; ++b)
    HWY_DYNAMIC_DISPATCH(GeluBlock)(x + b * kBlock, std::min(kBlock, n - b * kBlock));
}

}  // namespace wc
#endif  // HWY_ONCE
