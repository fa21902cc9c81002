// Which part of a Falcon model one rank of a tensor-parallel group holds: seed 001's fracturing
// of attention and MLP across Wormhole chips, with ranks for chips (Megatron's split).
//   - attention: whole KV-head groups and their query heads (a multi-query model's one KV head is
//     held by every rank; its query heads are split); the fused QKV's rows of those heads, the
//     dense matrix's columns of those heads; the KV cache of those KV heads only.
//   - MLP: dense_h_to_4h's rows [ffn_begin, ffn_end) and dense_4h_to_h's columns, the same range.
//   - LM head: the fractures [fracture_begin, fracture_end) of the padded vocabulary.
// Everything of width hidden_size (embeddings, LayerNorms, the residual stream) is whole on every
// rank. The ranks' dense and MLP outputs are partial sums, added across ranks once per layer
// (twice for the sequential layout); the LM head's fractures are gathered.
#pragma once

#include <cstdint>

#include "kernels/gemm/weight_format.h"
#include "model/config.h"

namespace wc {

struct TensorSplit {
  int rank = 0, ranks = 1;
  int q_head_begin = 0, q_head_end = 0;      // query heads
  int kv_begin = 0, kv_end = 0;              // KV heads
  int64_t ffn_begin = 0, ffn_end = 0;        // MLP hidden units
  int fracture_begin = 0, fracture_end = 0;  // LM-head fractures
  int64_t vocab_begin = 0, vocab_end = 0;    // their real (unpadded) vocabulary rows

  // The whole model (one rank).
  static TensorSplit Whole(const FalconConfig& c, int lm_head_fractures) {
    return Make(c, lm_head_fractures, 0, 1);
  }
  // Rank `rank` of `ranks`. Throws wc::Error naming --tensor-parallel (or --lm-head-fractures)
  // when the model's heads, MLP width or LM-head fractures do not split into `ranks` equal parts.
  static TensorSplit Make(const FalconConfig& c, int lm_head_fractures, int rank, int ranks);

  bool whole() const { return ranks == 1; }
  int n_head() const { return q_head_end - q_head_begin; }
  int n_kv_heads() const { return kv_end - kv_begin; }
  int64_t ffn() const { return ffn_end - ffn_begin; }
};

// Bytes of the matrices a rank holds (fused QKV, dense, MLP and its LM-head rows; the embeddings,
// read row by row from the checkpoint's mapping, are not held) at `bytes_per_weight`, plus its
// LayerNorms and biases in f32.
int64_t RankWeightBytes(const FalconConfig& c, const TensorSplit& s, int bytes_per_weight);

// The bytes a rank's matrices take per --weights group in formats {attn, mlp, lm_head}
// (WeightFormatBytes: the panels for f32/f16/bf16, the 32x32 tiles for bfp), all layers, and its
// f32 vectors (LayerNorms, biases).
struct WeightGroupBytes {
  int64_t attn = 0, mlp = 0, lm_head = 0, vectors = 0;
  int64_t total() const { return attn + mlp + lm_head + vectors; }
};
WeightGroupBytes RankWeightGroupBytes(const FalconConfig& c, const TensorSplit& s,
                                      const WeightFormat formats[3]);

}  // namespace wc
