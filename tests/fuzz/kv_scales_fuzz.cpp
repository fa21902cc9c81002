// kv_scales.json (kvcache/kv_scales.h KVScaleFile::Parse) and the scales it gives.
#include <cmath>
#include <cstdint>
#include <string_view>

#include "kvcache/kv_scales.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = "fuzz/kv_scales.json";
  try {
    const wc::KVScaleFile f =
        wc::KVScaleFile::Parse(std::string_view(reinterpret_cast<const char*>(data), size), path);
    for (wc::KVQuant q : {wc::KVQuant::kInt8, wc::KVQuant::kFP8E4M3, wc::KVQuant::kFP8E5M2})
      for (float s : f.Scales(q)) wc::fuzz::Require(s >= 0 && std::isfinite(s), "finite scales");
  } catch (const wc::Error& e) {
    wc::fuzz::CheckError(e, path);
  }
  return 0;
}
