// ExactFma(a, b, c): a * b + c rounded once, on every SIMD target: the hardware FMA, or on targets
// without one (SSE4, scalar) each lane's std::fma, slow but the same bits, so no target changes a
// GEMM's result (gemm.cpp, gemm_bfp.cpp). A Highway per-target header: include it after
// hwy/highway.h in a file compiled through foreach_target.

// Include guard toggled per target (Highway's -inl.h convention).
#if defined(WC_KERNELS_EXACT_FMA_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef WC_KERNELS_EXACT_FMA_INL_H_
#undef WC_KERNELS_EXACT_FMA_INL_H_
#else
#define WC_KERNELS_EXACT_FMA_INL_H_
#endif

#include <cmath>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace wc {
namespace HWY_NAMESPACE {

template <class V>
HWY_INLINE V ExactFma(V a, V b, V c) {
#if HWY_NATIVE_FMA
  return hwy::HWY_NAMESPACE::MulAdd(a, b, c);
#else
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::DFromV<V> d;
  constexpr size_t kMax = hn::MaxLanes(d);
  HWY_ALIGN float la[kMax], lb[kMax], lc[kMax];
  hn::Store(a, d, la);
  hn::Store(b, d, lb);
  hn::Store(c, d, lc);
  for (size_t i = 0; i < hn::Lanes(d); ++i) lc[i] = std::fma(la[i], lb[i], lc[i]);
  return hn::Load(d, lc);
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace wc
HWY_AFTER_NAMESPACE();

#endif  // WC_KERNELS_EXACT_FMA_INL_H_
