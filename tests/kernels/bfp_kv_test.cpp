// The KV cache's BFP8_B block codec (kernels/attention/bfp_kv.h): 7 bits kept below the shared
// exponent, signs kept, and rounding up past the exponent saturating at 127 rather than carrying.
// The weight codec (kernels/gemm/bfp/bfp_weights.h, tt-metal's packer, which rounds differently) is
// tested in bfp_weights_test.cpp; bfp8 rows through the KV cache in
// tests/kvcache/kv_formats_test.cpp and, read by the attention kernels, quantized_rows_test.cpp.
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "kernels/attention/bfp_kv.h"

namespace wc {
namespace {

TEST(Bfp8, BlockKeepsSevenBitsBelowTheSharedExponent) {
  float x[16], y[16];
  for (int i = 0; i < 16; ++i) x[i] = (i % 2 ? -1.0f : 1.0f) * (0.01f + i * 0.37f);
  uint8_t exp, mant[16];
  EncodeBfp8Block(x, &exp, mant);
  DecodeBfp8Block(exp, mant, y);
  float amax = 0;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  for (int i = 0; i < 16; ++i) {
    EXPECT_LE(std::fabs(x[i] - y[i]), amax * std::ldexp(1.0f, -6)) << i;
    EXPECT_EQ(std::signbit(x[i]), std::signbit(y[i]));
  }
  // A value just under the next power of two rounds up to 128 * quantum: it saturates at 127.
  float z[16] = {1.999f};
  EncodeBfp8Block(z, &exp, mant);
  DecodeBfp8Block(exp, mant, y);
  EXPECT_EQ(mant[0], 127);
  EXPECT_NEAR(y[0], 1.984375f, 1e-7);
}

}  // namespace
}  // namespace wc
