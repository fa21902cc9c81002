// The decode-attention kernels (kernels/attention/decode_attention.h) against naive loops for F32,
// BF16 and F16 rows, every head and row count around the SIMD groupings, and the determinism
// contract: a row's score does not depend on the rows around it, and no bit depends on the SIMD
// target (lane_sums_oracle.h).
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "hwy/targets.h"
#include "kernels/attention/decode_attention.h"
#include "tests/kernels/lane_sums_oracle.h"
#include "tests/test_util.h"
#include "util/bf16.h"
#include "util/rng.h"

namespace wc {
namespace {

// Rows [rows, cols] stored as `dtype` one byte past an aligned address (kernels must not assume
// alignment), and their exact f32 values.
struct Rows {
  std::vector<uint8_t> bytes;
  std::vector<float> exact;
  MatrixRef ref;
};

uint16_t F32ToF16(float f) {  // exact for the small dyadic values used here
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const int exp = static_cast<int>((u >> 23) & 0xff) - 127 + 15;
  if ((u & 0x7fffffffu) == 0) return static_cast<uint16_t>(sign);
  return static_cast<uint16_t>(sign | (exp << 10) | ((u >> 13) & 0x3ffu));
}

Rows MakeRows(DType dtype, int64_t rows, int64_t cols, uint64_t seed) {
  Rng rng(seed);
  Rows m;
  m.exact.resize(static_cast<size_t>(rows * cols));
  m.bytes.resize(m.exact.size() * DTypeSize(dtype) + 1);
  for (size_t i = 0; i < m.exact.size(); ++i) {
    // Multiples of 1/64 in [-1, 1]: exact in every format.
    const float x = static_cast<float>(static_cast<int>(rng.Next() % 129) - 64) / 64.0f;
    m.exact[i] = x;
    if (dtype == DType::kF32) {
      std::memcpy(&m.bytes[1 + 4 * i], &x, 4);
    } else {
      const uint16_t h = dtype == DType::kBF16 ? F32ToBF16(x) : F32ToF16(x);
      std::memcpy(&m.bytes[1 + 2 * i], &h, 2);
    }
  }
  m.ref = MatrixRef{dtype, rows, cols, cols, m.bytes.data() + 1};
  return m;
}

using test::RandomVec;

TEST(DecodeAttention, ScoresMatchNaiveDots) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int64_t cols : {64, 80, 128, 7}) {
      for (int heads : {1, 3, 4, 5, 8}) {
        for (int64_t rows : {1, 3, 4, 5, 37}) {
          const Rows k = MakeRows(dtype, rows, cols, rows * 100 + cols);
          const auto q = RandomVec(static_cast<size_t>(heads * cols), heads);
          std::vector<float> scores(static_cast<size_t>(heads * rows), -1.0f);
          AttentionScores(q.data(), heads, k.ref, 0.5f, scores.data());
          for (int h = 0; h < heads; ++h) {
            for (int64_t p = 0; p < rows; ++p) {
              double dot = 0;
              for (int64_t c = 0; c < cols; ++c)
                dot += double(q[h * cols + c]) * k.exact[p * cols + c];
              EXPECT_NEAR(scores[h * rows + p], 0.5 * dot, 1e-5)
                  << DTypeName(dtype) << " cols " << cols << " heads " << heads << " rows " << rows;
            }
          }
        }
      }
    }
  }
}

TEST(DecodeAttention, RowScoreDoesNotDependOnNeighbours) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const int64_t rows = 23, cols = 128;
    const int heads = 4;
    const Rows k = MakeRows(dtype, rows, cols, 5);
    const auto q = RandomVec(static_cast<size_t>(heads * cols), 6);
    std::vector<float> all(static_cast<size_t>(heads * rows));
    AttentionScores(q.data(), heads, k.ref, 0.125f, all.data());
    for (int64_t p = 0; p < rows; ++p) {
      MatrixRef one = k.ref;
      one.rows = 1;
      one.data = static_cast<const uint8_t*>(k.ref.data) + p * cols * DTypeSize(dtype);
      float alone[heads];
      AttentionScores(q.data(), heads, one, 0.125f, alone);
      for (int h = 0; h < heads; ++h)
        EXPECT_EQ(0, std::memcmp(&alone[h], &all[h * rows + p], sizeof(float))) << "row " << p;
    }
  }
}

TEST(DecodeAttention, WeightedRowsMatchNaiveSums) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int64_t cols : {64, 80, 128, 7}) {
      for (int heads : {1, 4, 6}) {
        const int64_t rows = 29;
        const Rows v = MakeRows(dtype, rows, cols, cols + heads);
        const auto w = RandomVec(static_cast<size_t>(heads * rows), 9);
        auto o = RandomVec(static_cast<size_t>(heads * cols), 10);
        const auto o0 = o;
        AccumulateWeightedRows(w.data(), rows, heads, v.ref, o.data(), v.ref);  // prefetch: any
        for (int h = 0; h < heads; ++h) {
          for (int64_t c = 0; c < cols; ++c) {
            double sum = o0[h * cols + c];
            for (int64_t p = 0; p < rows; ++p)
              sum += double(w[h * rows + p]) * v.exact[p * cols + c];
            EXPECT_NEAR(o[h * cols + c], sum, 1e-5) << DTypeName(dtype) << " cols " << cols;
          }
        }
      }
    }
  }
}

TEST(DecodeAttention, MaxAndShiftedExpSum) {
  for (int64_t n : {1, 15, 16, 17, 100}) {
    auto x = RandomVec(static_cast<size_t>(n), n);
    x[n / 2] = -std::numeric_limits<float>::infinity();  // masked: exp gives 0
    float mx = -std::numeric_limits<float>::infinity();
    for (float e : x) mx = std::max(mx, e);
    EXPECT_EQ(MaxOf(x.data(), n), mx);
    if (n == 1) continue;
    const auto before = x;
    const float sum = ExpShiftSum(x.data(), n, mx);
    double ref = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double e = std::exp(double(before[i]) - mx);
      EXPECT_NEAR(x[i], e, 2e-7 * std::max(1.0, e)) << i;
      ref += e;
    }
    EXPECT_EQ(x[n / 2], 0.0f);
    EXPECT_NEAR(sum, ref, 1e-5 * ref);
  }
  EXPECT_EQ(MaxOf(nullptr, 0), -std::numeric_limits<float>::infinity());
}

// Every FMA target (AVX2, each AVX-512) gives the scores, the softmax's sums and the weighted rows
// of lane_sums-inl.h's order, bit for bit: a transcript or logits file made on an AVX-512 machine
// is the one an AVX2 machine makes. bf16 rows of whole 32-column steps take their pairs path
// (lane i: column 2i, then 2i + 1, of every 32); other widths the 16 lanes with a tail.
TEST(DecodeAttention, EveryFmaTargetGivesTheSixteenLaneOrder) {
  const std::vector<int64_t> targets = test::FmaTargets();
  ASSERT_FALSE(targets.empty()) << "no AVX2 on this CPU";
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int64_t cols : {64, 80, 128, 40, 7}) {
      const int heads = 5;
      const int64_t rows = 37;
      const Rows k = MakeRows(dtype, rows, cols, cols + 3);
      const auto q = RandomVec(static_cast<size_t>(heads * cols), cols);  // products round
      const bool pairs = dtype == DType::kBF16 && cols % 32 == 0;
      std::vector<float> want(static_cast<size_t>(heads * rows));
      for (int h = 0; h < heads; ++h) {
        for (int64_t p = 0; p < rows; ++p) {
          std::vector<float> a(&q[h * cols], &q[h * cols] + cols);
          std::vector<float> b(&k.exact[p * cols], &k.exact[p * cols] + cols);
          if (pairs) {  // index 32s + i holds column 32s + 2i, 32s + 16 + i column 32s + 2i + 1
            const auto a0 = a, b0 = b;
            for (int64_t c = 0; c < cols; c += 32)
              for (int i = 0; i < 16; ++i)
                for (int odd = 0; odd < 2; ++odd) {
                  a[c + 16 * odd + i] = a0[c + 2 * i + odd];
                  b[c + 16 * odd + i] = b0[c + 2 * i + odd];
                }
          }
          want[h * rows + p] = test::SixteenLaneDot(a.data(), b.data(), cols) * 0.5f;
        }
      }
      const auto w = RandomVec(static_cast<size_t>(heads * rows), cols + 1);
      const auto o0 = RandomVec(static_cast<size_t>(heads * cols), cols + 2);
      std::vector<float> want_o = o0;
      for (int h = 0; h < heads; ++h)
        for (int64_t c = 0; c < cols; ++c)
          for (int64_t p = 0; p < rows; ++p)
            want_o[h * cols + c] =
                std::fma(w[h * rows + p], k.exact[p * cols + c], want_o[h * cols + c]);
      for (const int64_t target : targets) {
        hwy::SetSupportedTargetsForTest(target);
        std::vector<float> scores(want.size());
        AttentionScores(q.data(), heads, k.ref, 0.5f, scores.data());
        EXPECT_TRUE(test::SameBits(scores, want))
            << hwy::TargetName(target) << " " << DTypeName(dtype) << " cols " << cols;
        std::vector<float> o = o0;
        AccumulateWeightedRows(w.data(), rows, heads, k.ref, o.data());
        EXPECT_TRUE(test::SameBits(o, want_o))
            << hwy::TargetName(target) << " " << DTypeName(dtype) << " cols " << cols;
      }
      hwy::SetSupportedTargetsForTest(0);
    }
  }
  for (int64_t n : {5, 16, 17, 100, 1000}) {
    const auto x = RandomVec(static_cast<size_t>(n), n + 7);
    std::vector<float> first;
    for (const int64_t target : targets) {
      hwy::SetSupportedTargetsForTest(target);
      std::vector<float> e = x;
      const float sum = ExpShiftSum(e.data(), n, 1.0f);
      float lanes[16] = {};
      for (int64_t i = 0; i < n; ++i) lanes[i % 16] += e[i];
      EXPECT_EQ(sum, test::TreeOf16(lanes)) << hwy::TargetName(target) << " n " << n;
      if (first.empty()) first = e;
      EXPECT_TRUE(test::SameBits(e, first)) << hwy::TargetName(target) << " n " << n;
    }
    hwy::SetSupportedTargetsForTest(0);
  }
}

}  // namespace
}  // namespace wc
