// Sums over 16 fixed lanes: the one summation order of the portable f32 kernels (the attention
// scores and softmax, the unpacked matrix-vector products), so their bits do not depend on the
// SIMD target's vector width. A Highway per-target header: included once per target by each
// user's foreach_target.
//
// The order: a sum of terms t[0..n) is 16 partial sums, lane j accumulating t[i] for i = j mod 16
// in increasing i over the whole 16-term steps (n - n % 16 terms; a caller adds what is left in
// index order after); then the lanes are added in one tree. Grouped in 128-bit blocks of 4 lanes
// B0..B3 (lanes 4b..4b+3), block b's sum is (l0 + l2) + (l1 + l3), and the total is
// (S0 + S2) + (S1 + S3).
//
// A target holds the 16 lanes as kSumParts vectors of its own width (one on AVX-512, two on AVX2,
// four on SSE4): part p holds lanes [p * lanes, (p + 1) * lanes), so it accumulates the terms at
// i = p * lanes + 16 m + l. Every lane's chain of FMAs is the same on each target, and so is the
// tree: the bits are equal wherever MulAdd is one fused rounding (AVX2 with FMA and every AVX-512
// target; SSE4 has no FMA, so its products round twice). The scalar target keeps one lane.
//
// (Why 16: AVX-512's width. A 16-lane vector's reduction costs AVX-512 nothing extra; AVX2 runs
// two passes or two accumulators, the same FMAs as before.)

// Include guard toggled per target (Highway's -inl.h convention).
#if defined(WC_KERNELS_LANE_SUMS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef WC_KERNELS_LANE_SUMS_INL_H_
#undef WC_KERNELS_LANE_SUMS_INL_H_
#else
#define WC_KERNELS_LANE_SUMS_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace wc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int64_t kSumLanes = 16;

// The vectors of width D that hold the 16 lanes (1 on the scalar target, whose one lane is the
// whole sum).
template <class D>
constexpr int SumParts() {
#if HWY_TARGET == HWY_SCALAR
  return 1;
#else
  static_assert(hn::MaxLanes(D()) <= kSumLanes, "vectors wider than 16 f32 lanes");
  return static_cast<int>(kSumLanes / hn::MaxLanes(D()));
#endif
}

// Terms per step of a loop over the 16 lanes: 16 (1 on the scalar target).
template <class D>
constexpr int64_t SumStep() {
  return static_cast<int64_t>(SumParts<D>()) * static_cast<int64_t>(hn::MaxLanes(D()));
}

#if HWY_TARGET != HWY_SCALAR
// The 128-bit blocks of v halved and added until one block is left: [B0..B3] -> [B0 + B2,
// B1 + B3] -> (B0 + B2) + (B1 + B3). One block stays as it is.
template <class D>
HWY_INLINE auto FoldBlocks(D d, hn::Vec<D> v) {
  if constexpr (hn::MaxLanes(D()) <= 4) {
    (void)d;
    return v;
  } else {
    const hn::Half<D> dh;
    return FoldBlocks(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  }
}

// The parts' blocks brought to one vector in the tree's order: parts hold the blocks in lane
// order, so with two parts [B0 B1] + [B2 B3] is FoldBlocks' first step, with four parts
// (B0 + B2) + (B1 + B3) is all of it. The result goes through FoldBlocks.
template <int kParts, class V>
HWY_INLINE V JoinParts(const V* parts) {
  static_assert(kParts == 1 || kParts == 2 || kParts == 4, "1, 2 or 4 parts");
  if constexpr (kParts == 1) {
    return parts[0];
  } else if constexpr (kParts == 2) {
    return hn::Add(parts[0], parts[1]);
  } else {
    return hn::Add(hn::Add(parts[0], parts[2]), hn::Add(parts[1], parts[3]));
  }
}
#endif

// The sum of the 16 lanes held in parts[0 .. SumParts<D>()), in the tree's order (stored and
// added in scalar code: a sum per call, beside the FMAs that made it).
template <class D>
HWY_INLINE float SumOfLanes16(D d, const hn::Vec<D>* parts) {
#if HWY_TARGET == HWY_SCALAR
  (void)d;
  return hn::GetLane(parts[0]);
#else
  constexpr int kParts = SumParts<D>();
  const int64_t nl = static_cast<int64_t>(hn::Lanes(d));
  HWY_ALIGN float l[kSumLanes];
  for (int p = 0; p < kParts; ++p) hn::Store(parts[p], d, l + p * nl);
  float s[4];
  for (int b = 0; b < 4; ++b) s[b] = (l[4 * b] + l[4 * b + 2]) + (l[4 * b + 1] + l[4 * b + 3]);
  return (s[0] + s[2]) + (s[1] + s[3]);
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace wc
HWY_AFTER_NAMESPACE();

#endif  // WC_KERNELS_LANE_SUMS_INL_H_
