// A GGUF file's tensors under the Hugging Face names of its architecture's tensor table
// (model/tensor_table.h: each row's gguf_name), in the Hugging Face row order, so the loader binds
// a GGUF file as it binds a checkpoint directory and the weights are the same bits.
//
// Row order: llama.cpp's converter permutes the Llama layout's q and k rows (weights and biases)
// within each head from HF's rotate_half halves to the adjacent pairs its RoPE rotates (GGUF row
// 2 i + j of a head is HF row j hd / 2 + i), and writes Falcon's fused QKV as all query heads,
// then all K, then all V where HF groups them per KV head (docs/gguf.md section 4). The
// architecture's table marks those tensors (TensorEntry::gguf_rows); they are put back into HF's
// order in memory owned here, and every other tensor is used in place from the file's mapping.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/gguf/gguf_file.h"
#include "model/safetensors.h"

namespace wc {

struct GgufTensors {
  std::shared_ptr<const GgufFile> file;       // OpenGgufFile's, or null (the caller holds it)
  std::map<std::string, TensorInfo> tensors;  // by HF name; data in `file` or `reordered`
  std::vector<std::vector<uint8_t>> reordered;
};

// Binds `path`'s tensors to `c`'s table (c as ConfigFromGguf read it from the same file); the
// second form binds a file the caller holds (`file` stays null). Throws
// wc::Error naming the file and the GGUF tensor on: a tensor the table needs missing, one the
// table does not have (an extra), a shape other than the table's (both in GGML order), a type
// wormchat does not read (GgmlUse::kRefused, named: "Q2_K"). A quantized tensor (GgmlUse::
// kQuantized) is bound with readable = false, dtype_name its type ("Q4_K") and `data` its blocks
// in HF row order.
GgufTensors BindGgufTensors(const std::string& path, const ModelConfig& c);
GgufTensors BindGgufTensors(const GgufFile& g, const ModelConfig& c);

// The reorderings themselves, on rows of `row_bytes` bytes: HF order from GGUF order.
//   RopePairsToHalves: `rows` rows in heads of `head_dim` (even) rows each.
//   QkvBlocksToGroups: n_head query heads, then n_kv K heads, then n_kv V heads, each `head_dim`
//   rows, to n_kv groups of [n_head / n_kv query heads, K, V].
std::vector<uint8_t> RopePairsToHalves(const uint8_t* data, int64_t rows, int64_t row_bytes,
                                       int64_t head_dim);
std::vector<uint8_t> QkvBlocksToGroups(const uint8_t* data, int64_t row_bytes, int64_t n_head,
                                       int64_t n_kv, int64_t head_dim);

}  // namespace wc
