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
      wc::fuzz::RequireInside(data, size, t.data, t.n_bytes);
    }
  } catch (const wc::Error& e) {
    wc::fuzz::CheckError(e, path);
  }
  return 0;
}
