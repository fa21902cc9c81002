// --weights SPEC: the format each group of a Falcon's matrices is held in
// (kernels/gemm/weight_format.h).
//
//   auto                      every matrix as the checkpoint stores it (the default)
//   f32 | bf16 | bfp8 | bfp4  every matrix in that format
//   GROUP=FORMAT[,...]        per group; a group not named keeps auto. Groups:
//                               attn     the fused QKV and the attention's dense
//                               mlp      dense_h_to_4h and dense_4h_to_h
//                               lm_head  the LM head (a tied one too; the embedding lookup keeps
//                                        reading the checkpoint's embeddings)
//                             e.g. attn=bfp8,mlp=bfp4,lm_head=bf16; FORMAT may also be auto.
// Embeddings, LayerNorms and biases are never converted. The canonical text (ToString) is what
// transcripts, info and benchmarks print: "auto", one format when every group has it, else the
// named groups in the order attn, mlp, lm_head.
#pragma once

#include <optional>
#include <string>

#include "kernels/gemm/weight_format.h"
#include "kernels/matmul.h"

namespace wc {

enum class WeightGroup { kAttn, kMlp, kLmHead };
inline constexpr WeightGroup kWeightGroups[] = {WeightGroup::kAttn, WeightGroup::kMlp,
                                                WeightGroup::kLmHead};
const char* WeightGroupName(WeightGroup g);  // "attn", "mlp", "lm_head"

struct WeightSpec {
  // Each group's format; nullopt: auto (as stored).
  std::optional<WeightFormat> attn, mlp, lm_head;

  // Parses SPEC. Throws wc::Error, one line naming --weights, for an empty spec or part, an unknown
  // format or group (f16 is not offered: it is only ever as stored), a group named twice, or a
  // bare format beside groups.
  static WeightSpec Parse(const std::string& text);
  std::string ToString() const;

  std::optional<WeightFormat> Of(WeightGroup g) const;
  // The format of a matrix of group g stored as `stored`.
  WeightFormat Resolve(WeightGroup g, DType stored) const {
    return Of(g).value_or(FormatOfDType(stored));
  }
  bool is_auto() const { return !attn && !mlp && !lm_head; }
  bool any_bfp() const;
  bool operator==(const WeightSpec& o) const {
    return attn == o.attn && mlp == o.mlp && lm_head == o.lm_head;
  }
  bool operator!=(const WeightSpec& o) const { return !(*this == o); }
};

}  // namespace wc
