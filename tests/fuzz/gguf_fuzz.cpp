// A whole GGUF file: header, metadata keys, tensor infos, data (model/gguf/gguf_file.h).
#include <cstdint>

#include "model/gguf/gguf_file.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = "fuzz/model.gguf";
  try {
    const wc::GgufContents c = wc::ParseGguf(data, size, path);
    wc::fuzz::Require(c.alignment > 0 && (c.alignment & (c.alignment - 1)) == 0, "alignment");
    wc::fuzz::Require(c.key_order.size() == c.metadata.size(), "every key once");
    for (const wc::GgufTensor& t : c.tensors) {
      wc::fuzz::Require(t.type != nullptr && t.ne.size() <= 4, "known type, at most 4 dims");
      wc::fuzz::Require(t.numel() >= 0 && t.numel() % t.type->block == 0, "whole blocks");
      wc::fuzz::RequireInside(data, size, t.data, t.n_bytes);
    }
  } catch (const wc::Error& e) {
    wc::fuzz::CheckError(e, path);
  }
  return 0;
}
