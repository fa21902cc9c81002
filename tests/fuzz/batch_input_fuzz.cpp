// A `wormchat batch` input file (app/batch/batch_input.h): format detection and both parsers. They
// never throw for the input's content: a bad line comes back with a one-line error naming it.
#include <cstdint>
#include <string>

#include "app/batch/batch_input.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)wc::DetectBatchFormat(text, wc::BatchFormat::kAuto);
  for (wc::BatchFormat format : {wc::BatchFormat::kJsonl, wc::BatchFormat::kText}) {
    for (const wc::BatchLine& b : wc::ParseBatchInput(text, format)) {
      wc::fuzz::Require(b.line >= 1, "1-based line numbers");
      if (b.error.empty()) continue;
      wc::fuzz::Require(b.error.find('\n') == std::string::npos, "one-line errors");
      wc::fuzz::Require(b.error.rfind("line " + std::to_string(b.line) + ": ", 0) == 0,
                        "errors name their line");
    }
  }
  return 0;
}
