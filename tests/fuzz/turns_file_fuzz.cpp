// A `transcript record --turns` file (serving/turns_file.h).
#include <cstdint>
#include <string>

#include "serving/turns_file.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = "fuzz/turns.txt";
  try {
    for (const wc::TurnsFileStep& s :
         wc::ParseTurnsFile(std::string(reinterpret_cast<const char*>(data), size), path))
      wc::fuzz::Require(s.line >= 1, "1-based line numbers");
  } catch (const wc::Error& e) {
    wc::fuzz::CheckError(e, path);
  }
  return 0;
}
