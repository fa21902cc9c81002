// SiluMul (ops.h) vectorized: gate[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + exp(-x)) as
// PyTorch's F.silu computes it, with exp from Highway's contrib/math (1 ulp). exp's argument is
// clamped to [-88, 88] (exp(88) is finite in f32): beyond it silu(x) is x to float precision, or
// below 1e-36 in magnitude. Each element is a pure function of its two values, the same in every
// lane position, tail and thread split (tails go through the vector code padded).
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/ops.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/silu.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// After highway.h, once per target.
#include "hwy/contrib/math/math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace wc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class D, class V = hn::Vec<D>>
HWY_INLINE V SiluTimes(D d, V g, V u) {
  const V arg = hn::Min(hn::Max(hn::Neg(g), hn::Set(d, -88.0f)), hn::Set(d, 88.0f));
  const V silu = hn::Div(g, hn::Add(hn::Set(d, 1.0f), hn::Exp(d, arg)));
  return hn::Mul(silu, u);
}

void SiluMulBlock(float* g, const float* u, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + nl <= n; i += nl)
    hn::StoreU(SiluTimes(d, hn::LoadU(d, g + i), hn::LoadU(d, u + i)), d, g + i);
  if (i < n) {
    HWY_ALIGN float tg[HWY_MAX_BYTES / sizeof(float)] = {};
    HWY_ALIGN float tu[HWY_MAX_BYTES / sizeof(float)] = {};
    std::memcpy(tg, g + i, static_cast<size_t>(n - i) * sizeof(float));
    std::memcpy(tu, u + i, static_cast<size_t>(n - i) * sizeof(float));
    hn::Store(SiluTimes(d, hn::Load(d, tg), hn::Load(d, tu)), d, tg);
    std::memcpy(g + i, tg, static_cast<size_t>(n - i) * sizeof(float));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace wc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wc {

HWY_EXPORT(SiluMulBlock);

void SiluMul(float* gate, const float* up, int64_t n) {
  constexpr int64_t kBlock = 1 << 14;  // a multiple of every vector length
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (blocks > 1 && !omp_in_parallel())
  for (int64_t b = 0; b < blocks; ++b) HWY_DYNAMIC_DISPATCH(SiluMulBlock)
  (gate + b * kBlock, up + b * kBlock, std::min(kBlock, n - b * kBlock));
}

}  // namespace wc
#endif  // HWY_ONCE
