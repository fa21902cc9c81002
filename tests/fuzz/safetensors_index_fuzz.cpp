// model.safetensors.index.json (model/safetensors.h ParseSafetensorsIndex).
#include <cstdint>
#include <string_view>

#include "model/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = "fuzz/model.safetensors.index.json";
  try {
    const auto shards = wc::ParseSafetensorsIndex(
        std::string_view(reinterpret_cast<const char*>(data), size), path);
    for (const auto& [tensor, shard] : shards)
      wc::fuzz::Require(!shard.empty() && shard.find('/') == std::string::npos, "plain shard name");
  } catch (const wc::Error& e) {
    wc::fuzz::CheckError(e, path);
  }
  return 0;
}
