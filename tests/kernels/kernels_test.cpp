// Kernels: matmul against a naive loop for every weight dtype, batch- and thread-invariance
// (the determinism contract), and the element-wise ops against their formulas.
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "hwy/targets.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "tests/kernels/lane_sums_oracle.h"
#include "tests/test_util.h"
#include "util/bf16.h"
#include "util/rng.h"

namespace wc {
namespace {

using test::RandomVec;

// Weights of `dtype` [rows, cols] and their exact f32 values.
struct TestMatrix {
  std::vector<uint8_t> bytes;
  std::vector<float> exact;
  MatrixRef ref;
};

TestMatrix MakeMatrix(DType dtype, int64_t rows, int64_t cols, uint64_t seed) {
  TestMatrix m;
  m.exact = RandomVec(static_cast<size_t>(rows * cols), seed);
  m.bytes.resize(m.exact.size() * DTypeSize(dtype) + 1);
  for (size_t i = 0; i < m.exact.size(); ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(&m.bytes[1 + 4 * i], &m.exact[i], 4);
    } else {
      uint16_t h;
      if (dtype == DType::kBF16) {
        h = F32ToBF16(m.exact[i]);
        m.exact[i] = BF16ToF32(h);
      } else {
        h = F32ToF16(m.exact[i]);
        m.exact[i] = F16ToF32(h);
      }
      std::memcpy(&m.bytes[1 + 2 * i], &h, 2);
    }
  }
  // Deliberately misaligned, as tensors inside a memory-mapped checkpoint can be.
  m.ref = MatrixRef{dtype, rows, cols, cols, m.bytes.data() + 1};
  return m;
}

class MatMulTest : public ::testing::TestWithParam<DType> {};

TEST_P(MatMulTest, MatchesNaiveLoop) {
  const int64_t rows = 37, cols = 131, n = 6;
  TestMatrix w = MakeMatrix(GetParam(), rows, cols, 1);
  std::vector<float> x = RandomVec(n * cols, 2), bias = RandomVec(rows, 3);
  std::vector<float> y(n * rows);
  MatMul(x.data(), n, w.ref, bias.data(), y.data());
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      double ref = bias[r];
      for (int64_t k = 0; k < cols; ++k)
        ref += static_cast<double>(x[t * cols + k]) * w.exact[r * cols + k];
      EXPECT_NEAR(y[t * rows + r], ref, 1e-4) << "t=" << t << " r=" << r;
    }
  }
}

TEST_P(MatMulTest, TokenResultDoesNotDependOnBatchOrThreads) {
  const int64_t rows = 300, cols = 200, n = 9;
  TestMatrix w = MakeMatrix(GetParam(), rows, cols, 4);
  std::vector<float> x = RandomVec(n * cols, 5);
  std::vector<float> all(n * rows), one(rows);
  omp_set_num_threads(2);
  MatMul(x.data(), n, w.ref, nullptr, all.data());
  for (int threads : {1, 3, 8}) {
    omp_set_num_threads(threads);
    for (int64_t t = 0; t < n; ++t) {
      MatMul(x.data() + t * cols, 1, w.ref, nullptr, one.data());
      ASSERT_EQ(0, std::memcmp(one.data(), all.data() + t * rows, rows * sizeof(float)))
          << "token " << t << " threads " << threads;
    }
  }
  omp_set_num_threads(omp_get_num_procs());
}

// The register tiles (4 rows x 3, 2 or 1 tokens, and single leftover rows) must not show: every
// token count and every row range, aligned to the tile or not, gives each element the same bits.
TEST_P(MatMulTest, TileShapesGiveIdenticalBits) {
  const int64_t rows = 303, cols = 77, n = 11;
  TestMatrix w = MakeMatrix(GetParam(), rows, cols, 8);
  std::vector<float> x = RandomVec(n * cols, 9);
  std::vector<float> all(n * rows);
  MatMul(x.data(), n, w.ref, nullptr, all.data());
  for (int64_t first = 0; first < n; first += 3) {
    for (int64_t count = 1; first + count <= n; ++count) {
      std::vector<float> part(count * rows);
      MatMul(x.data() + first * cols, count, w.ref, nullptr, part.data());
      for (int64_t t = 0; t < count; ++t)
        ASSERT_EQ(0, std::memcmp(part.data() + t * rows, all.data() + (first + t) * rows,
                                 rows * sizeof(float)))
            << "tokens " << first << "+" << count << ", token " << t;
    }
  }
  for (int64_t begin : {0, 1, 2, 3, 5, 150}) {
    const int64_t end = std::min<int64_t>(rows, begin + 37);
    std::vector<float> slice(n * (end - begin));
    MatMulSerial(x.data(), n, cols, w.ref, nullptr, slice.data(), end - begin, begin, end);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t r = begin; r < end; ++r)
        ASSERT_EQ(slice[t * (end - begin) + r - begin], all[t * rows + r])
            << "rows from " << begin << ", token " << t << ", row " << r;
  }
}

// Every FMA target (AVX2, each AVX-512) gives lane_sums-inl.h's order, bit for bit, whatever its
// register tile: the reference attention's scores are the same on every machine.
TEST_P(MatMulTest, EveryFmaTargetGivesTheSixteenLaneOrder) {
  const std::vector<int64_t> targets = test::FmaTargets();
  ASSERT_FALSE(targets.empty()) << "no AVX2 on this CPU";
  for (int64_t cols : {7, 64, 100, 131}) {
    const int64_t rows = 9, n = 5;
    TestMatrix w = MakeMatrix(GetParam(), rows, cols, cols);
    const std::vector<float> x = RandomVec(n * cols, cols + 1), bias = RandomVec(rows, 3);
    std::vector<float> want(n * rows);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t r = 0; r < rows; ++r)
        want[t * rows + r] = test::SixteenLaneDot(&x[t * cols], &w.exact[r * cols], cols) + bias[r];
    for (const int64_t target : targets) {
      hwy::SetSupportedTargetsForTest(target);
      std::vector<float> y(want.size());
      MatMul(x.data(), n, w.ref, bias.data(), y.data());
      EXPECT_TRUE(test::SameBits(y, want)) << hwy::TargetName(target) << " cols " << cols;
      if (GetParam() == DType::kBF16) {  // the reference attention's P.V rows
        std::vector<float> out = x, want_out = x;
        AxpyBF16(0.375f, static_cast<const uint16_t*>(w.ref.data), out.data(), cols);
        for (int64_t c = 0; c < cols; ++c) want_out[c] = std::fma(0.375f, w.exact[c], want_out[c]);
        EXPECT_TRUE(test::SameBits(out, want_out)) << hwy::TargetName(target) << " cols " << cols;
      }
    }
    hwy::SetSupportedTargetsForTest(0);
  }
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, MatMulTest,
                         ::testing::Values(DType::kF32, DType::kBF16, DType::kF16));

TEST(MatMul, RowRangeWritesOnlyItsSlice) {
  TestMatrix w = MakeMatrix(DType::kF32, 64, 32, 6);
  std::vector<float> x = RandomVec(32, 7), full(64), part(16, -7.0f);
  MatMul(x.data(), 1, w.ref, nullptr, full.data());
  MatMul(x.data(), 1, 32, w.ref, nullptr, part.data(), 16, 20, 36);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(part[i], full[20 + i]);
}

TEST(Bf16, RoundsToNearestEvenAndKeepsSpecials) {
  EXPECT_EQ(F32ToBF16(1.0f), 0x3f80);
  EXPECT_EQ(BF16ToF32(F32ToBF16(3.140625f)), 3.140625f);
  uint32_t u = 0x3f808000;  // exactly halfway between 0x3f80 and 0x3f81: ties to even
  float f;
  std::memcpy(&f, &u, 4);
  EXPECT_EQ(F32ToBF16(f), 0x3f80);
  u = 0x3f818000;
  std::memcpy(&f, &u, 4);
  EXPECT_EQ(F32ToBF16(f), 0x3f82);
  EXPECT_TRUE(std::isnan(BF16ToF32(F32ToBF16(NAN))));
  EXPECT_TRUE(std::isinf(BF16ToF32(F32ToBF16(INFINITY))));
  EXPECT_EQ(F16ToF32(0x3c00), 1.0f);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_TRUE(std::isinf(F16ToF32(0x7c00)));
  EXPECT_EQ(F16ToF32(0xc000), -2.0f);
  for (uint32_t h = 0; h < 0x7c00; ++h)  // every finite half survives f16 -> f32 -> f16
    ASSERT_EQ(F32ToF16(F16ToF32(static_cast<uint16_t>(h))), h) << h;
  EXPECT_EQ(F32ToF16(1e6f), 0x7c00);
}

TEST(Ops, LayerNormGeluSoftmax) {
  std::vector<float> x = {1, 2, 3, 4}, g = {1, 1, 2, 1}, b = {0, 0, 0, 1}, y(4);
  LayerNorm(x.data(), g.data(), b.data(), 1e-5f, y.data(), 4);
  const double rstd = 1.0 / std::sqrt(1.25 + 1e-5);
  EXPECT_NEAR(y[0], -1.5 * rstd, 1e-6);
  EXPECT_NEAR(y[2], 2 * 0.5 * rstd, 1e-6);
  EXPECT_NEAR(y[3], 1.5 * rstd + 1, 1e-6);
  std::vector<float> v = {-1.0f, 0.0f, 2.0f};
  GeluErf(v.data(), 3);
  EXPECT_NEAR(v[0], -0.15865525393145707, 1e-7);  // exact erf GELU, not the tanh form
  EXPECT_EQ(v[1], 0.0f);
  EXPECT_NEAR(v[2], 1.9544997361036416, 1e-6);
  std::vector<float> s = {1000.0f, 1000.0f, -INFINITY};
  Softmax(s.data(), 3);
  EXPECT_FLOAT_EQ(s[0], 0.5f);
  EXPECT_EQ(s[2], 0.0f);
}

// GeluErf against the exact GELU in double precision, relative to the value (so the far negative
// tail, where 1 + erf cancels, is held to the same bound), over [-12, 12] and a few extremes; and
// each element is a pure function of its value: any lane, tail or thread split gives its bits.
TEST(Ops, GeluMatchesTheExactFunctionEverywhere) {
  std::vector<float> xs;
  for (int i = -120000; i <= 120000; ++i) xs.push_back(static_cast<float>(i) * 1e-4f);
  for (float v : {1e-30f, -1e-30f, 1e-8f, -3e-6f, 30.0f, -30.0f, 1e30f, -1e30f}) xs.push_back(v);
  std::vector<float> y = xs;
  GeluErf(y.data(), static_cast<int64_t>(y.size()));
  double worst = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i], exact = 0.5 * x * std::erfc(-x / std::sqrt(2.0));
    if (std::fabs(exact) < 1e-36) {  // below float's normal range: zero or as tiny
      EXPECT_LT(std::fabs(y[i]), 1e-36) << x;
      continue;
    }
    worst = std::max(worst, std::fabs(y[i] - exact) / std::fabs(exact));
  }
  EXPECT_LT(worst, 1e-6) << worst;
  std::printf("[ gelu     ] worst relative error %.3g\n", worst);
  for (size_t offset : {size_t{1}, size_t{5}, size_t{17}}) {
    std::vector<float> part(xs.begin() + static_cast<long>(offset), xs.begin() + 1000);
    GeluErf(part.data(), static_cast<int64_t>(part.size()));
    for (size_t i = 0; i < part.size(); ++i) ASSERT_EQ(part[i], y[i + offset]) << i;
  }
}

TEST(Ops, RopeRotatesHalvesByPositionAngle) {
  const int d = 8;
  Rope rope(d, 10000.0);
  std::vector<float> x = RandomVec(d, 9), y = x;
  rope.Apply(y.data(), 5);
  for (int i = 0; i < d / 2; ++i) {
    const double ang = 5.0 * std::pow(10000.0, -2.0 * i / d);
    EXPECT_NEAR(y[i], x[i] * std::cos(ang) - x[i + d / 2] * std::sin(ang), 1e-5);
    EXPECT_NEAR(y[i + d / 2], x[i + d / 2] * std::cos(ang) + x[i] * std::sin(ang), 1e-5);
  }
  std::vector<float> z = x;
  rope.Apply(z.data(), 0);
  EXPECT_EQ(z, x);  // position 0 is the identity
}

}  // namespace
}  // namespace wc
