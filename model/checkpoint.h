// A model's tensors by their Hugging Face names, wherever they are stored: a checkpoint
// directory's safetensors (one file or shards) or a GGUF file (model/gguf/gguf_tensors.h), used in
// place from the memory mapping.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/safetensors.h"

namespace wc {

struct GgufTensors;

// All tensors of a model: DIR/model.safetensors or the shards named by
// DIR/model.safetensors.index.json, or a GGUF file's under their Hugging Face names.
class Checkpoint {
 public:
  // A model directory's safetensors. Throws wc::Error naming the file if neither exists or any
  // shard is invalid.
  static std::unique_ptr<Checkpoint> Open(const std::string& model_dir);
  // `path` a model directory (as above) or a GGUF file (IsGgufModel): its tensors bound to `c`'s
  // table (model/gguf/gguf_tensors.h; c is ConfigFromGguf's of the same file). A GGUF file's
  // quantized tensors (Q8_0 ... Q6_K) are bound with readable = false and dtype_name "Q4_K": their
  // blocks, in HF row order, which GetMatrix serves.
  static std::unique_ptr<Checkpoint> Open(const std::string& path, const ModelConfig& c);
  Checkpoint();
  ~Checkpoint();

  bool Has(const std::string& name) const { return index_.count(name) != 0; }
  // The tensor `name` with exactly `shape` and a readable dtype. Throws wc::Error naming the file,
  // tensor, expected and actual shape otherwise.
  const TensorInfo& Get(const std::string& name, const std::vector<int64_t>& shape) const;
  // As Get, for a matrix: a GGUF file's quantized blocks too (readable false, dtype_name a
  // GgmlQuantNamed type).
  const TensorInfo& GetMatrix(const std::string& name, const std::vector<int64_t>& shape) const;
  // The tensor `name` whatever its dtype and shape (a converted checkpoint's U8 tiles). Throws
  // wc::Error naming the file and tensor when it is missing.
  const TensorInfo& Raw(const std::string& name) const;
  std::vector<std::string> names() const;  // every tensor, sorted
  // The __metadata__ string entries of every file (shards merged; the first file's value wins).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Sum of tensor bytes and a description such as "BF16" or "F32+BF16".
  size_t total_bytes() const;
  std::string dtype_summary() const;
  const std::string& source() const { return source_; }

 private:
  std::string source_;  // file name used in messages
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorInfo*> index_;
  std::map<std::string, std::string> metadata_;
  std::unique_ptr<GgufTensors> gguf_;  // a GGUF file's (index_ points into it)
};

}  // namespace wc
