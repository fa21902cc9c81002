// safetensors checkpoints: one file or shards listed in model.safetensors.index.json,
// memory-mapped. Every header is validated when opened; tensors are used in place from the mapping.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "util/mapped_file.h"

namespace wc {

struct TensorInfo {
  std::string name;
  std::string dtype_name;     // as in the header, e.g. "BF16"
  bool readable = false;      // dtype is F32, BF16 or F16 (what the engine computes with)
  DType dtype = DType::kF32;  // valid when readable
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // into the mapping
  size_t n_bytes = 0;
  std::string file;  // the file it lives in, for messages
  int64_t numel() const;
};

// One validated safetensors file. Throws wc::Error naming the file on: header length beyond the
// file, invalid JSON, unknown dtype, bad shape, offsets out of range or overlapping, byte count
// not matching the shape.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::string& path() const { return file_.path(); }

 private:
  MappedFile file_;
  std::map<std::string, TensorInfo> tensors_;
};

// All tensors of a model directory: DIR/model.safetensors or the shards named by
// DIR/model.safetensors.index.json.
class Checkpoint {
 public:
  // Throws wc::Error naming the file if neither exists or any shard is invalid.
  static std::unique_ptr<Checkpoint> Open(const std::string& model_dir);

  bool Has(const std::string& name) const { return index_.count(name) != 0; }
  // The tensor `name` with exactly `shape` and a readable dtype. Throws wc::Error naming the file,
  // tensor, expected and actual shape otherwise.
  const TensorInfo& Get(const std::string& name, const std::vector<int64_t>& shape) const;
  // Sum of tensor bytes and a description such as "BF16" or "F32+BF16".
  size_t total_bytes() const;
  std::string dtype_summary() const;
  const std::string& source() const { return source_; }

 private:
  std::string source_;  // file name used in messages
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorInfo*> index_;
};

// A tensor to write: `data` holds numel * DTypeSize(dtype) little-endian bytes, or, when `data` is
// null, `fill` writes them into the buffer it is given (so large tensors are made one at a time).
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;
  std::function<void(uint8_t* out)> fill;
};

// Writes a safetensors file (header padded to 8 bytes). Throws wc::Error naming the path.
void WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors);

std::string ShapeString(const std::vector<int64_t>& shape);

}  // namespace wc
