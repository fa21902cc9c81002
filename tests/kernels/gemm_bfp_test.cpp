// The block-float GEMM (kernels/gemm/bfp/gemm_bfp.h) against its contract: every element bit for
// bit the BF16 GEMM (kBF16) or F32 GEMM (kF32) on the dequantized matrix, for both formats, odd
// shapes, decode (1 token) and prefill (1..40 tokens; in-register widening and panels widened
// once), partial row ranges, bias, 1 and 2 threads, the AVX-512 kernel on and off, every SIMD
// target this binary has and WORMCHAT_SIMD=avx2 (a subprocess). Plus the panels' values and their
// build from tt-metal tiles.
#include <omp.h>
#include <unistd.h>
#include <xmmintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "hwy/targets.h"
#include "kernels/cpu_kernels.h"
#include "kernels/gemm/bfp/gemm_bfp.h"
#include "kernels/gemm/bfp/gemm_bfp_amx.h"
#include "kernels/gemm/gemm.h"
#include "kernels/simd_limit.h"
#include "tests/test_util.h"
#include "util/bf16.h"
#include "util/error.h"
#include "util/rng.h"

namespace wc {
namespace {

constexpr BfpFormat kFormat8 = BfpFormat::kBfp8, kFormat4 = BfpFormat::kBfp4;

// How a test matrix's values are drawn.
enum class Values {
  kUniform,  // U(-1, 1): every block plain
  kPlain,    // per row and block of 16 columns a scale 2^[-40, 1]: every block plain, exponents
             // varying from block to block
  kWide,     // per row and block of 16 columns a scale 2^[-150, 100], some zeros and tiny blocks:
             // exponents outside [B, 127 + B - 1], bf16 subnormals to flush, zero blocks
};

// W [out, in] f32 with row stride in + 3, one float off alignment.
struct F32Source {
  std::vector<float> storage;
  MatrixRef ref;
};

F32Source MakeF32Source(int64_t out, int64_t in, uint64_t seed, Values values) {
  F32Source s;
  const int64_t stride = in + 3;
  s.storage.assign(static_cast<size_t>(out * stride + 1), 0.0f);
  Rng rng(seed);
  for (int64_t r = 0; r < out; ++r) {
    float scale = 1.0f;
    for (int64_t k = 0; k < in; ++k) {
      if (values == Values::kPlain && k % 16 == 0)
        scale = static_cast<float>(std::ldexp(1.0, static_cast<int>(rng.Uniform() * 42) - 40));
      if (values == Values::kWide && k % 16 == 0) {
        const double u = rng.Uniform();
        scale =
            u < 0.1 ? 0.0f : static_cast<float>(std::ldexp(1.0, static_cast<int>(u * 250) - 150));
      }
      float v = scale * static_cast<float>(rng.Uniform() * 2.0 - 1.0);
      if (values == Values::kWide && rng.Uniform() < 0.05) v = -0.0f;
      s.storage[1 + r * stride + k] = v;
    }
  }
  s.ref = MatrixRef{DType::kF32, out, in, stride, s.storage.data() + 1};
  return s;
}

// The reference: the dequantized matrix packed for the BF16 (kBF16) or F32 (kF32) GEMM.
struct Reference {
  std::vector<float> values;   // [out, in]
  std::vector<uint16_t> bf16;  // [out, in]
  PackedMatrix packed;
};

Reference MakeReference(BfpFormat f, const F32Source& s, ActivationPrecision p) {
  Reference ref;
  const int64_t out = s.ref.rows, in = s.ref.cols;
  std::vector<uint8_t> tiles(static_cast<size_t>(BfpLayout{f, out, in}.bytes()));
  PackBfpMatrix(f, s.ref, "w", tiles.data());
  ref.values.resize(static_cast<size_t>(out * in));
  DequantizeBfpMatrix(BfpLayout{f, out, in}, tiles.data(), ref.values.data());
  if (p == ActivationPrecision::kBF16) {
    ref.bf16.resize(ref.values.size());
    for (size_t i = 0; i < ref.values.size(); ++i) {
      ref.bf16[i] = F32ToBF16(ref.values[i]);
      EXPECT_EQ(BF16ToF32(ref.bf16[i]), ref.values[i]);  // exact
    }
    ref.packed = PackedMatrix::Pack(MatrixRef{DType::kBF16, out, in, in, ref.bf16.data()}, p);
  } else {
    ref.packed = PackedMatrix::Pack(MatrixRef{DType::kF32, out, in, in, ref.values.data()}, p);
  }
  return ref;
}

using test::RandomX;

using test::SameBits;

// The first element whose bits differ, for the failure message.
std::string FirstDifference(const std::vector<float>& got, const std::vector<float>& want) {
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], 4) != 0)
      return Cat("element ", i, ": ", got[i], " want ", want[i]);
  }
  return "sizes differ";
}

struct BfpCase {
  BfpFormat format;
  ActivationPrecision precision;
};

class GemmBfpTest : public ::testing::TestWithParam<BfpCase> {
 protected:
  void TearDown() override { SetGemmX86Kernels(true); }
};

// The panels hold exactly the codec's values, built from the matrix or from tt-metal tiles.
TEST_P(GemmBfpTest, PanelsHoldTheCodecsValues) {
  const BfpCase c = GetParam();
  for (Values values : {Values::kUniform, Values::kWide}) {
    const F32Source s = MakeF32Source(45, 77, 3, values);
    const Reference ref = MakeReference(c.format, s, c.precision);
    const BfpPanels m = BfpPanels::FromMatrix(c.format, s.ref, "w", c.precision);
    EXPECT_EQ(m.bytes(), static_cast<size_t>(BfpLayout{c.format, 45, 77}.bytes()));
    std::vector<float> row(77);
    for (int64_t r = 0; r < 45; ++r) {
      m.Row(r, row.data());
      for (int64_t k = 0; k < 77; ++k)
        ASSERT_EQ(std::memcmp(&row[k], &ref.values[r * 77 + k], 4), 0) << r << ", " << k;
    }
    std::vector<uint8_t> tiles(static_cast<size_t>(BfpLayout{c.format, 45, 77}.bytes()));
    PackBfpMatrix(c.format, s.ref, "w", tiles.data());
    const BfpPanels t =
        BfpPanels::FromTiles(BfpLayout{c.format, 45, 77}, tiles.data(), "w", c.precision);
    ASSERT_EQ(t.bytes(), m.bytes());
    EXPECT_EQ(std::memcmp(t.data(), m.data(), m.bytes()), 0);
    for (int64_t p = 0; p < m.panels(); ++p) EXPECT_EQ(t.PanelIsPlain(p), m.PanelIsPlain(p));
    int64_t plain = 0;
    for (int64_t p = 0; p < m.panels(); ++p) plain += m.PanelIsPlain(p);
    // Uniform values make plain panels only; wide ones none (both widenings are tested).
    EXPECT_EQ(plain, values == Values::kUniform ? m.panels() : 0);
  }
}

// Every token count (every tile height and tail), odd shapes, partial row ranges, bias or not,
// plain and wide values: each element equals the reference GEMM's bit for bit, on the AVX-512
// kernel (where the CPU has it) and on the portable one.
TEST_P(GemmBfpTest, EveryElementIsTheReferenceGemms) {
  const BfpCase c = GetParam();
  for (Values values : {Values::kUniform, Values::kPlain, Values::kWide}) {
    for (int64_t cols : {1, 2, 5, 31, 33, 64, 131}) {
      for (int64_t rows : {1, 33, 100, 160}) {
        const F32Source s =
            MakeF32Source(rows, cols, static_cast<uint64_t>(rows * 7 + cols), values);
        const Reference ref = MakeReference(c.format, s, c.precision);
        const BfpPanels m = BfpPanels::FromMatrix(c.format, s.ref, "w", c.precision);
        const std::vector<float> bias = RandomX(1, rows, 99);
        for (int64_t n : {1, 2, 3, 4, 7, 12, 13, 25, 40}) {
          const int64_t x_stride = cols + 1;
          const std::vector<float> x = RandomX(n, x_stride, static_cast<uint64_t>(n));
          const int64_t r0 = rows > 40 ? 5 : 0, r1 = rows > 40 ? rows - 2 : rows;
          const float* b = (n % 2) == 1 ? bias.data() : nullptr;
          std::vector<float> want(static_cast<size_t>(n * (r1 - r0)), -1.0f);
          Gemm(PackGemmInput(x.data(), n, x_stride, ref.packed), ref.packed, b, want.data(),
               r1 - r0, r0, r1);
          for (bool hw : {true, false}) {
            SetGemmX86Kernels(hw);
            std::vector<float> y(want.size(), -1.0f);
            GemmBfp(PackBfpGemmInput(x.data(), n, x_stride, m), m, b, y.data(), r1 - r0, r0, r1);
            ASSERT_TRUE(SameBits(y, want))
                << FirstDifference(y, want) << " cols " << cols << " rows " << rows << " n " << n
                << (hw ? " " : " portable ") << GemmBfpKernelName(m);
          }
          SetGemmX86Kernels(true);
        }
      }
    }
  }
}

// 1 and 2 threads, AVX-512 kernel on and off, decode and prefill: identical bits.
TEST_P(GemmBfpTest, ThreadsAndKernelsAgree) {
  const BfpCase c = GetParam();
  const int64_t rows = 300, cols = 200;
  const F32Source s = MakeF32Source(rows, cols, 5, Values::kWide);
  const Reference ref = MakeReference(c.format, s, c.precision);
  const BfpPanels m = BfpPanels::FromMatrix(c.format, s.ref, "w", c.precision);
  for (int64_t n : {1, 29}) {
    const std::vector<float> x = RandomX(n, cols, 6);
    std::vector<float> want(static_cast<size_t>(n * rows));
    Gemm(x.data(), n, ref.packed, nullptr, want.data());
    for (int threads : {1, 2}) {
      for (bool hw : {true, false}) {
        SetGemmX86Kernels(hw);
        const int saved = omp_get_max_threads();
        omp_set_num_threads(threads);
        std::vector<float> y(want.size());
        GemmBfp(x.data(), n, m, nullptr, y.data());
        omp_set_num_threads(saved);
        EXPECT_TRUE(SameBits(y, want)) << FirstDifference(y, want) << " threads " << threads
                                       << " n " << n << " " << GemmBfpKernelName(m);
      }
    }
  }
}

// Token counts straddling BfpWidenOnceTokens (widened in registers below it, each panel widened
// once into the BF16 / F32 GEMM's layout from it): odd K and N, K past one chunk of f32 halves
// (1100: 512 + 48 k pairs), partial row ranges, bias, 1 and 2 threads, AVX-512 kernel on and off,
// plain and wide values: the reference's bits on both sides.
TEST_P(GemmBfpTest, WidenOnceStraddlesItsThreshold) {
  const BfpCase c = GetParam();
  for (Values values : {Values::kUniform, Values::kWide}) {
    for (int64_t cols : {3, 77, 96, 1100}) {
      for (int64_t rows : {45, 161}) {
        const F32Source s =
            MakeF32Source(rows, cols, static_cast<uint64_t>(rows + 3 * cols), values);
        const Reference ref = MakeReference(c.format, s, c.precision);
        const BfpPanels m = BfpPanels::FromMatrix(c.format, s.ref, "w", c.precision);
        const std::vector<float> bias = RandomX(1, rows, 17);
        // Both sides of this CPU's threshold and of every target's (AVX-512's, AVX2's).
        std::vector<int64_t> counts = {2 * kBfpWidenOnceTokensAvx512 + 3};
        for (int64_t t : {BfpWidenOnceTokens(m), kBfpWidenOnceTokensAvx512, kBfpWidenOnceTokensAvx2,
                          kBfpWidenOnceTokensAvx2F32})
          for (int64_t n : {t - 1, t, t + 1})
            if (std::find(counts.begin(), counts.end(), n) == counts.end()) counts.push_back(n);
        for (int64_t n : counts) {
          const int64_t x_stride = cols + 2;
          const std::vector<float> x = RandomX(n, x_stride, static_cast<uint64_t>(n + cols));
          const int64_t r0 = 3, r1 = rows - 1;
          const float* b = (n % 2) == 0 ? bias.data() : nullptr;
          std::vector<float> want(static_cast<size_t>(n * (r1 - r0)));
          Gemm(PackGemmInput(x.data(), n, x_stride, ref.packed), ref.packed, b, want.data(),
               r1 - r0, r0, r1);
          for (int threads : {1, 2}) {
            for (bool hw : {true, false}) {
              SetGemmX86Kernels(hw);
              const int saved = omp_get_max_threads();
              omp_set_num_threads(threads);
              std::vector<float> y(want.size(), -1.0f);
              GemmBfp(PackBfpGemmInput(x.data(), n, x_stride, m), m, b, y.data(), r1 - r0, r0, r1);
              omp_set_num_threads(saved);
              ASSERT_TRUE(SameBits(y, want))
                  << FirstDifference(y, want) << " cols " << cols << " rows " << rows << " n " << n
                  << " threads " << threads << (hw ? " " : " portable ") << GemmBfpKernelName(m);
            }
          }
          SetGemmX86Kernels(true);
        }
      }
    }
  }
}

// On AMX, calls of kBfpWidenOnceTokensAmx to kBfpAmxFusedMaxTokens tokens widen one k tile at a
// time into L1 for the TDPBF16PS (gemm_bfp_amx.h): every count of one and two token tiles and
// either side of both limits, K of one tile and of 35 (the two widened halves in turn), plain and
// wide panels, a row range, bias added under the caller's MXCSR with FTZ set or not, which is left
// as found: the reference's bits.
TEST_P(GemmBfpTest, AmxKTileWideningEveryTokenCount) {
  const BfpCase c = GetParam();
  if (c.precision != ActivationPrecision::kBF16 || !CpuHas(CpuKernels::kAmxBf16Gemm))
    GTEST_SKIP() << "AMX runs bf16 activations, where the CPU has it";
  const unsigned csr = _mm_getcsr();
  for (Values values : {Values::kUniform, Values::kWide}) {
    for (int64_t cols : {20, 1100}) {
      const int64_t rows = 75;
      const F32Source s = MakeF32Source(rows, cols, static_cast<uint64_t>(cols + 1), values);
      const Reference ref = MakeReference(c.format, s, c.precision);
      const BfpPanels m = BfpPanels::FromMatrix(c.format, s.ref, "w", c.precision);
      std::vector<float> bias = RandomX(1, rows, 23);
      bias[40] = 1e-39f;  // a subnormal bias: FTZ decides what y holds there
      for (int64_t n = 1; n <= kBfpAmxFusedMaxTokens + 2; ++n) {
        const std::vector<float> x = RandomX(n, cols, static_cast<uint64_t>(n * 3 + cols));
        for (const unsigned ftz : {0u, 0x8000u}) {
          _mm_setcsr(csr | ftz);
          std::vector<float> want(static_cast<size_t>(n * (rows - 2)));
          Gemm(PackGemmInput(x.data(), n, cols, ref.packed), ref.packed, bias.data(), want.data(),
               rows - 2, 1, rows - 1);
          std::vector<float> y(want.size(), -1.0f);
          GemmBfp(PackBfpGemmInput(x.data(), n, cols, m), m, bias.data(), y.data(), rows - 2, 1,
                  rows - 1);
          const unsigned after = _mm_getcsr();
          _mm_setcsr(csr);
          ASSERT_EQ(after & ~0x3fu, (csr | ftz) & ~0x3fu) << "n " << n;  // the modes, not the flags
          ASSERT_TRUE(SameBits(y, want)) << FirstDifference(y, want) << " cols " << cols << " n "
                                         << n << " ftz " << ftz << " " << GemmBfpKernelName(m);
        }
      }
    }
  }
}

// Decode (one token) on plain panels with exponents varying block by block, activations that
// include zeros, negative zeros and values so small that scaling them by a block's exponent leaves
// the normals (the one-token tile's fallback, k tile by k tile): the reference's bits.
TEST_P(GemmBfpTest, OneTokenScaledActivations) {
  const BfpCase c = GetParam();
  for (int64_t cols : {31, 64, 200}) {
    for (int64_t rows : {32, 100, 256}) {
      const F32Source s =
          MakeF32Source(rows, cols, static_cast<uint64_t>(rows * 5 + cols), Values::kPlain);
      const Reference ref = MakeReference(c.format, s, c.precision);
      const BfpPanels m = BfpPanels::FromMatrix(c.format, s.ref, "w", c.precision);
      for (int64_t p = 0; p < m.panels(); ++p) ASSERT_TRUE(m.PanelIsPlain(p));
      for (int variant = 0; variant < 4; ++variant) {
        std::vector<float> x = RandomX(1, cols, static_cast<uint64_t>(variant + 40));
        Rng rng(static_cast<uint64_t>(variant));
        for (int64_t k = 0; k < cols; ++k) {
          const double u = rng.Uniform();
          if (variant >= 1 && u < 0.1) x[k] = 0.0f;
          if (variant >= 1 && u > 0.9) x[k] = -0.0f;
          // variant 2: one k tile of tiny activations; 3: tiny ones anywhere.
          if ((variant == 2 && k >= 32 && k < 64) || (variant == 3 && u > 0.5 && u < 0.6))
            x[k] = static_cast<float>(std::ldexp(x[k], -100 - static_cast<int>(u * 20)));
        }
        std::vector<float> want(static_cast<size_t>(rows)), y(want.size());
        Gemm(x.data(), 1, ref.packed, nullptr, want.data());
        // Each target: the AVX2 one takes the row groups' one-token tile (AVX2 FMA) or, with the
        // x86 kernels off, the row-group tile itself.
        for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
          hwy::SetSupportedTargetsForTest(target);
          for (bool hw : {true, false}) {
            SetGemmX86Kernels(hw);
            GemmBfp(x.data(), 1, m, nullptr, y.data());
            ASSERT_TRUE(SameBits(y, want))
                << FirstDifference(y, want) << " cols " << cols << " rows " << rows << " variant "
                << variant << " " << hwy::TargetName(target) << (hw ? "" : " portable");
          }
        }
        hwy::SetSupportedTargetsForTest(0);
        SetGemmX86Kernels(true);
      }
    }
  }
}

// Every SIMD target this binary has and this CPU runs: the same bits.
TEST_P(GemmBfpTest, EverySimdTargetGivesTheSameBits) {
  const BfpCase c = GetParam();
  const int64_t rows = 70, cols = 67;
  const F32Source s = MakeF32Source(rows, cols, 8, Values::kWide);
  const Reference ref = MakeReference(c.format, s, c.precision);
  const BfpPanels m = BfpPanels::FromMatrix(c.format, s.ref, "w", c.precision);
  for (const int64_t n : {int64_t{1}, int64_t{3}, int64_t{14}, kBfpWidenOnceTokensAvx512 + 5}) {
    const std::vector<float> x = RandomX(n, cols, 9);
    std::vector<float> want(static_cast<size_t>(n * rows));
    Gemm(x.data(), n, ref.packed, nullptr, want.data());
    if (c.precision == ActivationPrecision::kBF16 && CpuHas(CpuKernels::kAvx512Gemm)) {
      EXPECT_NE(GemmBfpKernelName(m).find(", one token AVX-512F"), std::string::npos);
    }
    const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
    EXPECT_GE(targets.size(), 2u);
    for (const int64_t target : targets) {
      hwy::SetSupportedTargetsForTest(target);
      for (bool hw : {false, true}) {
        SetGemmX86Kernels(hw);
        std::vector<float> y(want.size());
        GemmBfp(x.data(), n, m, nullptr, y.data());
        EXPECT_TRUE(SameBits(y, want)) << FirstDifference(y, want) << " " << hwy::TargetName(target)
                                       << " n " << n << " hw " << hw;
      }
    }
    hwy::SetSupportedTargetsForTest(0);
    SetGemmX86Kernels(true);
  }
}

std::string BfpCaseName(const ::testing::TestParamInfo<BfpCase>& info) {
  return std::string(BfpFormatName(info.param.format)) +
         (info.param.precision == ActivationPrecision::kBF16 ? "_bf16act" : "_f32act");
}

INSTANTIATE_TEST_SUITE_P(AllKinds, GemmBfpTest,
                         ::testing::Values(BfpCase{kFormat8, ActivationPrecision::kBF16},
                                           BfpCase{kFormat4, ActivationPrecision::kBF16},
                                           BfpCase{kFormat8, ActivationPrecision::kF32},
                                           BfpCase{kFormat4, ActivationPrecision::kF32}),
                         BfpCaseName);

// A negative zero code (sign set, magnitude 0) from a file reads as +0, and an exponent of 255 is
// refused naming the tensor.
TEST(GemmBfp, TilesFromAFile) {
  for (BfpFormat f : {kFormat8, kFormat4}) {
    const BfpLayout layout{f, 32, 32};
    std::vector<uint8_t> tile(static_cast<size_t>(layout.bytes()), 0);
    for (int i = 0; i < 64; ++i) tile[i] = 127;
    // Every code: sign set, magnitude 0 except W[n = 0, k = 0] (face 0 row 0 code 0) = 1.
    for (size_t i = 64; i < tile.size(); ++i) tile[i] = f == kFormat8 ? 0x80 : 0x88;
    tile[64] = f == kFormat8 ? 0x01 : 0x81;  // bfp4: code 0 in the low nibble
    const BfpPanels m = BfpPanels::FromTiles(layout, tile.data(), "w", ActivationPrecision::kBF16);
    const float one = BfpDecode(f, 1, 127);
    EXPECT_EQ(m.At(0, 0), one);
    const float zero = m.At(1, 0);
    EXPECT_EQ(std::signbit(zero), false);
    EXPECT_EQ(zero, 0.0f);
    std::vector<float> x(32, 1.0f), y(32);
    GemmBfp(x.data(), 1, m, nullptr, y.data());
    EXPECT_EQ(y[0], one);
    EXPECT_EQ(std::signbit(y[1]), false);
    tile[5] = 255;
    try {
      BfpPanels::FromTiles(layout, tile.data(), "h.0.mlp", ActivationPrecision::kBF16);
      FAIL() << "accepted an exponent of 255";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("h.0.mlp"), std::string::npos) << e.what();
    }
  }
}

TEST(GemmBfp, NonFiniteWeightsAreRefusedNamingTheTensor) {
  std::vector<float> w(40 * 70, 0.5f);
  w[33 * 70 + 41] = std::nanf("");
  try {
    BfpPanels::FromMatrix(kFormat8, MatrixRef{DType::kF32, 40, 70, 70, w.data()}, "h.3.attn",
                          ActivationPrecision::kBF16);
    FAIL() << "accepted a NaN";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("h.3.attn: weight [33, 41]"), std::string::npos)
        << e.what();
  }
}

// WORMCHAT_SIMD=avx2 in a subprocess (the limit is read once per process): Highway's AVX2 target
// and no AVX-512 kernel, the same bits as the reference. The subprocess runs every test its filter
// names: a sanitized build's shard variables (tests/CMakeLists.txt) are not passed on to it.
constexpr const char* kWholeRun = "env -u GTEST_TOTAL_SHARDS -u GTEST_SHARD_INDEX ";
TEST(GemmBfp, SimdLimitAvx2) {
  if (std::getenv("WORMCHAT_SIMD") == nullptr) {
    const std::string cmd = kWholeRun + std::string("WORMCHAT_SIMD=avx2 /proc/") +
                            std::to_string(getpid()) +
                            "/exe --gtest_filter=GemmBfp.SimdLimitAvx2:*GemmBfpTest.EveryElement*:"
                            "*GemmBfpTest.WidenOnce*:*GemmBfpTest.OneTokenScaled* > /dev/null 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return;
  }
  ApplySimdLimit();
  const F32Source s = MakeF32Source(50, 100, 4, Values::kWide);
  for (BfpFormat f : {kFormat8, kFormat4}) {
    const Reference ref = MakeReference(f, s, ActivationPrecision::kBF16);
    const BfpPanels m = BfpPanels::FromMatrix(f, s.ref, "w", ActivationPrecision::kBF16);
    if (SimdLimitName() == "avx2") {
      EXPECT_EQ(GemmBfpKernelName(m), std::string(BfpFormatName(f)) +
                                          ": bf16 row groups (AVX2, one token AVX2 FMA); from " +
                                          std::to_string(kBfpWidenOnceTokensAvx2) +
                                          " tokens each panel widened once, bf16 pairs (AVX2)");
    }
    for (const int64_t n : {1, 3}) {
      const std::vector<float> x = RandomX(n, 100, 1);
      std::vector<float> want(static_cast<size_t>(n * 50)), y(want.size());
      Gemm(x.data(), n, ref.packed, nullptr, want.data());
      GemmBfp(x.data(), n, m, nullptr, y.data());
      EXPECT_TRUE(SameBits(y, want)) << FirstDifference(y, want) << " n " << n;
    }
  }
}

// Naming a portable kernel (GemmBfpKernelName, as `bench model` prints it) asks Highway for its
// targets, which must not undo WORMCHAT_SIMD=avx2: the dispatch stays on AVX2 afterwards.
TEST(GemmBfp, NamingAKernelKeepsTheSimdLimit) {
  if (std::getenv("WORMCHAT_SIMD") == nullptr) {
    const std::string cmd =
        kWholeRun + std::string("WORMCHAT_SIMD=avx2 /proc/") + std::to_string(getpid()) +
        "/exe --gtest_filter=GemmBfp.NamingAKernelKeepsTheSimdLimit > /dev/null 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return;
  }
  ApplySimdLimit();
  const F32Source s = MakeF32Source(50, 100, 4, Values::kWide);
  const BfpPanels m = BfpPanels::FromMatrix(kFormat8, s.ref, "w", ActivationPrecision::kBF16);
  const std::string before = SimdTargetName();
  GemmBfpKernelName(m);
  EXPECT_EQ(std::string(SimdTargetName()), before);
  if (SimdLimitName() == "avx2") {  // no AVX3, AVX3_ZEN4, AVX3_SPR (hwy's names)
    EXPECT_EQ(before.find("AVX3"), std::string::npos) << before;
  }
}

}  // namespace
}  // namespace wc
