// chat_format.json (model/chat_format.h ChatFormat::Parse).
#include <cstdint>
#include <string_view>

#include "model/chat_format.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = "fuzz/chat_format.json";
  try {
    const wc::ChatFormat f =
        wc::ChatFormat::Parse(std::string_view(reinterpret_cast<const char*>(data), size), path);
    for (const std::string& s : f.stop) wc::fuzz::Require(!s.empty(), "non-empty stop strings");
  } catch (const wc::Error& e) {
    wc::fuzz::CheckError(e, path);
  }
  return 0;
}
