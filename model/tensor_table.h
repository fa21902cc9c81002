// Every tensor of a checkpoint by what it is in the decoder (its role), with the name and shape
// its architecture gives it: one table per architecture (model/falcon/falcon_tensors.cpp,
// model/llama/llama_tensors.cpp, as llama.cpp's LLM_TENSOR_NAMES and gemma.cpp's tensor
// registry). Binding weights, writing random checkpoints, converting, `info` and the parameter
// count all read the table; the roles decide how a tensor-parallel rank slices it and which
// --weights group it belongs to, whatever the architecture.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/weight_spec.h"

namespace wc {

enum class TensorRole {
  kTokenEmbd,       // [vocab, hidden]
  kOutputNorm,      // [hidden] final norm weight
  kOutputNormBias,  // [hidden]
  kOutput,          // [vocab, hidden] untied LM head
  kAttnNorm,        // [hidden] the norm before attention (and before a parallel MLP)
  kAttnNormBias,    // [hidden]
  kMlpNorm,         // [hidden] the MLP's own norm (Falcon's ln_mlp, post_attention_layernorm)
  kMlpNormBias,     // [hidden]
  kQkv,             // [qkv_rows, hidden] Falcon's fused QKV (QkvLayout)
  kQkvBias,         // [qkv_rows]
  kQ,               // [n_head * head_dim, hidden]
  kQBias,           // [n_head * head_dim]
  kK,               // [n_kv * head_dim, hidden]
  kKBias,           // [n_kv * head_dim]
  kV,               // [n_kv * head_dim, hidden]
  kVBias,           // [n_kv * head_dim]
  kAttnOut,         // [hidden, n_head * head_dim]
  kAttnOutBias,     // [hidden]
  kGate,            // [ffn, hidden]
  kGateBias,        // [ffn]
  kUp,              // [ffn, hidden]
  kUpBias,          // [ffn]
  kDown,            // [hidden, ffn]
  kDownBias,        // [hidden]
};

// How a GGUF file orders a tensor's rows where llama.cpp's converter changed HF's order
// (docs/gguf.md section 4), undone at load (model/gguf/gguf_tensors.h).
enum class GgufRows {
  kAsHf,       // the same rows
  kRopePairs,  // Llama's q/k (weights and biases): each head's rotate_half halves interleaved
  kQkvBlocks,  // Falcon's grouped fused QKV: all query heads, then all K, then all V
};

struct TensorEntry {
  TensorRole role;
  int layer;                   // -1: not a layer's
  std::string name;            // the checkpoint's (Hugging Face) name
  std::vector<int64_t> shape;  // [rows, cols] or [n]
  // llama.cpp's name in a GGUF file (src/llama-arch.cpp's LLM_TENSOR_NAMES, docs/gguf.md), whose
  // shape is `shape` reversed (GGML order); empty when no GGUF file of the architecture holds it
  // (llama.cpp's falcon graph has no biases and no sequential MLP norm).
  std::string gguf_name;
  GgufRows gguf_rows = GgufRows::kAsHf;
};

// Every tensor `c` needs, in the order the graph uses them (global ones first); kOutput only when
// the LM head is untied (tie_word_embeddings false).
std::vector<TensorEntry> ModelTensors(const ModelConfig& c);
// The checkpoint name of `role` in `layer` (-1 for the global ones) under `c`'s architecture;
// nullopt when the layout has no such tensor.
std::optional<std::string> TensorName(const ModelConfig& c, TensorRole role, int layer = -1);

// Whether the role is a matrix the GEMM multiplies (as opposed to a vector: norms and biases).
bool IsMatrixRole(TensorRole role);
// The --weights group of a matrix role (attn, mlp or lm_head: kOutput); nullopt for vectors and
// the embeddings, which are never converted (a tied LM head packs them as the lm_head group).
std::optional<WeightGroup> GroupOfRole(TensorRole role);
// The matrix role a checkpoint tensor name is under `c` (any layer); nullopt for vectors and
// names the table does not have.
std::optional<TensorRole> MatrixRoleOfName(const ModelConfig& c, const std::string& name);

}  // namespace wc
