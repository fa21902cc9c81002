// Which part of a decoder model one rank of a tensor-parallel group holds: seed 001's fracturing
// of attention and MLP across Wormhole chips, with ranks for chips (Megatron's split), the same
// for every architecture (by tensor role, model/tensor_table.h).
//   - attention: whole KV-head groups and their query heads (a multi-query model's one KV head is
//     held by every rank; its query heads are split); the QKV projections' rows of those heads
//     (Falcon's fused QKV, or Llama's q/k/v_proj), the output projection's columns of those heads;
//     the KV cache of those KV heads only.
//   - MLP: the up (and gate) projections' rows [ffn_begin, ffn_end) and the down projection's
//     columns, the same range.
//   - LM head: the fractures [fracture_begin, fracture_end) of the padded vocabulary.
// Everything of width hidden_size (embeddings, LayerNorms, the residual stream) is whole on every
// rank. The ranks' dense and MLP outputs are partial sums, added across ranks once per layer
// (twice for the sequential layout); the LM head's fractures are gathered.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/gemm/weight_format.h"
#include "model/config.h"
#include "model/tensor_table.h"

namespace wc {

struct TensorSplit {
  int rank = 0, ranks = 1;
  int q_head_begin = 0, q_head_end = 0;      // query heads
  int kv_begin = 0, kv_end = 0;              // KV heads
  int64_t ffn_begin = 0, ffn_end = 0;        // MLP hidden units
  int fracture_begin = 0, fracture_end = 0;  // LM-head fractures
  int64_t vocab_begin = 0, vocab_end = 0;    // their real (unpadded) vocabulary rows

  // The whole model (one rank).
  static TensorSplit Whole(const ModelConfig& c, int lm_head_fractures) {
    return Make(c, lm_head_fractures, 0, 1);
  }
  // Rank `rank` of `ranks`. Throws wc::Error naming --tensor-parallel (or --lm-head-fractures)
  // when the model's heads, MLP width or LM-head fractures do not split into `ranks` equal parts.
  static TensorSplit Make(const ModelConfig& c, int lm_head_fractures, int rank, int ranks);

  bool whole() const { return ranks == 1; }
  int n_head() const { return q_head_end - q_head_begin; }
  int n_kv_heads() const { return kv_end - kv_begin; }
  int64_t ffn() const { return ffn_end - ffn_begin; }
};

// The part of one checkpoint tensor a rank holds: row ranges of the whole tensor's rows (several
// for a multi-query fused QKV: the rank's query heads and the shared K and V), and a column range
// [col_begin, col_end) (all columns for vectors and row-split matrices). Vectors' ranges are
// their elements'. A bias added after the ranks' sum (the output and down projections') is whole.
struct TensorSlice {
  std::vector<std::pair<int64_t, int64_t>> rows;
  int64_t col_begin = 0, col_end = 0;
  int64_t rows_held() const;
  int64_t cols_held() const { return col_end - col_begin; }
};
TensorSlice SliceOf(const ModelConfig& c, const TensorSplit& s, const TensorEntry& e);

// Falcon's fused QKV rows of the split's heads, as [begin, end) row ranges of the whole matrix, in
// the order the rank's own (smaller) fused layout has them (HF FalconAttention._split_heads).
std::vector<std::pair<int64_t, int64_t>> QkvRowRanges(const ModelConfig& c, const TensorSplit& s);

// Bytes of the matrices a rank holds (attention, MLP and its LM-head rows; the embeddings, read
// row by row from the checkpoint's mapping, are not held) at `bytes_per_weight`, plus its norms
// and biases in f32.
int64_t RankWeightBytes(const ModelConfig& c, const TensorSplit& s, int bytes_per_weight);

// The bytes a rank's matrices take per --weights group in formats {attn, mlp, lm_head}
// (WeightFormatBytes: the panels for f32/f16/bf16, the 32x32 tiles for bfp), all layers, and its
// f32 vectors (LayerNorms, biases).
struct WeightGroupBytes {
  int64_t attn = 0, mlp = 0, lm_head = 0, vectors = 0;
  int64_t total() const { return attn + mlp + lm_head + vectors; }
};
WeightGroupBytes RankWeightGroupBytes(const ModelConfig& c, const TensorSplit& s,
                                      const WeightFormat formats[3]);

}  // namespace wc
