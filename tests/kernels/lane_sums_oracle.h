// kernels/lane_sums-inl.h's summation order in plain scalar code: the oracle the portable f32
// kernels' bits are checked against on every SIMD target with FMA.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "hwy/targets.h"

namespace wc::test {

// The 16 lanes' tree: block b's sum (l0 + l2) + (l1 + l3) of lanes 4b..4b+3, then
// (S0 + S2) + (S1 + S3).
inline float TreeOf16(const float* l) {
  float s[4];
  for (int b = 0; b < 4; ++b) s[b] = (l[4 * b] + l[4 * b + 2]) + (l[4 * b + 1] + l[4 * b + 3]);
  return (s[0] + s[2]) + (s[1] + s[3]);
}

// sum of a[i] * b[i], i < n, in that order: lane i % 16 takes fma(a[i], b[i], lane) for the whole
// 16-term steps, the lanes go through the tree, then each left-over product is rounded and added.
inline float SixteenLaneDot(const float* a, const float* b, int64_t n) {
  float lanes[16] = {};
  const int64_t whole = n - n % 16;
  for (int64_t i = 0; i < whole; ++i) lanes[i % 16] = std::fma(a[i], b[i], lanes[i % 16]);
  float s = TreeOf16(lanes);
  for (int64_t i = whole; i < n; ++i) {
    const float p = a[i] * b[i];
    s += p;
  }
  return s;
}

// The targets this binary has and this CPU runs whose MulAdd is one fused rounding: AVX2 and every
// AVX-512 target (Highway numbers better targets lower).
inline std::vector<int64_t> FmaTargets() {
  std::vector<int64_t> out;
  for (const int64_t t : hwy::SupportedAndGeneratedTargets())
    if (t <= HWY_AVX2) out.push_back(t);
  return out;
}

}  // namespace wc::test
