// A whole safetensors file: 8-byte header length, JSON header, data (model/safetensors.h).
#include <cstdint>

#include "model/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = "fuzz/model.safetensors";
  try {
    const auto tensors = wc::ParseSafetensors(data, size, path);
    for (const auto& [name, t] : tensors) {
      wc::fuzz::Require(t.numel() >= 0, "numel >= 0");
      wc::fuzz::Require(t.data >= data && t.data + t.n_bytes <= data + size,
                        "data inside the file");
      // Touch the tensor's first and last byte: ASan reports any byte outside the input.
      if (t.n_bytes > 0) wc::fuzz::Require((t.data[0] | t.data[t.n_bytes - 1]) >= 0, "readable");
    }
  } catch (const wc::Error& e) {
    wc::fuzz::CheckError(e, path);
  }
  return 0;
}
