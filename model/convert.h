// `wormchat convert`: a Falcon checkpoint rewritten with its matrices in the formats a --weights
// SPEC gives their groups (the format: model/converted_checkpoint.h; docs/models.md).
//
//   bfp8 / bfp4   each matrix packed by the exact tt-metal packer (PackBfpMatrix, kernels/
//                 bfp_weights.h) into U8 [K/32, N/32, tile bytes], format and [out, in] in
//                 __metadata__
//   f32 / bf16    the matrix's dtype converted (bf16: round to nearest even)
//   auto          copied
// Everything else (embeddings, LayerNorms, biases, any other tensor) is copied unchanged, and so is
// every file beside the weights (tokenizer, chat format, generation config, ...); config.json gets
// "wormchat_weights". A tied LM head whose format is not the embeddings' dtype is written as its
// own lm_head.weight (the embeddings stay as they are, for the lookup) and config.json's
// tie_word_embeddings becomes false.
//
// Memory: one tensor at a time (the writer's fill callback), its source pages released as they are
// packed; a bfp matrix is packed in parallel (OpenMP) inside the tensor. The directory is built
// under OUT.partial and renamed to OUT when complete (a failed convert leaves nothing under OUT).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "model/weight_spec.h"

namespace wc {

// Called before the first tensor and after each: bytes of the source's tensors read so far, of
// `total`.
using ConvertProgress = std::function<void(int64_t done, int64_t total)>;

struct ConvertSummary {
  WeightSpec stored;                    // every group's format in the output
  bool lm_head_split = false;           // a tied head written as its own lm_head.weight
  bool from_gguf = false;               // the source was a GGUF file (its tokenizer not written)
  bool requantized = false;             // a quantized GGUF matrix written rounded again
  int64_t bytes_in = 0, bytes_out = 0;  // the safetensors tensors' bytes
};

// Writes the converted checkpoint of `model_dir` to `out_dir`. Throws wc::Error, one line, naming
// --out for an out_dir that exists and is not an empty directory or is model_dir itself, MODEL_DIR
// for a checkpoint already in block float (any group: no double rounding), and the tensor for a
// weight the packer refuses (not finite).
//
// A GGUF source (IsGgufModel): its tensors under their HF names in HF row order
// (model/gguf/gguf_tensors.h), config.json from its keys (ConfigJsonFromGguf), its
// tokenizer.chat_template as tokenizer_config.json; its vocabulary is not written (the directory
// needs a tokenizer beside it, or --ids). A quantized tensor (Q8_0, Q4_K, ...) is dequantized
// exactly to f32 (model/gguf/ggml_types.h's DequantizeRows), one tensor at a time: a matrix is
// written as --weights gives its group, `auto` being f32, and any other tensor (a quantized
// token_embd) as f32. Writing a quantized matrix in anything but f32 rounds it twice: refused,
// naming the tensor, unless `allow_requantize` (summary.requantized says it happened).
ConvertSummary ConvertCheckpoint(const std::string& model_dir, const std::string& out_dir,
                                 const WeightSpec& spec, const ConvertProgress& progress = nullptr,
                                 bool allow_requantize = false);

}  // namespace wc
