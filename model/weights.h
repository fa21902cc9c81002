// Falcon weights bound from a checkpoint by their Hugging Face names. Matrices keep the
// checkpoint's dtype (a BF16 checkpoint is never widened to FP32): bound in the memory mapping,
// then packed once for the GEMM (Pack), which releases the mapping's pages; only LayerNorm
// parameters and biases (vectors) are converted to FP32.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/gemm/packed_matrix.h"
#include "kernels/matmul.h"
#include "model/config.h"
#include "model/converted_checkpoint.h"
#include "model/safetensors.h"
#include "model/tensor_split.h"
#include "model/weight_spec.h"

namespace wc {

// A tensor-parallel rank's matrices are its slice of the checkpoint's (model/tensor_split.h);
// shapes below are the whole model's, with the slice's extent where a rank holds part.
struct LayerWeights {
  std::vector<float> ln_attn_w, ln_attn_b;  // [hidden]: ln_attn, or input_layernorm
  std::vector<float> ln_mlp_w,
      ln_mlp_b;              // [hidden]: ln_mlp or post_attention_layernorm; else empty
  MatrixRef qkv;             // [qkv_rows, hidden]  self_attention.query_key_value (its heads' rows)
  std::vector<float> qkv_b;  // [qkv_rows] or empty
  MatrixRef dense;           // [hidden, n_head * head_dim]  self_attention.dense (its heads)
  std::vector<float> dense_b;  // [hidden] or empty (whole: added once, after the ranks' sum)
  MatrixRef fc1;               // [ffn_hidden, hidden]  mlp.dense_h_to_4h (its rows)
  std::vector<float> fc1_b;    // [ffn_hidden] or empty
  MatrixRef fc2;               // [hidden, ffn_hidden]  mlp.dense_4h_to_h (its columns)
  std::vector<float> fc2_b;    // [hidden] or empty (whole)
  // The four matrices in the GEMM kernels' layout (FalconWeights::Pack), what the forward pass
  // multiplies by; the MatrixRefs above stay bound to the checkpoint.
  PackedMatrix qkv_p, dense_p, fc1_p, fc2_p;
};

struct FalconWeights {
  std::unique_ptr<Checkpoint> checkpoint;  // owns the mappings every MatrixRef points into
  MatrixRef embeddings;                    // [vocab, hidden]  transformer.word_embeddings
  // [vocab, hidden]  lm_head, or the embeddings when tied; a tensor-parallel rank's: rows
  // [split.vocab_begin, split.vocab_end)
  MatrixRef lm_head;
  bool lm_head_tied = true;
  TensorSplit split;  // what this rank holds
  // Slices gathered from several ranges of a tensor (a multi-query QKV's heads and its shared K
  // and V rows), which a MatrixRef above points into until Pack.
  std::vector<std::vector<uint8_t>> gathered;
  // A converted checkpoint's block-float matrices (model/converted_checkpoint.h) by tensor name,
  // until Pack hands their tiles to the kernels; their MatrixRefs above have the slice's shape and
  // the embeddings' dtype but no data.
  std::map<std::string, StoredTiles> stored_tiles;
  std::vector<float> ln_f_w, ln_f_b;  // [hidden]
  std::vector<LayerWeights> layers;   // [n_layers]
  PackedMatrix lm_head_p;             // lm_head packed (FalconWeights::Pack)

  // out[0:hidden] = the embedding of `token`: from the packed LM head when tied, whole and held
  // exactly as stored (the checkpoint's pages are released), else from the mapping (a tied LM
  // head converted by --weights no longer holds the embeddings' values).
  // A lookup from the mapping drops the pages it made resident (the kernel's 64 KiB fault-around
  // window), so lookups of many tokens keep at most a few windows of the table resident.
  void Embedding(int64_t token, float* out) const;
  // Whether Embedding reads the packed LM head (tied, whole, held in the embeddings' own dtype).
  bool EmbeddingsFromPackedHead() const;

  // Packs every layer's matrices and the LM head in the formats `spec` gives their groups
  // (PackedMatrix::Pack; BF16 panels for `bf16_precision` activations), releasing each source's
  // resident mapping pages once copied, so the process holds the weights once (the embeddings are
  // read back row by row from the page cache). Throws wc::Error naming the tensor for a weight the
  // format refuses (a non-finite one in bfp). `progress`, if set, is called on the calling thread
  // after each block of source rows (about 8 MiB) with the source bytes packed so far and in all.
  using PackProgress = std::function<void(int64_t bytes_done, int64_t bytes_total)>;
  void Pack(ActivationPrecision bf16_precision, const WeightSpec& spec = {},
            const PackProgress& progress = nullptr);

  // Binds every tensor `config` needs (the parts `split` holds). Throws wc::Error naming file and
  // tensor when one is missing, mis-shaped or of an unsupported dtype. A converted checkpoint's
  // block-float matrices (config.json's wormchat_weights) are bound as their tiles (StoredTiles:
  // validated; a rank reads its slice of whole tiles in place).
  static FalconWeights Load(const FalconConfig& config, const std::string& model_dir,
                            const TensorSplit& split);
  static FalconWeights Load(const FalconConfig& config, const std::string& model_dir) {
    return Load(config, model_dir, TensorSplit::Whole(config, 1));
  }

  // Bytes of the packed matrices and vectors this process holds (the embeddings, read from the
  // page cache, not counted): a bfp matrix's tiles at tt-metal's size (1088 / 576 bytes a 32x32
  // tile).
  int64_t HeldBytes() const;
};

// The fused QKV rows of the split's heads, as [begin, end) row ranges of the whole matrix, in the
// order the rank's own (smaller) fused layout has them (HF FalconAttention._split_heads).
std::vector<std::pair<int64_t, int64_t>> QkvRowRanges(const FalconConfig& c, const TensorSplit& s);

// Tensor parallel with block-float groups: every rank's slice of a bfp matrix must be whole tiles
// of the whole matrix's (each sliced range starting on a multiple of 32 rows or columns and ending
// on one or at the matrix's end), so each rank holds exactly the whole packing's tiles and the
// ranks together multiply exactly as one process. (tt-metal would pack each rank's shard alone,
// with tiles straddling the cut quantized differently; wormchat refuses that instead.) Checks all
// `ranks` ranks alike (every rank gives the same verdict); throws wc::Error naming --weights and
// --tensor-parallel otherwise. Real Falcons (head_dim 64, ffn 4 x hidden) always split.
void CheckBfpSlices(const FalconConfig& c, int lm_head_fractures, int ranks,
                    const WeightSpec& spec);

// Copies one embedding row to FP32. out: [cols]
void GatherRow(const MatrixRef& m, int64_t row, float* out);

}  // namespace wc
