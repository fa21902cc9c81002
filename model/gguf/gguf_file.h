// GGUF files (llama.cpp's single-file format, versions 2 and 3, little-endian): the metadata
// key/value pairs and the tensor table, validated against the file's bytes before anything is used;
// tensor data is used in place from the mapping.
//
// Layout (ggml/src/gguf.cpp): "GGUF", u32 version, u64 tensor count, u64 key count; the keys
// (string key, u32 value type, value; a string is u64 length + bytes, an array u32 element type +
// u64 count + elements); the tensor infos (string name, u32 n_dims <= 4, u64 ne[n_dims] with ne[0]
// the row length, u32 ggml type, u64 offset into the data section); padding to `general.alignment`
// (u32, a power of two, default 32); the data section, each tensor at its offset, a multiple of
// the alignment.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/gguf/ggml_types.h"
#include "util/mapped_file.h"

namespace wc {

enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
// "u32", "string", "array"; "type N" for a number GGUF does not define.
std::string GgufTypeName(uint32_t type);

// One metadata value: a scalar, or an array of scalars of one type (GGUF allows arrays of arrays;
// no key a model needs has them, and they are refused).
struct GgufValue {
  GgufType type = GgufType::kU8;
  GgufType elem_type = GgufType::kU8;  // of an array
  // A scalar integer or bool, a float, a string.
  int64_t i = 0;
  // A u64 above INT64_MAX (or an array holding one): valid in a file, held as 0 and refused by
  // GgufFile's accessors where a model needs the value.
  bool u64_above_int64 = false;
  double f = 0;
  std::string s;
  // An array's elements, in the member of their kind: integers and bools, floats, strings.
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;

  bool is_array() const { return type == GgufType::kArray; }
  uint64_t size() const { return ints.size() + floats.size() + strings.size(); }  // an array's
};

struct GgufTensor {
  std::string name;
  uint32_t type_id = 0;  // the file's number; type is valid when known
  const GgmlTypeInfo* type = nullptr;
  std::vector<int64_t> ne;        // [n_dims] GGML order: ne[0] the row length (contiguous)
  uint64_t offset = 0;            // into the data section
  const uint8_t* data = nullptr;  // into the file
  size_t n_bytes = 0;
  int64_t numel() const;
  int64_t rows() const;       // ne[1] * ne[2] * ne[3]: the rows of ne[0] values
  std::string shape() const;  // "[4544, 4672]" in GGML order
};

// The most tensors, keys, array elements and dimensions accepted (far above any real model's:
// Falcon-180B has 643 tensors; a 256k vocabulary is 256k array elements).
constexpr uint64_t kGgufMaxTensors = 1 << 20;
constexpr uint64_t kGgufMaxKeys = 1 << 16;
constexpr uint64_t kGgufMaxArray = uint64_t{1} << 26;
constexpr uint32_t kGgufMaxDims = 4;

struct GgufContents {
  uint32_t version = 0;
  uint32_t alignment = 32;
  uint64_t data_offset = 0;  // where the data section starts in the file
  std::map<std::string, GgufValue> metadata;
  std::vector<std::string> key_order;          // the keys as the file lists them
  std::vector<GgufTensor> tensors;             // in the file's order
  std::map<std::string, size_t> tensor_index;  // name -> tensors[i]
};

// Validates a whole GGUF file's bytes ([size], read from `path`, named in messages) and returns its
// contents, tensors' `data` pointing into `bytes`. Throws wc::Error "PATH: ..." naming the key or
// tensor where there is one, on: a bad magic (a big-endian file is named as such), a version other
// than 2 or 3, a count beyond the limits above or beyond what the file could hold, a string or
// array running past the end, a key or tensor name that is not UTF-8 or is listed twice, a value
// type GGUF does not define, an array of arrays, general.alignment not a u32 power of two, a
// tensor with more than 4 or a negative dimension, a row length that is not a whole number of its
// type's blocks, an unknown type number, a byte count that overflows, an offset not a multiple of
// the alignment, data past the end of the file, or two tensors' data overlapping. A type known but
// not computed with (Q2_K) is not refused here: the loader names it (GgmlTypeName).
GgufContents ParseGguf(const uint8_t* bytes, size_t size, const std::string& path);

// Whether the first bytes of `path` are GGUF's magic (or its byte-swapped form): a file given as
// --model is read as GGUF then, whatever its name.
bool LooksLikeGguf(const std::string& path);

// A mapped, validated GGUF file.
class GgufFile {
 public:
  explicit GgufFile(const std::string& path);  // throws wc::Error naming the path
  // The file's bytes held by the caller (which keeps them while this lives), `path` naming them in
  // messages: for the fuzzers.
  GgufFile(const uint8_t* bytes, size_t size, const std::string& path);
  const GgufContents& contents() const { return contents_; }
  const std::string& path() const { return path_; }
  size_t size() const { return size_; }
  const uint8_t* bytes() const { return bytes_; }

  const GgufValue* Find(const std::string& key) const;
  const GgufTensor* FindTensor(const std::string& name) const;
  // The value of `key` as the type asked for; throws wc::Error naming the file and key when it is
  // missing or of another type (an integer of any width and signedness that holds the value is
  // accepted where an integer is asked for; a float key accepts f32 or f64).
  std::string String(const std::string& key) const;
  int64_t Int(const std::string& key) const;
  double Float(const std::string& key) const;
  bool Bool(const std::string& key) const;
  const std::vector<std::string>& Strings(const std::string& key) const;

 private:
  const GgufValue& Get(const std::string& key) const;
  std::unique_ptr<MappedFile> file_;  // null when the caller holds the bytes
  std::string path_;
  const uint8_t* bytes_ = nullptr;
  size_t size_ = 0;
  GgufContents contents_;
};

// `path` as a GgufFile, mapped and parsed once for the load that reads it several times (its
// config, its tensors, its chat template): the same object again while the file at `path` is the
// same one (device, inode, size and modification time), else a fresh one. The last file opened
// stays mapped until another replaces it (its pages are the model's, held by its Checkpoint
// anyway). Throws as GgufFile's constructor. Thread-safe.
std::shared_ptr<const GgufFile> OpenGgufFile(const std::string& path);

}  // namespace wc
