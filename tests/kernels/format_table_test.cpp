// The format table (kernels/gemm/format_table.h): its rows agree with the formats' own code
// (bytes, blocks, names), a kernel is chosen for every call on every CPU the switches can make, the
// kernel chosen is one this CPU runs, and the GEMM runs what the table chooses.
#include "kernels/gemm/format_table.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/gemm/bfp/gemm_bfp.h"
#include "kernels/gemm/gemm.h"

namespace wc {
namespace {

std::vector<WeightFormat> AllFormats() {
  int n = 0;
  const WeightFormatRow* rows = FormatTable(&n);
  std::vector<WeightFormat> out;
  for (int i = 0; i < n; ++i) out.push_back(rows[i].format);
  return out;
}

TEST(FormatTable, OneRowAFormatInOrder) {
  int n = 0;
  const WeightFormatRow* rows = FormatTable(&n);
  ASSERT_EQ(n, static_cast<int>(WeightFormat::kQ6_K) + 1);
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(static_cast<int>(rows[i].format), i);
    EXPECT_EQ(&FormatRow(rows[i].format), &rows[i]);
    EXPECT_GT(rows[i].n_rules, 0);
  }
}

// packed_bits is what the packed matrix holds on a shape no padding touches; bits_per_weight
// GGML's block bytes for its types, and the packed bits for the others.
TEST(FormatTable, BitsPerWeightAreTheBytes) {
  for (const WeightFormat f : AllFormats()) {
    const int64_t rows = 256, cols = 512;
    const double packed =
        8.0 * static_cast<double>(WeightFormatBytes(f, rows, cols)) / (rows * cols);
    EXPECT_DOUBLE_EQ(FormatRow(f).packed_bits, packed) << WeightFormatName(f);
    const double stored =
        IsGgmlQuant(f) ? 8.0 * GgmlQuantBlockBytes(QuantOf(f)) / GgmlQuantBlockValues(QuantOf(f))
                       : packed;
    EXPECT_DOUBLE_EQ(FormatRow(f).bits_per_weight, stored) << WeightFormatName(f);
  }
}

TEST(FormatTable, BlocksAndTensorParallelCutsAreTheFormats) {
  for (const WeightFormat f : AllFormats()) {
    const WeightFormatRow& r = FormatRow(f);
    if (IsGgmlQuant(f)) {
      const int values = GgmlQuantBlockValues(QuantOf(f));
      EXPECT_EQ(r.block_values, values);
      EXPECT_EQ(r.scale_axis, ScaleAxis::kK);
      EXPECT_EQ(r.tp_cols, values);  // a block is `values` columns of one row
      EXPECT_EQ(r.tp_rows, 1);
      EXPECT_FALSE(r.convertible);
      EXPECT_FALSE(WeightFormatFromName(WeightFormatName(f)).has_value());
    } else if (IsBfp(f)) {
      EXPECT_EQ(r.scale_axis, ScaleAxis::kN);
      EXPECT_EQ(r.block_values, 16);  // a face row
      EXPECT_EQ(r.tp_rows, kBfpTileDim);
      EXPECT_EQ(r.tp_cols, kBfpTileDim);
      EXPECT_TRUE(r.convertible);
    } else {
      EXPECT_EQ(r.scale_axis, ScaleAxis::kNone);
      EXPECT_EQ(r.tp_rows, 1);
      EXPECT_EQ(r.tp_cols, 1);
      EXPECT_EQ(WeightFormatFromName(WeightFormatName(f)), f);
    }
  }
  EXPECT_TRUE(SliceKeepsBlocks(WeightFormat::kQ4_K, true, 256, 512, 1024));
  EXPECT_FALSE(SliceKeepsBlocks(WeightFormat::kQ4_K, true, 128, 512, 1024));
  EXPECT_TRUE(SliceKeepsBlocks(WeightFormat::kQ8_0, true, 32, 100, 100));  // ends at the edge
  EXPECT_FALSE(SliceKeepsBlocks(WeightFormat::kQ8_0, true, 32, 80, 100));
  EXPECT_TRUE(SliceKeepsBlocks(WeightFormat::kQ8_0, false, 3, 7, 100));  // rows: any
  EXPECT_FALSE(SliceKeepsBlocks(WeightFormat::kBfp8, false, 16, 64, 100));
  EXPECT_TRUE(SliceKeepsBlocks(WeightFormat::kF32, true, 3, 7, 100));
}

// A GGML type counts on the mesh as the narrowest Wormhole block float holding its bits.
TEST(FormatTable, MeshTilesHoldTheBits) {
  const auto bits = [](TileFormat t) { return t == TileFormat::kBFP4 ? 4.5 : 8.5; };
  for (const WeightFormat f : AllFormats()) {
    const WeightFormatRow& r = FormatRow(f);
    if (!IsGgmlQuant(f)) {
      EXPECT_EQ(r.mesh_tile, f == WeightFormat::kBfp8   ? TileFormat::kBFP8
                             : f == WeightFormat::kBfp4 ? TileFormat::kBFP4
                                                        : TileFormat::kBF16);
      continue;
    }
    ASSERT_NE(r.mesh_tile, TileFormat::kBF16) << WeightFormatName(f);
    EXPECT_GE(bits(r.mesh_tile), r.bits_per_weight) << WeightFormatName(f);
    if (r.mesh_tile == TileFormat::kBFP8) {
      EXPECT_GT(r.bits_per_weight, 4.5) << WeightFormatName(f);
    }
  }
}

// Every format, precision and call size gets a kernel whatever the CPU switches leave on, and the
// kernel is one whose instructions are on.
TEST(FormatTable, AKernelForEveryCallOnEveryCpu) {
  for (const bool x86 : {true, false}) {
    SetGemmX86Kernels(x86);
    SetKernelsEnabled(CpuKernels::kAvx2Int8, x86);
    for (const WeightFormat f : AllFormats())
      for (const ActivationPrecision p :
           {ActivationPrecision::kF32, ActivationPrecision::kBF16, ActivationPrecision::kInt8})
        for (const int64_t n : {0, 1, 2, 3, 4, 5, 15, 16, 31, 32, 33, 512, 100000}) {
          // int8 is a block-float matrix's mode; a BF16 matrix asked for it takes bf16
          // (PackedMatrix), so the bf16 row has no int8 rule.
          if (p == ActivationPrecision::kInt8 && f == WeightFormat::kBF16) continue;
          const GemmKernelRule& r = ChooseGemmKernel(f, p, n);
          EXPECT_TRUE(GemmCpuHolds(r.cpu));
          EXPECT_TRUE(KernelsOn(KernelInfo(r.kernel).cpu)) << GemmKernelLabel(r.kernel);
          EXPECT_GE(std::max<int64_t>(n, 1), r.min_tokens);
          EXPECT_LE(std::max<int64_t>(n, 1), r.max_tokens);
          if (!x86) {
            EXPECT_NE(KernelInfo(r.kernel).peak, GemmPeak::kAmxBf16);
          }
        }
  }
  SetGemmX86Kernels(true);
  SetKernelsEnabled(CpuKernels::kAvx2Int8, true);
  // Exactly one of the two target conditions holds.
  EXPECT_NE(GemmCpuHolds(GemmCpu::kWideTarget), GemmCpuHolds(GemmCpu::kNarrowTarget));
}

// The rows say what the formats' code runs: f32 activations never take a bf16-rounding kernel, a
// bfp matrix never a panel kernel, a GGML type always its integer kernel.
TEST(FormatTable, KernelsBelongToTheirFormats) {
  for (const WeightFormat f : AllFormats())
    for (const ActivationPrecision p :
         {ActivationPrecision::kF32, ActivationPrecision::kBF16, ActivationPrecision::kInt8})
      for (const int64_t n : {1, 4, 64}) {
        if (p == ActivationPrecision::kInt8 && f == WeightFormat::kBF16) continue;
        const GemmKernel k = ChooseGemmKernel(f, p, n).kernel;
        const bool quant = k == GemmKernel::kQuantInt8Avx2 || k == GemmKernel::kQuantInt8 ||
                           k == GemmKernel::kQuantInt8Avx2Expanded ||
                           k == GemmKernel::kQuantInt8Vnni;
        EXPECT_EQ(quant, IsGgmlQuant(f)) << WeightFormatName(f);
        const bool int8 = k == GemmKernel::kBfpInt8Vnni || k == GemmKernel::kBfpInt8Avx2 ||
                          k == GemmKernel::kBfpInt8;
        const bool bfp = (k >= GemmKernel::kBfpF32Tiles && k <= GemmKernel::kBfpAmxWidened) || int8;
        EXPECT_EQ(bfp, IsBfp(f)) << WeightFormatName(f);
        // A bfp matrix takes the integer products exactly when asked for int8.
        if (IsBfp(f)) {
          EXPECT_EQ(int8, p == ActivationPrecision::kInt8) << WeightFormatName(f);
        }
        if (p == ActivationPrecision::kF32 && !quant) {
          EXPECT_EQ(KernelInfo(k).peak, GemmPeak::kF32Fma) << WeightFormatName(f);
        }
      }
  EXPECT_EQ(ChooseGemmKernel(WeightFormat::kF16, ActivationPrecision::kF32, 7).kernel,
            GemmKernel::kF16Fma);
}

// The names print the table's choice at each change of call size, and the block-float threshold
// the tests straddle is the table's.
TEST(FormatTable, NamesAndThresholdsAreTheTables) {
  const std::string bfp8 = GemmKernelsByTokens(WeightFormat::kBfp8, ActivationPrecision::kBF16);
  const GemmKernel one =
      ChooseGemmKernel(WeightFormat::kBfp8, ActivationPrecision::kBF16, 1).kernel;
  EXPECT_EQ(bfp8.rfind(GemmKernelLabel(one), 0), 0u) << bfp8;
  const auto widened = [](GemmKernel k) {
    return k == GemmKernel::kBfpWidened || k == GemmKernel::kBfpAmxFused ||
           k == GemmKernel::kBfpAmxWidened || k == GemmKernel::kBfpF32Widened ||
           k == GemmKernel::kBfpDotWidened;
  };
  const int64_t t = FirstTokensRunning(WeightFormat::kBfp8, ActivationPrecision::kBF16, widened);
  ASSERT_GT(t, 1);
  EXPECT_NE(bfp8.find("; from " + std::to_string(t) + " tokens "), std::string::npos) << bfp8;
  EXPECT_TRUE(widened(ChooseGemmKernel(WeightFormat::kBfp8, ActivationPrecision::kBF16, t).kernel));
  EXPECT_FALSE(
      widened(ChooseGemmKernel(WeightFormat::kBfp8, ActivationPrecision::kBF16, t - 1).kernel));
  EXPECT_EQ(FirstTokensRunning(WeightFormat::kF32, ActivationPrecision::kF32, widened), -1);
  const std::string q = GemmKernelsByTokens(WeightFormat::kQ4_K, ActivationPrecision::kF32);
  EXPECT_EQ(q.rfind("int8 blocks (", 0), 0u) << q;
  if (KernelsOn(CpuKernels::kAvx512Vnni)) {  // two tokens take 16 rows a register
    EXPECT_NE(q.find("; from 2 tokens int8 blocks, 16 rows a register"), std::string::npos) << q;
  } else if (KernelsOn(CpuKernels::kAvx2Int8)) {  // many tokens expand each block once
    EXPECT_NE(q.find("; from 8 tokens int8 blocks, each expanded once for every token"),
              std::string::npos)
        << q;
  }
}

}  // namespace
}  // namespace wc
