// The packed GEMM (kernels/gemm/gemm.h) against scalar chains written out from the header's
// contract: bit-identical for every weight dtype and activation precision, every tile shape (token
// counts 1..40), partial row ranges and panels, 1 and 2 threads, every SIMD target. Plus the
// bf16-activation path's accuracy against f64 sums.
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "hwy/targets.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/packed_matrix.h"
#include "tests/test_util.h"
#include "util/bf16.h"
#include "util/rng.h"

namespace wc {
namespace {

struct Source {
  std::vector<uint8_t> bytes;
  std::vector<float> exact;  // [rows, cols] the stored values as floats
  MatrixRef ref;
};

// A [rows, cols] matrix of `dtype` with row stride cols + 3, stored one byte off alignment.
Source MakeSource(DType dtype, int64_t rows, int64_t cols, uint64_t seed) {
  Source s;
  const int64_t stride = cols + 3;
  Rng rng(seed);
  s.exact.resize(static_cast<size_t>(rows * cols));
  s.bytes.assign(static_cast<size_t>(rows * stride * DTypeSize(dtype) + 1), 0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < cols; ++k) {
      const float v = static_cast<float>(rng.Uniform() * 2.0 - 1.0);
      uint8_t* dst = &s.bytes[1 + (r * stride + k) * DTypeSize(dtype)];
      float& e = s.exact[r * cols + k];
      if (dtype == DType::kF32) {
        e = v;
        std::memcpy(dst, &v, 4);
      } else {
        const uint16_t h = dtype == DType::kBF16 ? F32ToBF16(v) : F32ToF16(v);
        e = dtype == DType::kBF16 ? BF16ToF32(h) : F16ToF32(h);
        std::memcpy(dst, &h, 2);
      }
    }
  }
  s.ref = MatrixRef{dtype, rows, cols, stride, s.bytes.data() + 1};
  return s;
}

using test::RandomX;

float RoundBF16(float v) {
  return BF16ToF32(F32ToBF16(v));
}

// y[t, r] as gemm.h's contract spells it, one scalar chain per element.
float Chain(const float* x, const float* w, int64_t cols, DType dtype, ActivationPrecision p) {
  float acc = 0.0f;
  if (dtype != DType::kBF16) {
    for (int64_t k = 0; k < cols; ++k) acc = std::fma(x[k], w[k], acc);
    return acc;
  }
  auto xv = [&](int64_t k) {
    if (k >= cols) return 0.0f;
    return p == ActivationPrecision::kBF16 ? RoundBF16(x[k]) : x[k];
  };
  auto wv = [&](int64_t k) { return k < cols ? w[k] : 0.0f; };
  // A subnormal result flushed to zero of its sign (MXCSR.FTZ, as the kernels run).
  auto ftz = [](float v) {
    return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v;
  };
  for (int64_t b = 0; b < cols; b += 32) {
    float even = 0.0f, odd = 0.0f;
    for (int64_t k = b; k < b + 32; k += 2) {
      even = ftz(std::fma(xv(k), wv(k), even));
      odd = ftz(std::fma(xv(k + 1), wv(k + 1), odd));
    }
    acc = ftz(acc + ftz(even + odd));
  }
  return acc;
}

struct Case {
  DType dtype;
  ActivationPrecision precision;
};

class GemmTest : public ::testing::TestWithParam<Case> {};

TEST_P(GemmTest, PackedValuesAreTheSource) {
  const Case c = GetParam();
  for (int64_t cols : {1, 2, 7}) {
    const Source s = MakeSource(c.dtype, 37, cols, 3);
    const PackedMatrix m = PackedMatrix::Pack(s.ref, c.precision);
    EXPECT_EQ(m.panels(), 2);
    for (int64_t r = 0; r < 37; ++r)
      for (int64_t k = 0; k < cols; ++k) ASSERT_EQ(m.At(r, k), s.exact[r * cols + k]);
  }
}

// Every token count (so every tile height and tail), partial panels and row ranges, bias or not:
// each element equals its scalar chain bit for bit.
TEST_P(GemmTest, EveryElementIsItsScalarChain) {
  const Case c = GetParam();
  for (int64_t cols : {1, 2, 5, 64, 131}) {
    for (int64_t rows : {1, 33, 100, 160}) {
      const Source s = MakeSource(c.dtype, rows, cols, static_cast<uint64_t>(rows * 7 + cols));
      const PackedMatrix m = PackedMatrix::Pack(s.ref, c.precision);
      const std::vector<float> bias = RandomX(1, rows, 99);
      for (int64_t n : {1, 2, 3, 4, 7, 12, 13, 25, 40}) {
        const int64_t x_stride = cols + 1;
        const std::vector<float> x = RandomX(n, x_stride, static_cast<uint64_t>(n));
        const int64_t r0 = rows > 40 ? 5 : 0, r1 = rows > 40 ? rows - 2 : rows;
        const bool with_bias = (n % 2) == 1;
        std::vector<float> y(static_cast<size_t>(n * (r1 - r0)), -1.0f);
        const GemmInput in = PackGemmInput(x.data(), n, x_stride, m);
        Gemm(in, m, with_bias ? bias.data() : nullptr, y.data(), r1 - r0, r0, r1);
        for (int64_t t = 0; t < n; ++t) {
          for (int64_t r = r0; r < r1; ++r) {
            float want = Chain(&x[t * x_stride], &s.exact[r * cols], cols, c.dtype, c.precision);
            if (with_bias) want += bias[r];
            ASSERT_EQ(y[t * (r1 - r0) + r - r0], want)
                << "cols " << cols << " rows " << rows << " n " << n << " t " << t << " r " << r;
          }
        }
      }
    }
  }
}

// The same products on one thread and on two, with the hand-written x86 tiles on and off:
// identical bits.
TEST_P(GemmTest, ThreadsAndKernelsAgree) {
  const Case c = GetParam();
  const int64_t rows = 300, cols = 96, n = 29;
  const Source s = MakeSource(c.dtype, rows, cols, 5);
  const PackedMatrix m = PackedMatrix::Pack(s.ref, c.precision);
  const std::vector<float> x = RandomX(n, cols, 6);
  auto run = [&](int threads, bool hw) {
    SetGemmX86Kernels(hw);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<float> y(static_cast<size_t>(n * rows));
    Gemm(x.data(), n, m, nullptr, y.data());
    omp_set_num_threads(saved);
    SetGemmX86Kernels(true);
    return y;
  };
  const std::vector<float> base = run(1, true);
  EXPECT_EQ(run(2, true), base);
  EXPECT_EQ(run(1, false), base);
  EXPECT_EQ(run(2, false), base);
}

// Every SIMD target this binary has and this CPU runs (AVX-512, AVX2, SSE4, ...): the same bits,
// so a transcript recorded on one machine replays on another.
TEST_P(GemmTest, EverySimdTargetGivesTheSameBits) {
  const Case c = GetParam();
  const int64_t rows = 70, cols = 37, n = 14;
  const Source s = MakeSource(c.dtype, rows, cols, 8);
  const PackedMatrix m = PackedMatrix::Pack(s.ref, c.precision);
  const std::vector<float> x = RandomX(n, cols, 9);
  std::vector<float> want(static_cast<size_t>(n * rows));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t r = 0; r < rows; ++r)
      want[t * rows + r] = Chain(&x[t * cols], &s.exact[r * cols], cols, c.dtype, c.precision);
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  EXPECT_GE(targets.size(), 2u);
  for (const int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    SetGemmX86Kernels(false);
    std::vector<float> y(want.size());
    Gemm(x.data(), n, m, nullptr, y.data());
    EXPECT_EQ(y, want) << hwy::TargetName(target);
  }
  hwy::SetSupportedTargetsForTest(0);
  SetGemmX86Kernels(true);
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return std::string(DTypeName(info.param.dtype)) +
         (info.param.precision == ActivationPrecision::kBF16 ? "_bf16act" : "_f32act");
}

INSTANTIATE_TEST_SUITE_P(AllKinds, GemmTest,
                         ::testing::Values(Case{DType::kF32, ActivationPrecision::kF32},
                                           Case{DType::kF16, ActivationPrecision::kF32},
                                           Case{DType::kBF16, ActivationPrecision::kF32},
                                           Case{DType::kBF16, ActivationPrecision::kBF16}),
                         CaseName);

// Subnormals: bf16 weights and activations that round to a subnormal count as zero (AMX's DAZ), and
// a chain that passes through a subnormal value is flushed (its FTZ), on every kernel.
TEST(Gemm, Bf16SubnormalsFlushOnBothKernels) {
  const int64_t cols = 4;
  std::vector<uint16_t> w = {F32ToBF16(1e-39f), F32ToBF16(1.0f), F32ToBF16(1e-20f),
                             F32ToBF16(1e-20f)};
  const MatrixRef ref{DType::kBF16, 1, cols, cols, w.data()};
  const PackedMatrix m = PackedMatrix::Pack(ref, ActivationPrecision::kBF16);
  EXPECT_EQ(m.At(0, 0), 0.0f);
  // Even chain: k = 0: 1 * 0; k = 2: 1e-20 * 1e-20 = 1e-40 (subnormal: flushed). Odd chain: k = 1:
  // the largest f32 subnormal (read as 0, though it would round up to bf16's smallest normal) * 1;
  // k = 3: flushed as k = 2.
  const float max_subnormal = std::nextafter(std::numeric_limits<float>::min(), 0.0f);
  const std::vector<float> x = {1.0f, max_subnormal, 1e-20f, 1e-20f};
  for (bool hw : {true, false}) {
    SetGemmX86Kernels(hw);
    float y = -1.0f;
    Gemm(x.data(), 1, m, nullptr, &y);
    EXPECT_EQ(y, 0.0f) << (hw ? "x86 tiles" : "portable");
  }
  SetGemmX86Kernels(true);
}

// bf16 activations cost one rounding of x (relative 2^-9) per product: the result stays within a
// few 2^-9 of the f64 sum of the same products, relative to the sum of their magnitudes.
TEST(Gemm, Bf16ActivationsStayWithinTheirRounding) {
  const int64_t rows = 64, cols = 4544, n = 3;
  const Source s = MakeSource(DType::kBF16, rows, cols, 11);
  const PackedMatrix m = PackedMatrix::Pack(s.ref, ActivationPrecision::kBF16);
  const std::vector<float> x = RandomX(n, cols, 12);
  std::vector<float> y(static_cast<size_t>(n * rows));
  Gemm(x.data(), n, m, nullptr, y.data());
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0, mag = 0;
      for (int64_t k = 0; k < cols; ++k) {
        const double p = static_cast<double>(x[t * cols + k]) * s.exact[r * cols + k];
        sum += p;
        mag += std::fabs(p);
      }
      EXPECT_LE(std::fabs(y[t * rows + r] - sum), mag * std::ldexp(1.0, -9));
    }
  }
}

TEST(Gemm, KernelNames) {
  const Source s = MakeSource(DType::kBF16, 4, 8, 1);
  const PackedMatrix fast = PackedMatrix::Pack(s.ref, ActivationPrecision::kBF16);
  const PackedMatrix exact = PackedMatrix::Pack(s.ref, ActivationPrecision::kF32);
  EXPECT_EQ(std::string(GemmKernelName(exact)).rfind("bf16: bf16 weights, f32 activations (", 0),
            0u);
  SetGemmX86Kernels(false);  // no AMX: the pairs tiles for every call
  EXPECT_EQ(std::string(GemmKernelName(fast)), "bf16: " + GemmKernelLabel(GemmKernel::kBf16Pairs));
  SetGemmX86Kernels(true);
  if (CpuHas(CpuKernels::kAmxBf16Gemm)) {
    EXPECT_NE(std::string(GemmKernelName(fast)).find("; from 4 tokens bf16 tiles (AMX BF16)"),
              std::string::npos);
  } else if (CpuHas(CpuKernels::kAvx512Bf16Vbmi)) {  // AVX-512 BF16 without AMX: vdpbf16ps
    EXPECT_NE(std::string(GemmKernelName(fast))
                  .find("; from 6 tokens bf16 dot products in AMX's order (AVX-512 BF16)"),
              std::string::npos)
        << GemmKernelName(fast);
  }
  const Source f = MakeSource(DType::kF32, 4, 8, 1);
  EXPECT_EQ(std::string(GemmKernelName(PackedMatrix::Pack(f.ref))),
            "f32: f32 FMA (" + CpuKernelsName(CpuKernels::kPortable) + ")");
}

}  // namespace
}  // namespace wc
