// KV-cache rows through kv_formats.h in every format and scale mode: error bounds, zero and
// non-finite rows, saturation at a tensor scale, and the bytes each format costs. The element
// codecs' own tests sit with their formats: tests/kernels/fp8_test.cpp, bfp_kv_test.cpp.
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "kvcache/kv_formats.h"
#include "util/rng.h"

namespace wc {
namespace {

struct FormatCase {
  KVQuant q;
  ScaleMode mode;
};

class RowCodecTest : public ::testing::TestWithParam<FormatCase> {};

TEST_P(RowCodecTest, RoundTripErrorWithinTheFormatsBound) {
  const auto [q, mode] = GetParam();
  const int hd = 64;
  Rng rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> x(hd), y(hd);
    const double amp = std::pow(10.0, rng.Uniform() * 6 - 3);  // 1e-3 .. 1e3
    for (auto& v : x) v = static_cast<float>((rng.Uniform() * 2 - 1) * amp);
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    const float tensor_scale = q == KVQuant::kBFP8 ? 0.0f : amax / KVQuantMax(q);
    std::vector<uint8_t> row(EncodedRowBytes(q, mode, hd));
    ASSERT_TRUE(EncodeRow(q, mode, tensor_scale, x.data(), hd, row.data()));
    DecodeRow(q, mode, tensor_scale, row.data(), hd, y.data());
    for (int i = 0; i < hd; ++i) {
      double bound = 0;
      switch (q) {
        case KVQuant::kInt8:  // half a step, plus the bf16 rounding of the scale at the top
          bound = amax / 254.0 + amax * std::ldexp(1.0, -8);
          break;
        case KVQuant::kFP8E4M3:  // 3 mantissa bits: half an ulp; subnormals near zero
          bound = std::max(std::fabs(x[i]) * std::ldexp(1.0, -4), amax * std::ldexp(1.0, -14)) +
                  amax * std::ldexp(1.0, -8);
          break;
        case KVQuant::kFP8E5M2:
          bound = std::max(std::fabs(x[i]) * std::ldexp(1.0, -3), amax * std::ldexp(1.0, -20)) +
                  amax * std::ldexp(1.0, -8);
          break;
        case KVQuant::kBFP8: {
          float block = 0;
          for (int k = i / 16 * 16; k < i / 16 * 16 + 16; ++k)
            block = std::max(block, std::fabs(x[k]));
          bound = block * std::ldexp(1.0, -6);
          break;
        }
      }
      ASSERT_LE(std::fabs(double(x[i]) - y[i]), bound)
          << KVQuantName(q) << " trial " << trial << " i " << i << " x " << x[i];
    }
  }
}

TEST_P(RowCodecTest, ZeroRowDecodesToZerosAndNonFiniteIsRefused) {
  const auto [q, mode] = GetParam();
  const int hd = 32;
  std::vector<float> x(hd, 0.0f), y(hd, 1.0f);
  std::vector<uint8_t> row(EncodedRowBytes(q, mode, hd));
  ASSERT_TRUE(EncodeRow(q, mode, 0.0f, x.data(), hd, row.data()));
  DecodeRow(q, mode, 0.0f, row.data(), hd, y.data());
  for (float v : y) EXPECT_EQ(v, 0.0f);
  x[5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(EncodeRow(q, mode, 1.0f, x.data(), hd, row.data()));
  x[5] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(EncodeRow(q, mode, 1.0f, x.data(), hd, row.data()));
}

INSTANTIATE_TEST_SUITE_P(Formats, RowCodecTest,
                         ::testing::Values(FormatCase{KVQuant::kInt8, ScaleMode::kTokenHead},
                                           FormatCase{KVQuant::kInt8, ScaleMode::kTensor},
                                           FormatCase{KVQuant::kFP8E4M3, ScaleMode::kTokenHead},
                                           FormatCase{KVQuant::kFP8E4M3, ScaleMode::kTensor},
                                           FormatCase{KVQuant::kFP8E5M2, ScaleMode::kTokenHead},
                                           FormatCase{KVQuant::kFP8E5M2, ScaleMode::kTensor},
                                           FormatCase{KVQuant::kBFP8, ScaleMode::kTokenHead}));

TEST(RowCodec, TensorScaleSaturatesValuesBeyondTheCalibratedRange) {
  const int hd = 16;
  std::vector<float> x(hd, 0.5f), y(hd);
  x[0] = 100.0f;  // far beyond amax 1.0 calibrated for the tensor
  for (KVQuant q : {KVQuant::kInt8, KVQuant::kFP8E4M3, KVQuant::kFP8E5M2}) {
    const float s = 1.0f / KVQuantMax(q);
    std::vector<uint8_t> row(EncodedRowBytes(q, ScaleMode::kTensor, hd));
    ASSERT_TRUE(EncodeRow(q, ScaleMode::kTensor, s, x.data(), hd, row.data()));
    DecodeRow(q, ScaleMode::kTensor, s, row.data(), hd, y.data());
    EXPECT_NEAR(y[0], 1.0f, 1e-6) << KVQuantName(q);  // saturated at the format's maximum
    EXPECT_NEAR(y[1], 0.5f, 0.02f) << KVQuantName(q);
  }
}

TEST(RowCodec, BytesPerRowMeetTheMemoryTargets) {
  const double bf16 = 2.0 * 64;
  EXPECT_LE(EncodedRowBytes(KVQuant::kInt8, ScaleMode::kTokenHead, 64) / bf16, 0.53);
  EXPECT_LE(EncodedRowBytes(KVQuant::kFP8E4M3, ScaleMode::kTokenHead, 64) / bf16, 0.53);
  EXPECT_LE(EncodedRowBytes(KVQuant::kBFP8, ScaleMode::kTokenHead, 64) / bf16, 0.54);
  EXPECT_EQ(EncodedRowBytes(KVQuant::kBFP8, ScaleMode::kTokenHead, 1024),
            1088);  // one tile row set
  EXPECT_EQ(EncodedRowBytes(KVQuant::kInt8, ScaleMode::kTensor, 64), 64);
}

}  // namespace
}  // namespace wc
