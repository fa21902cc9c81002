// Block-float weights in 8-bit integers (kernels/gemm/bfp/bfp_int8.h, --matmul-precision int8): the
// re-expressed weights against the definition computed here from tt-metal's own tile bytes, and
// the GEMM bit for bit against the contract's chain computed here, for both formats, odd shapes,
// 1..33 tokens, row ranges, bias, 1 and 2 threads, each kernel (portable, AVX2, VNNI). Plus its
// accuracy against the exact product (a sanity bound, not the contract).
#include <omp.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu_kernels.h"
#include "kernels/gemm/bfp/bfp_int8.h"
#include "kernels/gemm/format_table.h"
#include "kernels/gemm/gemm.h"
#include "tests/test_util.h"
#include "util/rng.h"

namespace wc {
namespace {

// W [out, in] f32 whose columns' magnitudes differ by up to 2^12 (so a half tile's exponents span
// more than bfp4's 4 powers in some blocks and less in others), with a zero column and a zero row.
std::vector<float> MakeWeights(int64_t out, int64_t in, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> col_scale(static_cast<size_t>(in));
  for (auto& s : col_scale)
    s = static_cast<float>(std::ldexp(1.0, static_cast<int>(rng.Uniform() * 13) - 10));
  std::vector<float> w(static_cast<size_t>(out * in));
  for (int64_t r = 0; r < out; ++r)
    for (int64_t k = 0; k < in; ++k)
      w[static_cast<size_t>(r * in + k)] =
          (r == 3 || k == 7)
              ? 0.0f
              : static_cast<float>(rng.Uniform() * 2 - 1) * col_scale[static_cast<size_t>(k)];
  return w;
}

// precision: kInt8, or kInt7 (the same layout and contract with 7-bit activation blocks).
PackedMatrix PackInt8(BfpFormat f, const std::vector<float>& w, int64_t out, int64_t in,
                      ActivationPrecision precision = ActivationPrecision::kInt8) {
  return PackedMatrix::Pack(MatrixRef{DType::kF32, out, in, in, w.data()},
                            f == BfpFormat::kBfp8 ? WeightFormat::kBfp8 : WeightFormat::kBfp4,
                            precision, "w");
}

constexpr ActivationPrecision kIntegerModes[] = {ActivationPrecision::kInt8,
                                                 ActivationPrecision::kInt7};

// The definition (bfp_int8.h) from tt-metal's tile bytes: every q[n, k] dW of tile (tk, tn).
// Counts the half tiles kept exact and the ones whose low bits were rounded.
void ExpectTileFollowsTheDefinition(BfpFormat f, const std::vector<float>& w, int64_t out,
                                    int64_t in, const PackedMatrix& m, int64_t tk, int64_t tn,
                                    int* exact_halves, int* rounded_halves) {
  const MatrixRef ref{DType::kF32, out, in, in, w.data()};
  uint32_t bits[32 * 32];
  uint8_t tt[BfpTileBytes(BfpFormat::kBfp8)];
  GatherBfpTile(ref, "w", tk, tn, bits);
  PackBfpTile(f, bits, tt);
  const int b = BfpMagnitudeBits(f), headroom = 7 - b;
  for (int h = 0; h < 2; ++h) {
    int e[32], c[32][16];
    bool nonzero[32] = {};
    int emax = 0, emin = 255;
    for (int k = 0; k < 32; ++k) {
      const int face = (k / 16) * 2 + h, i = k % 16;
      e[k] = tt[face * 16 + i];
      for (int j = 0; j < 16; ++j) {
        int sign, mag;
        if (f == BfpFormat::kBfp8) {
          const uint8_t code = tt[64 + (face * 16 + i) * 16 + j];
          sign = code >> 7, mag = code & 0x7f;
        } else {
          const uint8_t code = (tt[64 + (face * 16 + i) * 8 + j / 2] >> (4 * (j % 2))) & 0xf;
          sign = code >> 3, mag = code & 7;
        }
        c[k][j] = sign ? -mag : mag;
        nonzero[k] |= mag != 0;
      }
      if (nonzero[k]) emax = std::max(emax, e[k]), emin = std::min(emin, e[k]);
    }
    bool rounded = false;
    for (int k = 0; k < 32; ++k)
      for (int j = 0; j < 16; ++j) {
        const int64_t r = 32 * tn + 16 * h + j, col = 32 * tk + k;
        if (r >= out || col >= in) continue;
        const int d = nonzero[k] ? e[k] - (emax - headroom) : 0;
        // Rounded half to even by the FPU's default mode: an implementation apart from the code's.
        const double q = d >= 0 ? std::ldexp(c[k][j], d) : std::nearbyint(std::ldexp(c[k][j], d));
        rounded |= d < 0 && q != std::ldexp(c[k][j], d);
        const float want = static_cast<float>(std::ldexp(q, emax - 133));
        ASSERT_EQ(m.At(r, col), want) << "r " << r << " k " << col;
        if (d >= 0) {  // exact: the decoded value itself
          const float decoded = static_cast<float>(std::ldexp(c[k][j], e[k] - 127 - (b - 1)));
          ASSERT_EQ(m.At(r, col), decoded);
        }
      }
    if (emin <= emax) (emax - emin <= headroom ? *exact_halves : *rounded_halves) += 1;
    if (emax - emin <= headroom) {
      EXPECT_FALSE(rounded);  // exact wherever the span allows
    }
  }
}

TEST(BfpInt8, WeightsFollowTheDefinition) {
  for (BfpFormat f : {BfpFormat::kBfp8, BfpFormat::kBfp4}) {
    const int64_t out = 70, in = 100;
    const std::vector<float> w = MakeWeights(out, in, 11);
    const PackedMatrix m = PackInt8(f, w, out, in);
    EXPECT_EQ(m.precision(), ActivationPrecision::kInt8);
    // tt-metal's size, and a scale a half tile beside it.
    EXPECT_EQ(m.bfp().bytes(), static_cast<size_t>(3 * 4 * BfpTileBytes(f)));
    EXPECT_EQ(m.bytes(), static_cast<size_t>(3 * 4 * (BfpTileBytes(f) + 8)));
    int exact = 0, rounded = 0;
    for (int64_t tk = 0; tk < 4; ++tk)
      for (int64_t tn = 0; tn < 3; ++tn)
        ExpectTileFollowsTheDefinition(f, w, out, in, m, tk, tn, &exact, &rounded);
    // The columns' spread puts half tiles on both sides of the exactness line (bfp8's line is
    // equal exponents, which a random half tile never has).
    EXPECT_GT(rounded, 0) << BfpFormatName(f);
    if (f == BfpFormat::kBfp4) {
      EXPECT_GT(exact, 0);
    }
    std::vector<float> row(static_cast<size_t>(in));
    m.Row(5, row.data());
    for (int64_t k = 0; k < in; ++k) EXPECT_EQ(row[static_cast<size_t>(k)], m.At(5, k));
  }
}

// The contract's chain for y[t, r], from At's values and the activations' quantization (8-bit or
// 7-bit blocks, as m's precision says).
std::vector<float> ContractGemm(const PackedMatrix& m, const float* x, int64_t n, const float* bias,
                                int64_t r0, int64_t r1) {
  const int64_t in = m.cols(), k32 = (in + 31) / 32 * 32;
  std::vector<float> padded(static_cast<size_t>(n * k32), 0.0f);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t k = 0; k < in; ++k) padded[static_cast<size_t>(t * k32 + k)] = x[t * in + k];
  const int code_max = ActivationCodeMax(m.precision());
  const QuantInput q =
      QuantizeActivations(padded.data(), n, k32, k32, QuantActivation::kA32, code_max);
  for (const int8_t c : q.codes) EXPECT_LE(std::abs(c), code_max);
  std::vector<float> y(static_cast<size_t>(n * (r1 - r0)));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t r = r0; r < r1; ++r) {
      float acc = 0.0f;
      for (int64_t b = 0; b < k32 / 32; ++b) {
        const float dw = m.bfp().int8_scales()[((r / 32) * (k32 / 32) + b) * 2 + (r % 32) / 16];
        int32_t isum = 0;
        for (int64_t k = 32 * b; k < std::min(in, 32 * b + 32); ++k) {
          const float qw = m.At(r, k) / dw;
          EXPECT_EQ(qw, std::nearbyint(qw));
          EXPECT_LE(std::fabs(qw), 127.0f);
          isum += static_cast<int32_t>(qw) * q.Codes(t)[k];
        }
        acc = std::fma(dw * q.Dx(t)[b], static_cast<float>(isum), acc);
      }
      y[static_cast<size_t>(t * (r1 - r0) + r - r0)] = bias ? acc + bias[r] : acc;
    }
  return y;
}

std::vector<float> RunGemm(const PackedMatrix& m, const std::vector<float>& x, int64_t n,
                           const float* bias, int64_t r0, int64_t r1) {
  std::vector<float> y(static_cast<size_t>(n * (r1 - r0)), -1.0f);
  const GemmInput in = PackGemmInput(x.data(), n, m.cols(), m);
  Gemm(in, m, bias, y.data(), r1 - r0, r0, r1);
  return y;
}

// The GEMM on 1 and 2 threads and every kernel this CPU has (portable, AVX2, VNNI), each the
// contract's bits `want`; `what` names the case in a failure. Leaves the kernels enabled as found
// (unless an assertion fails).
void ExpectEveryKernelGives(const std::vector<float>& want, const PackedMatrix& m,
                            const std::vector<float>& x, int64_t n, const float* bias, int64_t r0,
                            int64_t r1, const std::string& what) {
  const int saved = omp_get_max_threads();
  const bool vnni = KernelsOn(CpuKernels::kAvx512Vnni), avx2 = KernelsOn(CpuKernels::kAvx2Int8);
  for (int threads : {1, 2})
    for (GemmKernel kernel :
         {GemmKernel::kBfpInt8, GemmKernel::kBfpInt8Avx2, GemmKernel::kBfpInt8Vnni}) {
      if ((kernel == GemmKernel::kBfpInt8Vnni && !vnni) ||
          (kernel == GemmKernel::kBfpInt8Avx2 && !avx2))
        continue;
      omp_set_num_threads(threads);
      SetKernelsEnabled(CpuKernels::kAvx512Vnni, kernel == GemmKernel::kBfpInt8Vnni);
      SetKernelsEnabled(CpuKernels::kAvx2Int8, kernel != GemmKernel::kBfpInt8);
      ASSERT_EQ(ChooseGemmKernel(m.format(), m.precision(), n).kernel, kernel);
      const std::vector<float> got = RunGemm(m, x, n, bias, r0, r1);
      ASSERT_TRUE(test::SameBits(got, want))
          << what << " threads " << threads << " kernel " << GemmKernelLabel(kernel);
    }
  SetKernelsEnabled(CpuKernels::kAvx512Vnni, vnni);
  SetKernelsEnabled(CpuKernels::kAvx2Int8, avx2);
  omp_set_num_threads(saved);
}

// Both integer modes: int7's AVX2 bfp8 tiles of 8 tokens (x + 64 against q) at 8 and 9 tokens
// (the 8-15 calls' whole-panel tiles) and 33 (the segment pass's corrections).
TEST(BfpInt8, GemmIsTheContractOnEveryKernelTokenCountAndSplit) {
  for (const ActivationPrecision precision : kIntegerModes)
    for (BfpFormat f : {BfpFormat::kBfp8, BfpFormat::kBfp4}) {
      const int64_t out = 70, in = 100;
      const std::vector<float> w = MakeWeights(out, in, 21);
      const PackedMatrix m = PackInt8(f, w, out, in, precision);
      std::vector<float> bias(static_cast<size_t>(out));
      for (int64_t r = 0; r < out; ++r)
        bias[static_cast<size_t>(r)] = 0.25f * static_cast<float>(r);
      for (int64_t n : {1, 2, 5, 6, 7, 8, 9, 33}) {
        const std::vector<float> x = test::RandomX(n, in, 100 + n);
        for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, out}, {5, 61}}) {
          for (const float* b : std::vector<const float*>{nullptr, bias.data()})
            ExpectEveryKernelGives(ContractGemm(m, x.data(), n, b, r0, r1), m, x, n, b, r0, r1,
                                   std::string(BfpFormatName(f)) + " code max " +
                                       std::to_string(ActivationCodeMax(precision)) + " n " +
                                       std::to_string(n) + " rows " + std::to_string(r0) + ".." +
                                       std::to_string(r1) + (b ? " bias" : ""));
        }
      }
    }
}

// bfp4's many-token AVX2 tile takes a quarter tile (8 rows x 32 k) in one of two forms: quartered
// where every q is a multiple of 4 (unsigned x + 128 against q / 4, 16-bit pair sums), signed
// otherwise (bfp_int8_avx2.cpp). Both forms here, mixed within a segment of expanded blocks, over
// more k tiles than a segment holds and more tokens than a chunk, with the 16-bit sums at their
// largest (rows of +-7 x 2^4 against tokens of +-127): the contract's bits on every kernel. 3
// tokens take the few-token tile in 16-bit words instead (x' = x 2^4 at its largest), 7 the
// expanded tile's 4 and three single tokens, 517 every path of the expanded one.
TEST(BfpInt8, Bfp4BothTileFormsAcrossSegmentsAndChunks) {
  const int64_t out = 40, in = 1125;  // 36 k tiles; the last one partial
  Rng rng(41);
  std::vector<float> w(static_cast<size_t>(out * in));
  for (int64_t k = 0; k < in; ++k) {
    // Every third k tile's columns spread over 2^12 (signed form); the rest alike (quartered).
    const double scale =
        (k / 32) % 3 == 1 ? std::ldexp(1.0, static_cast<int>(rng.Uniform() * 13) - 10) : 1.0;
    for (int64_t r = 0; r < out; ++r)
      w[static_cast<size_t>(r * in + k)] =
          r < 2 ? (r == 0 ? 1.75f : -1.75f)  // code 7 at the block's exponent: q = +-112
                : static_cast<float>((rng.Uniform() * 2 - 1) * scale);
  }
  const PackedMatrix m = PackInt8(BfpFormat::kBfp4, w, out, in);
  // Count the forms: quartered where every k of a half tile has a shift of at least 2 (the
  // header; every q then a multiple of 4, checked from At / dW).
  int quartered = 0, signed_form = 0;
  for (int64_t p = 0; p < m.bfp().panels(); ++p)
    for (int64_t b = 0; b < m.bfp().k_tiles(); ++b)
      for (int64_t h = 0; h < 2; ++h) {
        const uint8_t* half = m.bfp().Int8Half(p, b, h);
        bool all_at_least_2 = true;
        for (int k = 0; k < 32; ++k) all_at_least_2 &= half[k] >= 2;
        (all_at_least_2 ? quartered : signed_form) += 1;
        for (int64_t r = 32 * p + 16 * h; all_at_least_2 && r < std::min(out, 32 * p + 16 * h + 16);
             ++r)
          for (int64_t k = 32 * b; k < std::min(in, 32 * b + 32); ++k)
            EXPECT_EQ(static_cast<int>(m.At(r, k) / m.bfp().Int8Scale(p, b, h)) % 4, 0);
      }
  EXPECT_GT(quartered, 20);
  EXPECT_GT(signed_form, 10);
  for (int64_t n : {3, 7, 517}) {
    std::vector<float> x = test::RandomX(n, in, 300 + n);
    for (int64_t k = 0; k < in; ++k)
      x[static_cast<size_t>(k)] = 1.0f, x[static_cast<size_t>(in + k)] = -1.0f;
    ExpectEveryKernelGives(ContractGemm(m, x.data(), n, nullptr, 0, out), m, x, n, nullptr, 0, out,
                           "n " + std::to_string(n));
  }
}

// bfp8's many-token AVX2 tile reads its codes in place (no expansion), a segment of k tiles at a
// time for every tile of a chunk's tokens: here over more k tiles than a segment holds, more tokens
// than a chunk (and a tail of single tokens), a row range inside the panels and the sums at their
// largest (codes of +-127 against tokens of +-127): the contract's bits on every kernel.
// With int7 the 8-token tiles multiply x + 64 (1..127) by q: the pair sums at their largest,
// 2 x 127 x 127, and the corrections at theirs (rows of +-127 codes: -+64 x 127 x 32 a block).
TEST(BfpInt8, Bfp8InPlaceAcrossSegmentsAndChunks) {
  const int64_t out = 70,
                in = 1125;  // 36 k tiles, the last one partial; 3 panels, the last partial
  Rng rng(43);
  std::vector<float> w(static_cast<size_t>(out * in));
  for (int64_t r = 0; r < out; ++r)
    for (int64_t k = 0; k < in; ++k)
      w[static_cast<size_t>(r * in + k)] =
          r < 2 ? (r == 0 ? 1.984375f : -1.984375f)  // code 127 at the block's exponent
                : static_cast<float>(
                      (rng.Uniform() * 2 - 1) *
                      std::ldexp(1.0, (k / 32) % 4 == 1 ? static_cast<int>(rng.Uniform() * 6) : 0));
  for (const ActivationPrecision precision : kIntegerModes) {
    const PackedMatrix m = PackInt8(BfpFormat::kBfp8, w, out, in, precision);
    EXPECT_EQ(m.bfp().k_tiles(), 36);
    // 6: the vpsignb tiles alone; 11: one 8-token tile without the sign pass (vpsignb), then a
    // tail of 3; 16: two 8-token tiles with the sign pass and nothing else; 517: 64 of them and a
    // tail of 5; 1043: three chunks (512, 512, 19), the third starting its groups at token 1024.
    for (int64_t n : {6, 11, 16, 517, 1043}) {
      std::vector<float> x = test::RandomX(n, in, 500 + n);
      for (int64_t k = 0; k < in; ++k)
        x[static_cast<size_t>(k)] = 1.0f, x[static_cast<size_t>(in + k)] = -1.0f;
      for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, out}, {9, 66}})
        ExpectEveryKernelGives(ContractGemm(m, x.data(), n, nullptr, r0, r1), m, x, n, nullptr, r0,
                               r1,
                               "code max " + std::to_string(ActivationCodeMax(precision)) + " n " +
                                   std::to_string(n) + " rows " + std::to_string(r0));
    }
  }
}

// Against the exact product of the decoded weights (f32 activations): within a few percent of the
// output's magnitude (8-bit activations, rounded low bits of small columns), never garbage.
TEST(BfpInt8, CloseToTheExactProduct) {
  for (BfpFormat f : {BfpFormat::kBfp8, BfpFormat::kBfp4}) {
    const int64_t out = 64, in = 256, n = 5;
    Rng rng(3);
    std::vector<float> w(static_cast<size_t>(out * in));
    for (auto& v : w) v = static_cast<float>(rng.Uniform() * 2 - 1);
    const std::vector<float> x = test::RandomX(n, in, 4);
    const PackedMatrix exact =
        PackedMatrix::Pack(MatrixRef{DType::kF32, out, in, in, w.data()},
                           f == BfpFormat::kBfp8 ? WeightFormat::kBfp8 : WeightFormat::kBfp4,
                           ActivationPrecision::kF32, "w");
    const std::vector<float> want = RunGemm(exact, x, n, nullptr, 0, out);
    const std::vector<float> got = RunGemm(PackInt8(f, w, out, in), x, n, nullptr, 0, out);
    double err = 0, norm = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      err += (got[i] - want[i]) * (got[i] - want[i]);
      norm += want[i] * want[i];
    }
    EXPECT_LT(std::sqrt(err / norm), 0.02) << BfpFormatName(f);
    EXPECT_GT(std::sqrt(err / norm), 0.0) << BfpFormatName(f);  // 8-bit activations: not exact
  }
}

// int8 is a block-float matrix's mode: a BF16 matrix asked for it takes bf16 activations.
TEST(BfpInt8, Bf16MatricesKeepBf16Activations) {
  std::vector<float> w(32 * 32, 0.5f);
  const PackedMatrix m = PackedMatrix::Pack(MatrixRef{DType::kF32, 32, 32, 32, w.data()},
                                            WeightFormat::kBF16, ActivationPrecision::kInt8, "w");
  EXPECT_EQ(m.precision(), ActivationPrecision::kBF16);
}

}  // namespace
}  // namespace wc
