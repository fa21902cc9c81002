#include "kernels/attention/kernel_table.h"

#include <iterator>

#include "kernels/attention/decode_attention.h"
#include "kernels/attention/decode_attention_bf16dot.h"
#include "kernels/attention/decode_attention_f32.h"
#include "kernels/attention/int8.h"
#include "util/error.h"

namespace wc {
namespace {

using Op = AttentionOp;
using Cpu = CpuKernels;
constexpr int64_t kAnyCols = INT64_MAX;
constexpr uint32_t kInt8 = FormatBit(RowFormat::kInt8);
constexpr uint32_t kFp8AndBfp8 =
    FormatBit(RowFormat::kFP8E4M3) | FormatBit(RowFormat::kFP8E5M2) | FormatBit(RowFormat::kBFP8);
constexpr int kSharedHeads = kAvx512SharedBlockHeads;
constexpr int kInLanes = kPortableHeadsInLanes;

// Formats are disjoint between the families, so order matters only within one: the faster
// (narrower) row first. Block-float weights (issue 30) get a table of their own beside gemm.cpp's.
// clang-format off
constexpr AttentionKernelRow kTable[] = {
  // op           formats      cpu                 cols%  max cols          heads
  {Op::kScores,   kFp8AndBfp8, Cpu::kAvx512Bf16Vbmi, 64, kAnyCols,         kSharedHeads,
   "bf16 dot", "rows in lanes", Bf16DotScoresRowsInLanes, nullptr},
  {Op::kScores,   kFp8AndBfp8, Cpu::kAvx512Bf16Vbmi, 64, kAnyCols,         1,
   "bf16 dot", "groups of 4 heads", Bf16DotScoresGroups, nullptr},
  {Op::kScores,   kInt8,       Cpu::kAvx512Vnni,     64, kInt8QueryMaxCols, 1,
   "int8 dot", "rows in lanes", Int8ScoresVnni, nullptr},
  {Op::kScores,   kInt8,       Cpu::kPortable,        1, kInt8QueryMaxCols, kInLanes,
   "int8 dot", "heads in lanes", Int8ScoresHeadsInLanes, nullptr},
  {Op::kScores,   kInt8,       Cpu::kPortable,        1, kInt8QueryMaxCols, 1,
   "int8 dot", "groups of 4 heads, f32 FMA on the int8 query", Int8ScoresPerHead, nullptr},
  {Op::kScores,   kAnyFormat,  Cpu::kPortable,        1, kAnyCols,         1,
   "f32 FMA", "groups of 4 heads", F32FmaScores, nullptr},

  {Op::kWeighted, kFp8AndBfp8, Cpu::kAvx512Bf16Vbmi, 64, kAnyCols,         kSharedHeads,
   "bf16 dot", "V widened once", nullptr, Bf16DotWeightedShared},
  {Op::kWeighted, kFp8AndBfp8, Cpu::kAvx512Bf16Vbmi, 64, kAnyCols,         1,
   "bf16 dot", "groups of 4 heads", nullptr, Bf16DotWeightedGroups},
  {Op::kWeighted, kInt8,       Cpu::kAvx512Vnni,     32, kAnyCols,         kSharedHeads,
   "int8 dot", "V widened once", nullptr, Int8WeightedVnniShared},
  {Op::kWeighted, kInt8,       Cpu::kAvx512Vnni,     32, kAnyCols,         1,
   "int8 dot", "groups of 4 heads", nullptr, Int8WeightedVnniGroups},
  {Op::kWeighted, kInt8,       Cpu::kPortable,        1, kAnyCols,         kInLanes,
   "int8 dot", "V widened once", nullptr, Int8WeightedPairs},
  {Op::kWeighted, kInt8,       Cpu::kPortable,        1, kAnyCols,         1,
   "int8 dot", "one head at a time", nullptr, Int8WeightedPerHead},
  {Op::kWeighted, kAnyFormat,  Cpu::kPortable,        1, kAnyCols,         1,
   "f32 FMA", "groups of 4 heads", nullptr, F32FmaWeighted},
};
// clang-format on

bool Takes(const AttentionKernelRow& row, AttentionOp op, const RowsRef& m, int n_heads) {
  return row.op == op && (row.formats & FormatBit(m.format)) != 0 &&
         m.cols % row.cols_multiple == 0 && m.cols <= row.max_cols && n_heads >= row.min_heads &&
         (row.cpu == Cpu::kPortable || KernelsOn(row.cpu));
}

}  // namespace

const AttentionKernelRow& ChooseAttentionKernel(AttentionOp op, const RowsRef& m, int n_heads) {
  for (const AttentionKernelRow& row : kTable)
    if (Takes(row, op, m, n_heads)) return row;
  WC_CHECK(false, "no attention kernel for ", RowFormatName(m.format));
  return kTable[0];
}

std::string AttentionKernelRowName(const AttentionKernelRow& row) {
  return std::string(row.family) + " (" + CpuKernelsName(row.cpu) + ")";
}

const AttentionKernelRow* AttentionKernelTable(int* count) {
  *count = static_cast<int>(std::size(kTable));
  return kTable;
}

bool Bf16DotUsable(const RowsRef& m) {
  return ChooseAttentionKernel(Op::kScores, m, 1).cpu == Cpu::kAvx512Bf16Vbmi;
}

void AttentionScores(const float* q, int n_heads, const RowsRef& k, float scale, float* scores,
                     const RowsRef& along) {
  ChooseAttentionKernel(Op::kScores, k, n_heads).scores(q, n_heads, k, scale, scores, along);
}

void AccumulateWeightedRows(const float* w, int64_t w_stride, int n_heads, const RowsRef& v,
                            float* o, const RowsRef& along) {
  ChooseAttentionKernel(Op::kWeighted, v, n_heads).weighted(w, w_stride, n_heads, v, o, along);
}

std::string AttentionKernelName(const RowsRef& m) {
  return AttentionKernelRowName(ChooseAttentionKernel(Op::kScores, m, 1));
}

}  // namespace wc
