// A decoder model's weights bound from a checkpoint by their Hugging Face names (the
// architecture's tensor table, model/tensor_table.h). Matrices keep the
// checkpoint's dtype (a BF16 checkpoint is never widened to FP32): bound in the memory mapping,
// then packed once for the GEMM (Pack), which releases the mapping's pages; only norm
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
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/converted_checkpoint.h"
#include "model/tensor_split.h"
#include "model/tensor_table.h"
#include "model/weight_spec.h"

namespace wc {

// A tensor-parallel rank's matrices are its slice of the checkpoint's (SliceOf,
// model/tensor_split.h); shapes below are the whole model's, with the slice's extent where a rank
// holds part.

// One projection y = x W^T + b of the layer's graph.
struct Linear {
  std::string name;  // the checkpoint's tensor name; empty: the layout has none
  WeightGroup group = WeightGroup::kAttn;  // its --weights group
  MatrixRef w;           // [out, in]: bound in the checkpoint (its slice), until packed
  std::vector<float> b;  // [out] or empty; a bias added after the ranks' sum is whole
  PackedMatrix p;        // w in the GEMM kernels' layout (ModelWeights::Pack): what runs

  bool present() const { return !name.empty(); }
};

// A norm's parameters: weight and (LayerNorm) bias, [hidden] each; empty when absent.
struct NormWeights {
  std::vector<float> w, b;
  bool present() const { return !w.empty(); }
};

// One layer's tensors by role (model/tensor_table.h); an architecture uses those its table lists.
struct LayerWeights {
  NormWeights attn_norm;  // ln_attn / input_layernorm
  NormWeights mlp_norm;   // ln_mlp / post_attention_layernorm; absent for one parallel norm
  Linear qkv;             // [qkv_rows, hidden] Falcon's fused QKV (its heads' rows)
  Linear q;               // [n_head * head_dim, hidden]
  Linear k, v;            // [n_kv * head_dim, hidden]
  Linear attn_out;        // [hidden, n_head * head_dim] (its heads' columns)
  Linear gate;            // [ffn, hidden] (its rows)
  Linear up;              // [ffn, hidden] (its rows)
  Linear down;            // [hidden, ffn] (its columns)

  // The projections the layout has, in the table's order.
  std::vector<const Linear*> Linears() const;
  std::vector<Linear*> Linears();
  // The projection or norm a role names (a bias role: its projection's).
  Linear* LinearOf(TensorRole role);
  NormWeights* NormOf(TensorRole role);
};

struct ModelWeights {
  std::unique_ptr<Checkpoint> checkpoint;  // owns the mappings every MatrixRef points into
  MatrixRef embeddings;                    // [vocab, hidden]  the token embeddings
  // [vocab, hidden]  lm_head, or the embeddings when tied; a tensor-parallel rank's: rows
  // [split.vocab_begin, split.vocab_end)
  MatrixRef lm_head;
  bool lm_head_tied = true;
  std::string lm_head_name;  // the LM head's tensor (the embeddings' when tied)
  TensorSplit split;         // what this rank holds
  // Slices gathered from several ranges of a tensor (a multi-query QKV's heads and its shared K
  // and V rows), which a MatrixRef above points into until Pack.
  std::vector<std::vector<uint8_t>> gathered;
  // A converted checkpoint's block-float matrices (model/converted_checkpoint.h) by tensor name,
  // until Pack hands their tiles to the kernels; their MatrixRefs above have the slice's shape and
  // the embeddings' dtype but no data.
  std::map<std::string, StoredTiles> stored_tiles;
  NormWeights final_norm;            // [hidden] ln_f / model.norm
  std::vector<LayerWeights> layers;  // [n_layers]
  PackedMatrix lm_head_p;            // lm_head packed (ModelWeights::Pack)

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

  // Binds every tensor of `config`'s table (the parts `split` holds). Throws wc::Error naming file
  // and tensor when one is missing, mis-shaped or of an unsupported dtype. A converted checkpoint's
  // block-float matrices (config.json's wormchat_weights) are bound as their tiles (StoredTiles:
  // validated; a rank reads its slice of whole tiles in place).
  static ModelWeights Load(const ModelConfig& config, const std::string& model_dir,
                           const TensorSplit& split);
  static ModelWeights Load(const ModelConfig& config, const std::string& model_dir) {
    return Load(config, model_dir, TensorSplit::Whole(config, 1));
  }

  // The dtype the checkpoint stores the layers' matrices in (the first layer's first projection;
  // a converted checkpoint's block-float groups report the embeddings' dtype).
  DType matrix_dtype() const;
  // The formats the packed matrices run in (the layers' projections and the LM head), as their
  // names joined by '+' in the format table's order, e.g. "Q4_0+Q6_K" for a GGUF Q4_0 file.
  std::string packed_formats() const;
  // Whether any matrix is held in a block-float format (bfp8, bfp4); in bf16.
  bool holds_bfp() const;
  bool holds_bf16() const;
  // Whether any packed matrix (the layers' projections, the LM head) has a format `is` accepts.
  bool HoldsAny(bool (*is)(WeightFormat)) const;

  // Bytes of the packed matrices and vectors this process holds (the embeddings, read from the
  // page cache, not counted): a bfp matrix's tiles at tt-metal's size (1088 / 576 bytes a 32x32
  // tile).
  int64_t HeldBytes() const;
};

// Tensor parallel with block-float groups: every rank's slice of a bfp matrix must be whole tiles
// of the whole matrix's (each sliced range starting on a multiple of 32 rows or columns and ending
// on one or at the matrix's end), so each rank holds exactly the whole packing's tiles and the
// ranks together multiply exactly as one process. (tt-metal would pack each rank's shard alone,
// with tiles straddling the cut quantized differently; wormchat refuses that instead.) Checks all
// `ranks` ranks alike (every rank gives the same verdict); throws wc::Error naming --weights and
// --tensor-parallel otherwise. Real Falcons (head_dim 64, ffn 4 x hidden) and Falcon3s (head_dim
// 256) always split.
void CheckBfpSlices(const ModelConfig& c, int lm_head_fractures, int ranks, const WeightSpec& spec);

// Copies one embedding row to FP32. out: [cols]
void GatherRow(const MatrixRef& m, int64_t row, float* out);

}  // namespace wc
