// The one table of decode-attention kernels: which kernel runs for a KV format, a shape and a CPU.
// For each operation (Q.K^T, P.V) the first row whose format, CPU family, head_dim and group size
// fit the call is the kernel that runs (AttentionScores / AccumulateWeightedRows call the row's
// function), and its family and instructions are what AttentionKernelName prints: one decision,
// used both to run and to print. The rows, in order, are listed in kernels/README.md.
//
// Thresholds. Two decisions look alike but are not the same, so each has its own name:
//   kAvx512SharedBlockHeads: the AVX-512 kernels (fp8/bfp8 on BF16, int8 on VNNI) put 16 ROWS in
//     the lanes of a vector; from this many heads per group, widening (and transposing) a block of
//     rows once into a buffer that every head reads costs less than widening it in registers per
//     group of 4 heads. Measured on Zen 4 at head_dim 64.
//   kPortableHeadsInLanes: the portable int8 kernels put the HEADS in the lanes (8 int32 lanes on
//     AVX2, 16 on AVX-512); with fewer heads most lanes idle and the per-head kernels win.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/attention/decode_attention.h"
#include "kernels/attention/kv_rows.h"
#include "kernels/cpu_kernels.h"

namespace wc {

constexpr int kAvx512SharedBlockHeads = 5;
constexpr int kPortableHeadsInLanes = 8;

enum class AttentionOp : uint8_t { kScores, kWeighted };

constexpr uint32_t FormatBit(RowFormat f) {
  return 1u << static_cast<int>(f);
}
constexpr uint32_t kAnyFormat = ~0u;

struct AttentionKernelRow {
  AttentionOp op;
  uint32_t formats;            // FormatBit of every format it reads
  CpuKernels cpu;              // the instructions it needs; KernelsOn(cpu) must hold
  int64_t cols_multiple;       // head_dim % cols_multiple == 0
  int64_t max_cols;            // head_dim <= max_cols
  int min_heads;               // query heads per call (one KV group) >= min_heads
  const char* family;          // printed as "<family> (<CpuKernelsName(cpu)>)"
  const char* variant;         // how the row shares work between heads, for tests and logs
  ScoresKernelFn* scores;      // op == kScores
  WeightedKernelFn* weighted;  // op == kWeighted
};

// The first row of the table for `op` that takes rows like `m` with n_heads query heads on this
// CPU. There always is one: the last rows of each op take any format on any CPU.
const AttentionKernelRow& ChooseAttentionKernel(AttentionOp op, const RowsRef& m, int n_heads);

// "<family> (<instructions>)", e.g. "int8 dot (AVX-512 VNNI)", "f32 FMA (AVX2)".
std::string AttentionKernelRowName(const AttentionKernelRow& row);

// The whole table, for tests and README: rows [0, count).
const AttentionKernelRow* AttentionKernelTable(int* count);

}  // namespace wc
