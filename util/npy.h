// Minimal NumPy .npy (format 1.0) I/O for float32 C-order arrays: logits dumps and test fixtures.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace wc {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;  // C order, prod(shape) values
};

// Writes `data` ([prod(shape)] float32, C order). Throws wc::Error naming the path on failure.
void WriteNpyF32(const std::string& path, const std::vector<int64_t>& shape, const float* data);

// Reads a '<f4' C-order .npy (format 1, 2 or 3). Throws wc::Error naming the path if it is not
// one: bad magic or version, truncated header, another dtype or order, a shape entry that is not a
// non-negative integer, an element count overflowing, or data bytes not matching the shape.
NpyArray ReadNpyF32(const std::string& path);
// The same over the file's bytes, read from `path` (named in messages).
NpyArray ParseNpyF32(std::string_view bytes, const std::string& path);

}  // namespace wc
