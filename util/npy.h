// Minimal NumPy .npy (format 1.0) I/O for float32 C-order arrays: logits dumps and test fixtures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace wc {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;  // C order, prod(shape) values
};

// Writes `data` ([prod(shape)] float32, C order). Throws wc::Error naming the path on failure.
void WriteNpyF32(const std::string& path, const std::vector<int64_t>& shape, const float* data);

// Reads a '<f4' C-order .npy. Throws wc::Error naming the path if it is not one.
NpyArray ReadNpyF32(const std::string& path);

}  // namespace wc
