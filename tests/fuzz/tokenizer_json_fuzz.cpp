// A Hugging Face tokenizer.json (tokenizer/hf_tokenizer.h) parsed from the input, then used:
// encoding text with added tokens, whitespace, digits and invalid UTF-8, and every id's bytes.
#include <cstdint>
#include <string>
#include <string_view>

#include "tests/fuzz/fuzz_util.h"
#include "tokenizer/hf_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = "tokenizer.json";
  try {
    const wc::HfTokenizer tok(std::string_view(reinterpret_cast<const char*>(data), size), path);
    for (const char* text : {"Hello w\xC3\xB6rld, 12345 <s>  \t\n x", "\xFF\xC0\xAF end",
                             "<|endoftext|>a[MASK] b", ""}) {
      const std::vector<int> ids = tok.Encode(text);
      for (int id : ids) wc::fuzz::Require(id >= 0 && id < tok.piece_count(), "id out of range");
      (void)tok.Decode(ids);
    }
    for (int id = -1; id <= tok.piece_count() && id < 4096; ++id) (void)tok.TokenBytes(id);
  } catch (const wc::Error& e) {
    wc::fuzz::CheckError(e, path);
  }
  return 0;
}
