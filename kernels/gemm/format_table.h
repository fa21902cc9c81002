// The one table of weight formats. Each row is a format (weight_format.h's WeightFormat): its bits
// per weight, the block of values that shares a scale and the axis it runs along, how PackedMatrix
// holds it, which GEMM kernel runs its products for a call of n tokens on each CPU family, how a
// tensor-parallel split may cut it, and the Wormhole tile format the mesh estimate counts its
// bytes as. Every decision about a format is read from here: gemm.cpp and gemm_bfp.cpp run the
// kernel ChooseGemmKernel names (and its name is printed from the same row), the weights' loader
// checks a split against tp_rows / tp_cols, meshmodel counts mesh_tile's bytes, and `bench model`
// bounds a call by the peak of the instructions its kernel uses. A new format is a row here and its
// kernels; the rows are listed in kernels/gemm/README.md.
//
// Choosing a kernel. A row's rules are tried in order; the first whose activation precision, CPU
// condition and token range fit the call runs it. Every row ends with a rule any CPU takes, so
// there always is one. Whatever rule runs, the bits are the same (the formats' contracts: gemm.h,
// weight_format.h, quant_gemm.h); the rules only choose speed. Where a threshold was measured, its
// constant's comment (gemm_bfp.h, gemm_bfp_amx.h, below) says on which machine.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/cpu_kernels.h"
#include "kernels/gemm/weight_format.h"

namespace wc {

// The kernels the GEMM runs. The first group read f32 / f16 / bf16 panels (gemm.cpp), the second
// a bfp matrix's tiles (gemm_bfp.cpp), the last GGML's blocks (quant_gemm.cpp).
enum class GemmKernel : uint8_t {
  kF32Fma,         // f32 panels, f32 FMA tiles (Highway)
  kF16Fma,         // f16 panels widened in registers, f32 FMA tiles (Highway)
  kBf16F32Act,     // bf16 panels, f32 activations: the pairs tiles without rounding x
  kBf16Pairs,      // bf16 panels, bf16 activations: FMA tiles in TDPBF16PS's order (Highway)
  kBf16Amx,        // bf16 panels, bf16 activations: AMX tiles (gemm_amx.h)
  kBf16Dot,        // bf16 panels, bf16 activations: vdpbf16ps tiles in AMX's order
                   // (gemm_bf16_dot.h)
  kBfpF32Tiles,    // bfp tiles widened to f32 in registers per token tile, f32 FMA
  kBfpF32Widened,  // bfp panels widened once to f32 panels, then kF32Fma's tiles
  kBfpPanelTiles,  // bfp tiles widened to bf16 pairs in registers per token tile (AVX-512 targets;
                   // the one-token tile on AVX-512F where the CPU has it)
  kBfpRowGroups,   // bfp tiles widened once per row group of tokens (16-register targets,
                   // gemm_bfp_row_groups.h)
  kBfpWidened,     // bfp panels widened once (L2 chunks), then kBf16Pairs' tiles
  kBfpDotWidened,  // bfp panels widened once to bf16 panels, then kBf16Dot's tiles
  kBfpAmxFused,    // AMX, each k tile widened into L1 before its TDPBF16PS (gemm_bfp_amx.h)
  kBfpAmxWidened,  // AMX, each panel widened once
  kQuantInt8Avx2,  // GGML blocks x int8 activations, vpmaddubsw / vpmaddwd (quant_gemm_avx2.cpp)
  kQuantInt8Avx2Expanded,  // the same, each block expanded to 8-bit codes once for many tokens
                           // (quant_gemm_avx2_expanded.cpp)
  kQuantInt8Vnni,  // the same integer sums, vpdpbusd on 16 rows (two groups) a register, each
                   // block pair expanded once for many tokens (quant_gemm_vnni.cpp)
  kQuantInt8,      // the same integer sums, portable C++ (quant_gemm.cpp)
  kBfpInt8Vnni,    // bfp tiles in bfp_int8.h's layout x int8 activations, vpdpbusd on a half tile
                   // (16 rows) a register, each half tile expanded once per chunk of tokens
                   // (quant_gemm_vnni.cpp)
  kBfpInt8Avx2,    // the same integer sums, vpmaddubsw on a quarter tile (8 rows) a register
                   // (bfp_int8_avx2.cpp)
  kBfpInt8,        // the same integer sums, portable C++ (bfp_int8.cpp)
  kBf16Int16Avx2,  // BF16 panels as int16 codes x 12-bit activations, vpmaddwd on 8 rows' pairs a
                   // register (bf16_int16_avx2.cpp)
  kBf16Int16,      // the same integer sums, portable C++ (bf16_int16.cpp)
};

// The instructions that bound a kernel's rate (kernels/peak.h measures each).
enum class GemmPeak : uint8_t { kF32Fma, kBf16Dot, kInt8Dot, kInt8Vnni, kAmxBf16, kInt16Dot };

// What a kernel is: its name in printed kernel names, the CPU family it needs (kPortable: Highway's
// dispatched target), and its peak.
struct GemmKernelInfo {
  GemmKernel kernel;
  const char* family;  // printed as "<family> (<instructions>)"
  CpuKernels cpu;
  GemmPeak peak;
};
const GemmKernelInfo& KernelInfo(GemmKernel k);

// The CPU condition of a rule.
enum class GemmCpu : uint8_t {
  kAny,           // every CPU (the portable kernels)
  kAmxBf16,       // KernelsOn(kAmxBf16Gemm): AMX tiles granted to this process
  kWideTarget,    // Highway's dispatched target (under WORMCHAT_SIMD) has 32 vector registers
                  // (AVX-512 targets)
  kNarrowTarget,  // the others: AVX2, SSE4, the emulated targets (16 registers or fewer)
  kAvx2Int8,      // KernelsOn(kAvx2Int8)
  kAvx512Vnni,    // KernelsOn(kAvx512Vnni)
  kAvx512Bf16,    // KernelsOn(kAvx512Bf16Vbmi): vdpbf16ps
};
bool GemmCpuHolds(GemmCpu c);

// Which activation precision a rule takes (weight_format.h's ActivationPrecision; kInt8 takes
// kInt8 and kInt7, both integer codes).
enum class ActivationMatch : uint8_t { kAny, kF32, kBF16, kInt8, kInt16 };

struct GemmKernelRule {
  ActivationMatch precision;
  GemmCpu cpu;
  int64_t min_tokens, max_tokens;  // the call's tokens in [min_tokens, max_tokens]
  GemmKernel kernel;
};

// The axis a block's shared scale (or exponent) runs along: none (each weight its own float), K (a
// row's consecutive inputs: GGML's blocks) or N (consecutive outputs at one input: tt-metal's
// block floats, whose face rows run along N in its [K, N] layout).
enum class ScaleAxis : uint8_t { kNone, kK, kN };

// The Wormhole tile format a matrix is counted as on the mesh (meshmodel/): its own for bfp8 /
// bfp4, bf16 for the float formats (Wormhole multiplies no f32 weights), and for a GGML type the
// block float with at least its bits per weight (Q4_0 and Q4_K, 4.5 bits, as BFP4_B at 4.5; the
// others, 5 to 8.5 bits, as BFP8_B at 8.5; tt-metal runs no GGML type).
enum class TileFormat : uint8_t { kBF16, kBFP8, kBFP4 };

struct WeightFormatRow {
  WeightFormat format;
  double bits_per_weight;  // bits a weight as its file stores it, scales included
  double packed_bits;      // as PackedMatrix holds it (Q4_K / Q5_K: their 6-bit scales as bytes)
  int block_values;        // values sharing one scale (1: none)
  ScaleAxis scale_axis;
  const char* packing;  // how PackedMatrix holds it (for README and `info`)
  const GemmKernelRule* rules;
  int n_rules;
  // A tensor-parallel slice of the [rows = N, cols = K] matrix starts and ends on multiples of
  // these (or at the matrix's edge): bfp tiles are 32 x 32; a GGML block holds block_values
  // columns of one row.
  int64_t tp_rows, tp_cols;
  TileFormat mesh_tile;
  bool convertible;  // --weights may convert a float matrix to it (else only as a file stores it)
};

// The row of f (there is one for every WeightFormat).
const WeightFormatRow& FormatRow(WeightFormat f);

// The whole table, rows [0, count), in WeightFormat's order.
const WeightFormatRow* FormatTable(int* count);

// The rule that runs a call of n_tokens (>= 1; 0 is taken as 1) of a matrix in format f with
// activations entering at `precision`, on this CPU under WORMCHAT_SIMD and the tests' switches.
const GemmKernelRule& ChooseGemmKernel(WeightFormat f, ActivationPrecision precision,
                                       int64_t n_tokens);

// "<family> (<instructions>)" of a kernel on this CPU, e.g. "bf16 pairs (AVX2)", "int8 blocks
// (AVX2 vpmaddubsw)".
std::string GemmKernelLabel(GemmKernel k);

// What runs a matrix of format f at `precision` for calls of any size on this CPU: the kernel of
// one token, then "; from N tokens <label>" at each change, e.g. "bfp8: bf16 row groups (AVX2);
// from 32 tokens bfp widened once, bf16 pairs (AVX2)".
std::string GemmKernelsByTokens(WeightFormat f, ActivationPrecision precision);

// The fewest tokens from which a call of f at `precision` runs `kernel`'s rule or a later one in
// the row's order that is taken; -1 if no call does. (For tests and benches: e.g. where a bfp
// matrix starts widening each panel once.)
int64_t FirstTokensRunning(WeightFormat f, ActivationPrecision precision, bool (*pred)(GemmKernel));

// Where a tensor-parallel slice [begin, end) of an extent along rows (N) or columns (K) cuts f's
// blocks: true when both ends fall on the row's multiples (or end == extent).
bool SliceKeepsBlocks(WeightFormat f, bool along_cols, int64_t begin, int64_t end, int64_t extent);

}  // namespace wc
