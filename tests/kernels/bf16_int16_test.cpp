// BF16 weights in 16-bit integers (kernels/gemm/bf16/bf16_int16.h, --matmul-precision int16): the
// GEMM bit for bit against the contract computed here from the bf16 weights and f32 activations
// alone (its own quantization of both, 64-bit sums checked to fit 32 bits), odd shapes, 1..37
// tokens, row ranges, bias, 1 and 2 threads, each kernel (portable, AVX2); every token of a call
// the same bits as that token alone; the packed values; the edge cases of the quantizers; and the
// accuracy against the exact product (a sanity bound, not the contract).
#include <omp.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu_kernels.h"
#include "kernels/gemm/bf16/bf16_int16.h"
#include "kernels/gemm/format_table.h"
#include "kernels/gemm/gemm.h"
#include "tests/test_util.h"
#include "util/bf16.h"
#include "util/rng.h"

namespace wc {
namespace {

// W [out, in] of bf16 values whose magnitudes within a row differ by up to 2^14 (so some blocks
// span more than the codes' 7 exact powers of two), with a zero row, a zero column and a row at
// the codes' largest magnitude (255/128 2^e: |q| = 32640).
std::vector<uint16_t> MakeBf16Weights(int64_t out, int64_t in, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint16_t> w(static_cast<size_t>(out * in));
  for (int64_t r = 0; r < out; ++r)
    for (int64_t k = 0; k < in; ++k) {
      float v = static_cast<float>((rng.Uniform() * 2 - 1) *
                                   std::ldexp(1.0, static_cast<int>(rng.Uniform() * 15) - 12));
      if (r == 3 || k == 7) v = 0;
      if (r == 5) v = (k % 2 ? -1 : 1) * 255.0f / 128.0f;
      w[static_cast<size_t>(r * in + k)] = F32ToBF16(v);
    }
  return w;
}

PackedMatrix PackInt16(const std::vector<uint16_t>& w, int64_t out, int64_t in) {
  return PackedMatrix::Pack(MatrixRef{DType::kBF16, out, in, in, w.data()}, WeightFormat::kBF16,
                            ActivationPrecision::kInt16, "w");
}

// The contract (bf16_int16.h), from the bf16 weights and f32 activations, for rows [r0, r1).
std::vector<float> Int16ContractGemm(const std::vector<uint16_t>& w, int64_t in, const float* x,
                                     int64_t n, const float* bias, int64_t r0, int64_t r1) {
  const int64_t blocks = (in + 31) / 32;
  std::vector<float> y(static_cast<size_t>(n * (r1 - r0)));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t r = r0; r < r1; ++r) {
      float acc = 0;
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t k0 = 32 * b, k1 = std::min(in, k0 + 32);
        float mw = 0, mx = 0;
        bool finite = true;
        for (int64_t k = k0; k < k1; ++k) {
          mw = std::max(mw, std::fabs(BF16ToF32(w[static_cast<size_t>(r * in + k)])));
          mx = std::max(mx, std::fabs(x[t * in + k]));
          finite = finite && std::isfinite(x[t * in + k]);
        }
        int e = -111;
        if (mw > 0) std::frexp(mw, &e);
        e = std::max(e, -111);
        const float dw = std::ldexp(1.0f, e - 15);
        float dx = 0;
        if (!finite)
          dx = std::numeric_limits<float>::quiet_NaN();
        else if (mx >= std::ldexp(1.0f, -100))
          dx = mx / 2047.0f;
        int64_t isum = 0;
        for (int64_t k = k0; k < k1; ++k) {
          const double qw =
              std::nearbyint(BF16ToF32(w[static_cast<size_t>(r * in + k)]) / double{dw});
          const double qx = dx > 0 ? std::nearbyint(double{x[t * in + k] / dx}) : 0.0;
          EXPECT_LE(std::fabs(qw), 32640.0);
          EXPECT_LE(std::fabs(qx), 2047.0);
          isum += static_cast<int64_t>(qw) * static_cast<int64_t>(qx);
        }
        EXPECT_LT(std::llabs(isum), int64_t{1} << 31);
        acc = std::fma(dw * dx, static_cast<float>(isum), acc);
      }
      y[static_cast<size_t>(t * (r1 - r0) + r - r0)] = bias ? acc + bias[r] : acc;
    }
  return y;
}

std::vector<float> RunInt16Gemm(const PackedMatrix& m, const std::vector<float>& x, int64_t n,
                                const float* bias, int64_t r0, int64_t r1) {
  std::vector<float> y(static_cast<size_t>(n * (r1 - r0)), -1.0f);
  const GemmInput in = PackGemmInput(x.data(), n, m.cols(), m);
  Gemm(in, m, bias, y.data(), r1 - r0, r0, r1);
  return y;
}

// x with a block of zeros, one of tiny values (below 2^-100: zeros too) and one at the largest
// magnitude in every token.
std::vector<float> MakeInt16X(int64_t n, int64_t in, uint64_t seed) {
  std::vector<float> x = test::RandomX(n, in, seed);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t k = 0; k < in; ++k) {
      float& v = x[static_cast<size_t>(t * in + k)];
      if (k >= 32 && k < 64) v = 0;
      if (k >= 64 && k < 96) v *= std::ldexp(1.0f, -110);
      if (k >= 96 && k < 128) v = (k % 3 ? 1.0f : -1.0f) * 1e4f;
    }
  return x;
}

TEST(Bf16Int16, GemmIsTheContractOnEveryKernelTokenCountAndSplit) {
  const int saved = omp_get_max_threads();
  const bool avx2 = KernelsOn(CpuKernels::kAvx2Int8);
  for (auto [out, in] : {std::pair<int64_t, int64_t>{70, 200}, {96, 160}}) {
    const std::vector<uint16_t> w = MakeBf16Weights(out, in, 21);
    const PackedMatrix m = PackInt16(w, out, in);
    std::vector<float> bias(static_cast<size_t>(out));
    for (int64_t r = 0; r < out; ++r) bias[static_cast<size_t>(r)] = 0.25f * static_cast<float>(r);
    for (int64_t n : {1, 2, 3, 4, 7, 37}) {
      const std::vector<float> x = MakeInt16X(n, in, 100 + n);
      for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, out}, {5, 61}}) {
        for (const float* b : std::vector<const float*>{nullptr, bias.data()}) {
          const std::vector<float> want = Int16ContractGemm(w, in, x.data(), n, b, r0, r1);
          for (int threads : {1, 2})
            for (GemmKernel kernel : {GemmKernel::kBf16Int16, GemmKernel::kBf16Int16Avx2}) {
              if (kernel == GemmKernel::kBf16Int16Avx2 && !avx2) continue;
              omp_set_num_threads(threads);
              SetKernelsEnabled(CpuKernels::kAvx2Int8, kernel == GemmKernel::kBf16Int16Avx2);
              ASSERT_EQ(ChooseGemmKernel(m.format(), m.precision(), n).kernel, kernel);
              const std::vector<float> got = RunInt16Gemm(m, x, n, b, r0, r1);
              ASSERT_TRUE(test::SameBits(got, want))
                  << out << "x" << in << " n " << n << " rows " << r0 << ".." << r1 << " threads "
                  << threads << " kernel " << GemmKernelLabel(kernel);
            }
          SetKernelsEnabled(CpuKernels::kAvx2Int8, avx2);
        }
      }
    }
  }
  omp_set_num_threads(saved);
}

// Every token of a long call (several chunks and segments of the AVX2 kernel: 600 tokens, K 1000)
// gives the bits that token gives alone (decode's path).
TEST(Bf16Int16, EveryTokenOfACallIsThatTokenAlone) {
  const int64_t out = 64, in = 1000, n = 600;
  const std::vector<uint16_t> w = MakeBf16Weights(out, in, 5);
  const PackedMatrix m = PackInt16(w, out, in);
  const std::vector<float> x = MakeInt16X(n, in, 6);
  const std::vector<float> all = RunInt16Gemm(m, x, n, nullptr, 0, out);
  for (int64_t t : {int64_t{0}, int64_t{1}, int64_t{299}, n - 1}) {
    const std::vector<float> xt(x.begin() + t * in, x.begin() + (t + 1) * in);
    const std::vector<float> one = RunInt16Gemm(m, xt, 1, nullptr, 0, out);
    const std::vector<float> got(all.begin() + t * out, all.begin() + (t + 1) * out);
    ASSERT_TRUE(test::SameBits(got, one)) << "token " << t;
  }
  const std::vector<float> want = Int16ContractGemm(w, in, x.data() + 599 * in, 1, nullptr, 0, out);
  const std::vector<float> last(all.end() - out, all.end());
  EXPECT_TRUE(test::SameBits(last, want));
}

// The packed matrix multiplies as q dW: a weight within 2^7 of its block's largest exactly, a
// smaller one within half a code (at most 2^-15 of that largest).
TEST(Bf16Int16, PackedValuesAreTheCodesTimesTheirScale) {
  const int64_t out = 40, in = 70;
  const std::vector<uint16_t> w = MakeBf16Weights(out, in, 9);
  const PackedMatrix m = PackInt16(w, out, in);
  EXPECT_EQ(m.bytes(), static_cast<size_t>(2 * 32 * 96 * 2 + 2 * 3 * 32));  // codes + exponents
  int rounded = 0;
  for (int64_t r = 0; r < out; ++r)
    for (int64_t k = 0; k < in; ++k) {
      float mw = 0;
      for (int64_t j = k / 32 * 32; j < std::min(in, k / 32 * 32 + 32); ++j)
        mw = std::max(mw, std::fabs(BF16ToF32(w[static_cast<size_t>(r * in + j)])));
      const float v = BF16ToF32(w[static_cast<size_t>(r * in + k)]);
      if (v == 0 || std::fabs(v) >= mw / 128) {
        EXPECT_EQ(m.At(r, k), v) << r << "," << k;
      } else {
        EXPECT_LE(std::fabs(m.At(r, k) - v), mw * std::ldexp(1.0f, -15)) << r << "," << k;
        rounded += m.At(r, k) != v;
      }
    }
  EXPECT_GT(rounded, 0);  // the weights span more than 2^7 in some blocks
}

// A NaN or infinity in a token's block makes that token's outputs NaN (as the float modes'
// would be non-finite), and nothing of the other tokens.
TEST(Bf16Int16, ANonFiniteActivationPoisonsItsTokenOnly) {
  const int64_t out = 32, in = 64;
  const PackedMatrix m = PackInt16(MakeBf16Weights(out, in, 2), out, in);
  std::vector<float> x = test::RandomX(3, in, 8);
  x[static_cast<size_t>(in + 40)] = std::numeric_limits<float>::infinity();
  const std::vector<float> y = RunInt16Gemm(m, x, 3, nullptr, 0, out);
  for (int64_t r = 0; r < out; ++r) {
    EXPECT_TRUE(std::isnan(y[static_cast<size_t>(out + r)])) << r;  // the zero row too: 0 x inf
    EXPECT_TRUE(std::isfinite(y[static_cast<size_t>(r)]));
    EXPECT_TRUE(std::isfinite(y[static_cast<size_t>(2 * out + r)]));
  }
}

// Tiny weights times tiny activations: each block's scale dW dx is subnormal (about 1e-43), kept
// as IEEE's (the contract) by every kernel even when the calling thread flushes subnormals (FTZ /
// DAZ), where it would make every output 0.
TEST(Bf16Int16, TheFloatStepsKeepSubnormals) {
  const int64_t out = 32, in = 64, n = 4;
  std::vector<uint16_t> w(static_cast<size_t>(out * in));
  Rng rng(12);
  for (auto& v : w) v = F32ToBF16(static_cast<float>((rng.Uniform() * 2 - 1) * 1e-20));
  std::vector<float> x = test::RandomX(n, in, 13);
  for (auto& v : x) v *= 1e-16f;
  const std::vector<float> want = Int16ContractGemm(w, in, x.data(), n, nullptr, 0, out);
  int nonzero = 0;
  for (float v : want) nonzero += v != 0;
  ASSERT_GT(nonzero, out * n / 2);
  const PackedMatrix m = PackInt16(w, out, in);
  const bool avx2 = KernelsOn(CpuKernels::kAvx2Int8);
  for (bool kernel : {false, true}) {
    if (kernel && !avx2) continue;
    SetKernelsEnabled(CpuKernels::kAvx2Int8, kernel);
#if defined(__x86_64__)
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040u);  // FTZ and DAZ on the calling thread
#endif
    const std::vector<float> got = RunInt16Gemm(m, x, n, nullptr, 0, out);
#if defined(__x86_64__)
    _mm_setcsr(csr);
#endif
    EXPECT_TRUE(test::SameBits(got, want)) << "avx2 kernel " << kernel;
  }
  SetKernelsEnabled(CpuKernels::kAvx2Int8, avx2);
}

// Against the exact product of the bf16 weights and f32 activations: within 0.1% of the output's
// magnitude (12-bit activations), closer than bf16 activations get, and not exact.
TEST(Bf16Int16, CloserToTheExactProductThanBf16Activations) {
  const int64_t out = 64, in = 512, n = 5;
  Rng rng(3);
  std::vector<uint16_t> w(static_cast<size_t>(out * in));
  for (auto& v : w) v = F32ToBF16(static_cast<float>(rng.Uniform() * 2 - 1));
  const std::vector<float> x = test::RandomX(n, in, 4);
  const MatrixRef ref{DType::kBF16, out, in, in, w.data()};
  const std::vector<float> exact =
      RunInt16Gemm(PackedMatrix::Pack(ref, WeightFormat::kBF16, ActivationPrecision::kF32, "w"), x,
                   n, nullptr, 0, out);
  const auto error = [&](ActivationPrecision p) {
    const std::vector<float> got =
        RunInt16Gemm(PackedMatrix::Pack(ref, WeightFormat::kBF16, p, "w"), x, n, nullptr, 0, out);
    double err = 0, norm = 0;
    for (size_t i = 0; i < exact.size(); ++i) {
      err += (got[i] - exact[i]) * (got[i] - exact[i]);
      norm += exact[i] * exact[i];
    }
    return std::sqrt(err / norm);
  };
  const double int16 = error(ActivationPrecision::kInt16), bf16 = error(ActivationPrecision::kBF16);
  EXPECT_LT(int16, 1e-3);
  EXPECT_GT(int16, 0.0);
  EXPECT_LT(int16, bf16);
}

// int16 is a BF16 matrix's mode: a block-float or f32 matrix asked for it takes bf16 (f32)
// activations, and the format table names the kernels.
TEST(Bf16Int16, OnlyBf16MatricesTakeIt) {
  std::vector<float> w(32 * 64, 0.5f);
  const MatrixRef ref{DType::kF32, 32, 64, 64, w.data()};
  EXPECT_EQ(
      PackedMatrix::Pack(ref, WeightFormat::kBfp8, ActivationPrecision::kInt16, "w").precision(),
      ActivationPrecision::kBF16);
  EXPECT_EQ(
      PackedMatrix::Pack(ref, WeightFormat::kF32, ActivationPrecision::kInt16, "w").precision(),
      ActivationPrecision::kF32);
  const PackedMatrix m =
      PackedMatrix::Pack(ref, WeightFormat::kBF16, ActivationPrecision::kInt16, "w");
  EXPECT_EQ(m.precision(), ActivationPrecision::kInt16);
  EXPECT_EQ(GemmKernelsByTokens(WeightFormat::kBF16, ActivationPrecision::kInt16),
            KernelsOn(CpuKernels::kAvx2Int8) ? "int16 products (AVX2 vpmaddwd)"
                                             : "int16 products (portable C++)");
}

}  // namespace
}  // namespace wc
