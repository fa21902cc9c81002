// config.json: util/json_file.h's ParseJson, then ModelConfig::FromJson (model/config.h) and the
// figures derived from a config.
#include <cstdint>
#include <string_view>

#include "model/config.h"
#include "tests/fuzz/fuzz_util.h"
#include "util/json_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = "fuzz/config.json";
  try {
    const wc::ModelConfig c = wc::ModelConfig::FromJson(
        wc::ParseJson(std::string_view(reinterpret_cast<const char*>(data), size), path), path);
    (void)c.n_params();
    (void)c.qkv_layout();
    (void)c.ToJson().dump();
  } catch (const wc::Error& e) {
    wc::fuzz::CheckError(e, path);
  }
  return 0;
}
