// A .npy file (util/npy.h ParseNpyF32).
#include <cstdint>
#include <string_view>

#include "tests/fuzz/fuzz_util.h"
#include "util/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = "fuzz/logits.npy";
  try {
    const wc::NpyArray a =
        wc::ParseNpyF32(std::string_view(reinterpret_cast<const char*>(data), size), path);
    uint64_t count = 1;
    for (int64_t d : a.shape) count *= static_cast<uint64_t>(d);
    wc::fuzz::Require(count == a.data.size(), "data holds prod(shape) values");
  } catch (const wc::Error& e) {
    wc::fuzz::CheckError(e, path);
  }
  return 0;
}
