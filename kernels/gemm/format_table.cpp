#include "kernels/gemm/format_table.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <vector>

#include "kernels/gemm/bfp/gemm_bfp.h"
#include "kernels/gemm/bfp/gemm_bfp_amx.h"
#include "kernels/gemm/bfp/gemm_bfp_row_groups.h"
#include "util/error.h"

namespace wc {

// Named, not anonymous: unity builds put other files' file-local names beside these.
namespace format_rows {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// BF16 panels with bf16 activations run on AMX from this many tokens where the CPU has it: below,
// the FMA pairs tiles read the weights as fast (decode is bound by the read).
constexpr int64_t kAmxMinTokens = 4;
// Without AMX, BF16 panels run on vdpbf16ps from this many tokens where the CPU has AVX-512 BF16:
// below, a tile holds too few chains to cover vdpbf16ps's latency and the FMA pairs tiles, read-
// bound at 1-2 tokens, run as fast or faster (docs/performance.md, "The BF16 GEMM on vdpbf16ps").
constexpr int64_t kBf16DotMinTokens = 6;

constexpr GemmKernelInfo kKernels[] = {
    {GemmKernel::kF32Fma, "f32 FMA", CpuKernels::kPortable, GemmPeak::kF32Fma},
    {GemmKernel::kF16Fma, "f16 weights, f32 FMA", CpuKernels::kPortable, GemmPeak::kF32Fma},
    {GemmKernel::kBf16F32Act, "bf16 weights, f32 activations", CpuKernels::kPortable,
     GemmPeak::kF32Fma},
    {GemmKernel::kBf16Pairs, "bf16 pairs", CpuKernels::kPortable, GemmPeak::kF32Fma},
    {GemmKernel::kBf16Amx, "bf16 tiles", CpuKernels::kAmxBf16Gemm, GemmPeak::kAmxBf16},
    {GemmKernel::kBf16Dot, "bf16 dot products in AMX's order", CpuKernels::kAvx512Bf16Vbmi,
     GemmPeak::kBf16Dot},
    {GemmKernel::kBfpF32Tiles, "codes widened in registers, f32 FMA", CpuKernels::kPortable,
     GemmPeak::kF32Fma},
    {GemmKernel::kBfpF32Widened, "each panel widened once, f32 FMA", CpuKernels::kPortable,
     GemmPeak::kF32Fma},
    {GemmKernel::kBfpPanelTiles, "codes widened in registers, bf16 pairs", CpuKernels::kPortable,
     GemmPeak::kF32Fma},
    {GemmKernel::kBfpRowGroups, "bf16 row groups", CpuKernels::kPortable, GemmPeak::kF32Fma},
    {GemmKernel::kBfpWidened, "each panel widened once, bf16 pairs", CpuKernels::kPortable,
     GemmPeak::kF32Fma},
    {GemmKernel::kBfpDotWidened, "each panel widened once, bf16 dot products in AMX's order",
     CpuKernels::kAvx512Bf16Vbmi, GemmPeak::kBf16Dot},
    {GemmKernel::kBfpAmxFused, "bf16 tiles, a k tile widened at a time", CpuKernels::kAmxBf16Gemm,
     GemmPeak::kAmxBf16},
    {GemmKernel::kBfpAmxWidened, "bf16 tiles, each panel widened once", CpuKernels::kAmxBf16Gemm,
     GemmPeak::kAmxBf16},
    {GemmKernel::kQuantInt8Avx2, "int8 blocks", CpuKernels::kAvx2Int8, GemmPeak::kInt8Dot},
    {GemmKernel::kQuantInt8Avx2Expanded, "int8 blocks, each expanded once for every token",
     CpuKernels::kAvx2Int8, GemmPeak::kInt8Dot},
    {GemmKernel::kQuantInt8Vnni, "int8 blocks, 16 rows a register, expanded once for every token",
     CpuKernels::kAvx512Vnni, GemmPeak::kInt8Vnni},
    {GemmKernel::kQuantInt8, "int8 blocks", CpuKernels::kPortable, GemmPeak::kInt8Dot},
    {GemmKernel::kBfpInt8Vnni, "int8 products, 16 rows a register, each tile expanded once",
     CpuKernels::kAvx512Vnni, GemmPeak::kInt8Vnni},
    {GemmKernel::kBfpInt8Avx2,
     "int8 products, bfp4 in 16-bit words (1-6 tokens) or tiles expanded once, bfp8 read in place "
     "(int7: x + 64, no sign step)",
     CpuKernels::kAvx2Int8, GemmPeak::kInt8Dot},
    {GemmKernel::kBfpInt8, "int8 products", CpuKernels::kPortable, GemmPeak::kInt8Dot},
    {GemmKernel::kBf16Int16Avx2, "int16 products", CpuKernels::kAvx2Int8, GemmPeak::kInt16Dot},
    {GemmKernel::kBf16Int16, "int16 products", CpuKernels::kPortable, GemmPeak::kInt16Dot},
};

using A = ActivationMatch;
using C = GemmCpu;
using K = GemmKernel;

constexpr GemmKernelRule kF32Rules[] = {{A::kAny, C::kAny, 1, kMax, K::kF32Fma}};
constexpr GemmKernelRule kF16Rules[] = {{A::kAny, C::kAny, 1, kMax, K::kF16Fma}};
constexpr GemmKernelRule kBf16Rules[] = {
    {A::kBF16, C::kAmxBf16, kAmxMinTokens, kMax, K::kBf16Amx},
    {A::kBF16, C::kAvx512Bf16, kBf16DotMinTokens, kMax, K::kBf16Dot},
    {A::kBF16, C::kAny, 1, kMax, K::kBf16Pairs},
    {A::kF32, C::kAny, 1, kMax, K::kBf16F32Act},
    {A::kInt16, C::kAvx2Int8, 1, kMax, K::kBf16Int16Avx2},
    {A::kInt16, C::kAny, 1, kMax, K::kBf16Int16},
};
// Thresholds: gemm_bfp.h's kBfpWidenOnceTokens* and gemm_bfp_amx.h's kBfpAmxFusedMaxTokens, each
// with its measurement.
constexpr GemmKernelRule kBfpRules[] = {
    {A::kInt8, C::kAvx512Vnni, 1, kMax, K::kBfpInt8Vnni},
    {A::kInt8, C::kAvx2Int8, 1, kMax, K::kBfpInt8Avx2},
    {A::kInt8, C::kAny, 1, kMax, K::kBfpInt8},
    {A::kBF16, C::kAmxBf16, kBfpWidenOnceTokensAmx, kBfpAmxFusedMaxTokens, K::kBfpAmxFused},
    {A::kBF16, C::kAmxBf16, kBfpAmxFusedMaxTokens + 1, kMax, K::kBfpAmxWidened},
    {A::kBF16, C::kAvx512Bf16, kBfpDotWidenOnceTokens, kMax, K::kBfpDotWidened},
    {A::kBF16, C::kWideTarget, 1, kBfpWidenOnceTokensAvx512 - 1, K::kBfpPanelTiles},
    {A::kBF16, C::kNarrowTarget, 1, kBfpWidenOnceTokensAvx2 - 1, K::kBfpRowGroups},
    {A::kBF16, C::kAny, 1, kMax, K::kBfpWidened},
    {A::kF32, C::kWideTarget, 1, kBfpWidenOnceTokensAvx512 - 1, K::kBfpF32Tiles},
    {A::kF32, C::kNarrowTarget, 1, kBfpWidenOnceTokensAvx2F32 - 1, K::kBfpF32Tiles},
    {A::kF32, C::kAny, 1, kMax, K::kBfpF32Widened},
};
// From this many tokens a call expands each group block once for a chunk of tokens instead of
// unpacking it in registers once per tile of 4 (2 for the K types). Q8_0 has nothing to unpack
// (its codes are bytes): expanding it measured no faster, so it keeps the register tiles.
constexpr int64_t kQuantExpandMinTokens = 8;
// With AVX-512 VNNI every type runs the VNNI kernel from 2 tokens, faster than the AVX2 kernels at
// every larger count; one token stays on the AVX2 register tiles, which prefetch the stream decode
// reads (docs/performance.md, "The quantized GEMM on VNNI").
constexpr int64_t kQuantVnniMinTokens = 2;
constexpr GemmKernelRule kGgmlRules[] = {
    {A::kAny, C::kAvx512Vnni, kQuantVnniMinTokens, kMax, K::kQuantInt8Vnni},
    {A::kAny, C::kAvx2Int8, 1, kQuantExpandMinTokens - 1, K::kQuantInt8Avx2},
    {A::kAny, C::kAvx2Int8, kQuantExpandMinTokens, kMax, K::kQuantInt8Avx2Expanded},
    {A::kAny, C::kAny, 1, kMax, K::kQuantInt8},
};
constexpr GemmKernelRule kQ8_0Rules[] = {
    {A::kAny, C::kAvx512Vnni, kQuantVnniMinTokens, kMax, K::kQuantInt8Vnni},
    {A::kAny, C::kAvx2Int8, 1, kMax, K::kQuantInt8Avx2},
    {A::kAny, C::kAny, 1, kMax, K::kQuantInt8},
};

template <size_t N>
constexpr int Count(const GemmKernelRule (&)[N]) {
  return static_cast<int>(N);
}

constexpr const char* kPanels = "panels of 32 rows, k-major";
constexpr const char* kPairs = "panels of 32 rows, (k, k+1) pairs side by side, K padded to 32";
constexpr const char* kTiles = "tt-metal's 32x32 tiles as its packer writes them";
constexpr const char* kGroups = "groups of 8 rows, each block's bits interleaved by row";

#define WC_RULES(r) r, Count(r)
// format, bits a weight (file, packed), values a scale, its axis, packing, rules, TP rows / cols,
// mesh, --weights
constexpr WeightFormatRow kRows[] = {
    {WeightFormat::kF32, 32, 32, 1, ScaleAxis::kNone, kPanels, WC_RULES(kF32Rules), 1, 1,
     TileFormat::kBF16, true},
    {WeightFormat::kF16, 16, 16, 1, ScaleAxis::kNone, kPanels, WC_RULES(kF16Rules), 1, 1,
     TileFormat::kBF16, true},
    {WeightFormat::kBF16, 16, 16, 1, ScaleAxis::kNone, kPairs, WC_RULES(kBf16Rules), 1, 1,
     TileFormat::kBF16, true},
    {WeightFormat::kBfp8, 8.5, 8.5, 16, ScaleAxis::kN, kTiles, WC_RULES(kBfpRules), kBfpTileDim,
     kBfpTileDim, TileFormat::kBFP8, true},
    {WeightFormat::kBfp4, 4.5, 4.5, 16, ScaleAxis::kN, kTiles, WC_RULES(kBfpRules), kBfpTileDim,
     kBfpTileDim, TileFormat::kBFP4, true},
    {WeightFormat::kQ8_0, 8.5, 8.5, 32, ScaleAxis::kK, kGroups, WC_RULES(kQ8_0Rules), 1, 32,
     TileFormat::kBFP8, false},
    {WeightFormat::kQ4_0, 4.5, 4.5, 32, ScaleAxis::kK, kGroups, WC_RULES(kGgmlRules), 1, 32,
     TileFormat::kBFP4, false},
    {WeightFormat::kQ4_1, 5, 5, 32, ScaleAxis::kK, kGroups, WC_RULES(kGgmlRules), 1, 32,
     TileFormat::kBFP8, false},
    {WeightFormat::kQ5_0, 5.5, 5.5, 32, ScaleAxis::kK, kGroups, WC_RULES(kGgmlRules), 1, 32,
     TileFormat::kBFP8, false},
    {WeightFormat::kQ5_1, 6, 6, 32, ScaleAxis::kK, kGroups, WC_RULES(kGgmlRules), 1, 32,
     TileFormat::kBFP8, false},
    {WeightFormat::kQ4_K, 4.5, 4.625, 256, ScaleAxis::kK, kGroups, WC_RULES(kGgmlRules), 1, 256,
     TileFormat::kBFP4, false},
    {WeightFormat::kQ5_K, 5.5, 5.625, 256, ScaleAxis::kK, kGroups, WC_RULES(kGgmlRules), 1, 256,
     TileFormat::kBFP8, false},
    {WeightFormat::kQ6_K, 6.5625, 6.5625, 256, ScaleAxis::kK, kGroups, WC_RULES(kGgmlRules), 1, 256,
     TileFormat::kBFP8, false},
};
#undef WC_RULES

constexpr bool RowsInOrder() {
  for (size_t i = 0; i < std::size(kRows); ++i)
    if (static_cast<size_t>(kRows[i].format) != i) return false;
  for (size_t i = 0; i < std::size(kKernels); ++i)
    if (static_cast<size_t>(kKernels[i].kernel) != i) return false;
  return std::size(kRows) == static_cast<size_t>(WeightFormat::kQ6_K) + 1;
}
static_assert(RowsInOrder(), "one row a format and a kernel, in their enums' order");

bool PrecisionFits(ActivationMatch m, ActivationPrecision p) {
  switch (m) {
    case ActivationMatch::kAny:
      return true;
    case ActivationMatch::kF32:
      return p == ActivationPrecision::kF32;
    case ActivationMatch::kBF16:
      return p == ActivationPrecision::kBF16;
    case ActivationMatch::kInt8:
      return IsInt8Codes(p);
    case ActivationMatch::kInt16:
      return p == ActivationPrecision::kInt16;
  }
  return false;
}

}  // namespace format_rows

const GemmKernelInfo& KernelInfo(GemmKernel k) {
  return format_rows::kKernels[static_cast<int>(k)];
}

bool GemmCpuHolds(GemmCpu c) {
  switch (c) {
    case GemmCpu::kAny:
      return true;
    case GemmCpu::kAmxBf16:
      return KernelsOn(CpuKernels::kAmxBf16Gemm);
    case GemmCpu::kWideTarget:
      return !BfpRowGroupsOn();
    case GemmCpu::kNarrowTarget:
      return BfpRowGroupsOn();
    case GemmCpu::kAvx2Int8:
      return KernelsOn(CpuKernels::kAvx2Int8);
    case GemmCpu::kAvx512Vnni:
      return KernelsOn(CpuKernels::kAvx512Vnni);
    case GemmCpu::kAvx512Bf16:
      return KernelsOn(CpuKernels::kAvx512Bf16Vbmi);
  }
  return false;
}

const WeightFormatRow& FormatRow(WeightFormat f) {
  return format_rows::kRows[static_cast<int>(f)];
}

const WeightFormatRow* FormatTable(int* count) {
  *count = static_cast<int>(std::size(format_rows::kRows));
  return format_rows::kRows;
}

const GemmKernelRule& ChooseGemmKernel(WeightFormat f, ActivationPrecision precision,
                                       int64_t n_tokens) {
  const WeightFormatRow& row = FormatRow(f);
  const int64_t n = n_tokens < 1 ? 1 : n_tokens;
  for (int i = 0; i < row.n_rules; ++i) {
    const GemmKernelRule& r = row.rules[i];
    if (format_rows::PrecisionFits(r.precision, precision) && n >= r.min_tokens &&
        n <= r.max_tokens && GemmCpuHolds(r.cpu))
      return r;
  }
  WC_CHECK(false, "no GEMM kernel rule for ", WeightFormatName(f));
  return row.rules[0];
}

std::string GemmKernelLabel(GemmKernel k) {
  const GemmKernelInfo& info = KernelInfo(k);
  std::string instructions = CpuKernelsName(info.cpu);
  if (k == GemmKernel::kQuantInt8Avx2 || k == GemmKernel::kQuantInt8Avx2Expanded ||
      k == GemmKernel::kBfpInt8Avx2)
    instructions = "AVX2 vpmaddubsw";
  if (k == GemmKernel::kQuantInt8Vnni || k == GemmKernel::kBfpInt8Vnni)
    instructions = "AVX-512 vpdpbusd";
  if (k == GemmKernel::kBf16Int16Avx2) instructions = "AVX2 vpmaddwd";
  if (k == GemmKernel::kQuantInt8 || k == GemmKernel::kBfpInt8 || k == GemmKernel::kBf16Int16)
    instructions = "portable C++";
  if (k == GemmKernel::kBfpPanelTiles && KernelsOn(CpuKernels::kAvx512Gemm))
    instructions += ", one token AVX-512F";
  if (k == GemmKernel::kBfpRowGroups && KernelsOn(CpuKernels::kAvx2Gemm) && instructions == "AVX2")
    instructions += ", one token AVX2 FMA";
  return std::string(info.family) + " (" + instructions + ")";
}

namespace {

// The token counts where a row's choice may change: 1 and each rule's ends, in increasing order.
std::vector<int64_t> FormatRowBoundaries(const WeightFormatRow& row) {
  std::vector<int64_t> b = {1};
  for (int i = 0; i < row.n_rules; ++i) {
    b.push_back(row.rules[i].min_tokens);
    if (row.rules[i].max_tokens < format_rows::kMax) b.push_back(row.rules[i].max_tokens + 1);
  }
  std::sort(b.begin(), b.end());
  b.erase(std::unique(b.begin(), b.end()), b.end());
  return b;
}

}  // namespace

std::string GemmKernelsByTokens(WeightFormat f, ActivationPrecision precision) {
  std::string s;
  const GemmKernelRule* last = nullptr;
  for (const int64_t n : FormatRowBoundaries(FormatRow(f))) {
    const GemmKernelRule& r = ChooseGemmKernel(f, precision, n);
    if (last != nullptr && r.kernel == last->kernel) continue;
    s += last == nullptr ? GemmKernelLabel(r.kernel)
                         : "; from " + std::to_string(n) + " tokens " + GemmKernelLabel(r.kernel);
    last = &r;
  }
  return s;
}

int64_t FirstTokensRunning(WeightFormat f, ActivationPrecision precision,
                           bool (*pred)(GemmKernel)) {
  for (const int64_t n : FormatRowBoundaries(FormatRow(f)))
    if (pred(ChooseGemmKernel(f, precision, n).kernel)) return n;
  return -1;
}

bool SliceKeepsBlocks(WeightFormat f, bool along_cols, int64_t begin, int64_t end, int64_t extent) {
  const WeightFormatRow& row = FormatRow(f);
  const int64_t m = along_cols ? row.tp_cols : row.tp_rows;
  return begin == end || (begin % m == 0 && (end % m == 0 || end == extent));
}

}  // namespace wc
