// Falcon weights bound from a checkpoint by their Hugging Face names. Matrices keep the
// checkpoint's dtype (a BF16 checkpoint is never widened to FP32): bound in the memory mapping,
// then packed once for the GEMM (Pack), which releases the mapping's pages; only LayerNorm
// parameters and biases (vectors) are converted to FP32.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/packed_matrix.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "model/tensor_split.h"

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
  std::vector<float> ln_f_w, ln_f_b;  // [hidden]
  std::vector<LayerWeights> layers;   // [n_layers]
  PackedMatrix lm_head_p;             // lm_head packed (FalconWeights::Pack)

  // out[0:hidden] = the embedding of `token`: from the packed LM head when tied and whole (the
  // checkpoint's pages are released), else from the mapping.
  void Embedding(int64_t token, float* out) const;

  // Packs every layer's matrices and the LM head (BF16 ones for `bf16_precision` activations),
  // releasing each source's resident mapping pages once copied, so the process holds the weights
  // once (the embeddings are read back row by row from the page cache).
  void Pack(ActivationPrecision bf16_precision);

  // Binds every tensor `config` needs (the parts `split` holds). Throws wc::Error naming file and
  // tensor when one is missing, mis-shaped or of an unsupported dtype.
  static FalconWeights Load(const FalconConfig& config, const std::string& model_dir,
                            const TensorSplit& split);
  static FalconWeights Load(const FalconConfig& config, const std::string& model_dir) {
    return Load(config, model_dir, TensorSplit::Whole(config, 1));
  }

  // Bytes of the packed matrices and vectors this process holds (the embeddings, read from the
  // page cache, not counted).
  int64_t HeldBytes() const;
};

// Copies one embedding row to FP32. out: [cols]
void GatherRow(const MatrixRef& m, int64_t row, float* out);

}  // namespace wc
