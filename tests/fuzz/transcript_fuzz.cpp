// A transcript (serving/transcript.h). What parses formats to text that parses back to the same.
#include <cstdint>
#include <string>

#include "serving/transcript.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = "fuzz/chat.transcript";
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string formatted;
  try {
    formatted = wc::FormatTranscript(wc::ParseTranscript(text, path));
  } catch (const wc::Error& e) {
    wc::fuzz::CheckError(e, path);
    return 0;
  }
  try {
    const std::string again = wc::FormatTranscript(wc::ParseTranscript(formatted, path));
    wc::fuzz::Require(again == formatted, "a formatted transcript reads back the same");
  } catch (const wc::Error& e) {
    std::fprintf(stderr, "a formatted transcript does not parse: %s\n", e.what());
    std::abort();
  }
  return 0;
}
