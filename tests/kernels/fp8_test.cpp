// The fp8 codec (kernels/attention/fp8.h): every finite code of E4M3 and E5M2 round-trips and its
// neighbours round to nearest even, the OCP spec's code points, subnormals, saturation and the
// special codes. Rows of fp8 codes through the KV cache: tests/kvcache/kv_formats_test.cpp.
#include <cmath>

#include <gtest/gtest.h>

#include "kernels/attention/fp8.h"

namespace wc {
namespace {

TEST(Fp8, E4M3EveryFiniteCodeRoundTripsAndNeighboursRoundToNearestEven) {
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7f) == 0x7f) continue;  // NaN
    const float v = FP8E4M3ToF32(static_cast<uint8_t>(b));
    if (v == 0.0f) continue;  // +0 / -0 both fine
    EXPECT_EQ(F32ToFP8E4M3(v), b) << b << " " << v;
  }
  EXPECT_EQ(F32ToFP8E4M3(1.0f), 0x38);  // code points of the OCP FP8 spec
  EXPECT_EQ(F32ToFP8E4M3(-2.0f), 0xc0);
  EXPECT_EQ(FP8E4M3ToF32(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(FP8E4M3ToF32(0x7e), 448.0f);
  EXPECT_EQ(FP8E4M3ToF32(0x01), std::ldexp(1.0f, -9));   // smallest subnormal
  EXPECT_EQ(F32ToFP8E4M3(1.0625f), F32ToFP8E4M3(1.0f));  // tie: to the even mantissa
  EXPECT_EQ(F32ToFP8E4M3(1.1875f), F32ToFP8E4M3(1.25f));
  EXPECT_EQ(F32ToFP8E4M3(1e9f), 0x7e);  // saturates, never NaN
  EXPECT_EQ(F32ToFP8E4M3(-1e9f), 0xfe);
  EXPECT_TRUE(std::isnan(FP8E4M3ToF32(0x7f)));
}

TEST(Fp8, E5M2EveryFiniteCodeRoundTripsAndSaturates) {
  for (int b = 0; b < 256; ++b) {
    if (((b & 0x7f) >> 2) == 31) continue;  // inf / NaN
    const float v = FP8E5M2ToF32(static_cast<uint8_t>(b));
    if (v == 0.0f) continue;
    EXPECT_EQ(F32ToFP8E5M2(v), b) << b << " " << v;
  }
  EXPECT_EQ(F32ToFP8E5M2(1.0f), 0x3c);
  EXPECT_EQ(F32ToFP8E5M2(-0.5f), 0xb8);
  EXPECT_EQ(FP8E5M2ToF32(0x7b), 57344.0f);
  EXPECT_EQ(F32ToFP8E5M2(1e9f), 0x7b);
  EXPECT_EQ(FP8E5M2ToF32(0x01), std::ldexp(1.0f, -16));
  EXPECT_TRUE(std::isinf(FP8E5M2ToF32(0x7c)));
}

}  // namespace
}  // namespace wc
