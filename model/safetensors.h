// safetensors files (a checkpoint directory's: model/checkpoint.h), memory-mapped. Every header is
// validated when opened; tensors are used in place from the mapping.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
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

// The largest JSON header accepted (the safetensors library's own limit).
constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;
// Deepest nesting of the header's arrays and objects (a valid header nests 3 levels).
constexpr int kSafetensorsMaxDepth = 16;
// Most dimensions a tensor's shape may have.
constexpr size_t kSafetensorsMaxRank = 64;

// Validates the bytes of a whole safetensors file ([size]: 8-byte little-endian header length,
// JSON header, data) read from `path` (named in messages) and returns its tensors by name, their
// `data` pointing into `bytes`. The header is read as a stream (memory in proportion to the
// tensors it lists, not to its nesting). Throws wc::Error "PATH: ..." (naming the tensor where
// there is one) on: a header length beyond the file or above kSafetensorsMaxHeaderBytes, invalid
// JSON (numbers out of range included), nesting deeper than kSafetensorsMaxDepth, a tensor listed
// twice, an entry without dtype, shape and data_offsets or with an unknown dtype, a shape entry
// that is not a non-negative integer, more than kSafetensorsMaxRank dimensions, a byte count that
// overflows 64 bits, offsets out of range, not matching the shape, or overlapping. `metadata`, if
// given, receives the header's __metadata__ entries whose values are strings (the safetensors
// spec's string -> string map; other values are skipped).
std::map<std::string, TensorInfo> ParseSafetensors(
    const uint8_t* bytes, size_t size, const std::string& path,
    std::map<std::string, std::string>* metadata = nullptr);

// model.safetensors.index.json's weight_map: tensor name -> shard file name. Throws wc::Error
// naming `path` (and the tensor) if the text is not JSON, has no weight_map object, or a shard is
// not a plain file name (empty, or with '/' or a control byte).
std::map<std::string, std::string> ParseSafetensorsIndex(std::string_view text,
                                                         const std::string& path);

// One validated safetensors file (ParseSafetensors over its mapping). Throws wc::Error naming the
// file if it cannot be mapped or is not valid.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  // __metadata__'s string entries.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return file_.path(); }

 private:
  MappedFile file_;
  std::map<std::string, std::string> metadata_;  // filled while tensors_ is parsed
  std::map<std::string, TensorInfo> tensors_;
};

// A tensor to write: `data` holds numel * DTypeSize(dtype) little-endian bytes, or, when `data` is
// null, `fill` writes them into the buffer it is given (so large tensors are made one at a time).
// `raw_dtype`, when set, is the header's dtype instead of `dtype`'s (any safetensors dtype, e.g.
// "U8" for a converted checkpoint's block-float tiles; its element size sizes the data).
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;
  std::function<void(uint8_t* out)> fill;
  const char* raw_dtype = nullptr;
  int64_t bytes() const;  // the data's size
};

// Writes a safetensors file (header padded to 8 bytes) to PATH.tmp and renames it to PATH when
// complete. __metadata__ holds {"format": "pt"} and `metadata`. Throws wc::Error naming the path.
void WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

std::string ShapeString(const std::vector<int64_t>& shape);

}  // namespace wc
