// A whole GGUF file: header, metadata keys, tensor infos, data (model/gguf/gguf_file.h), then, as
// a model: its config by its architecture's keys (gguf_config.h) and its tensors bound to that
// config's table, reordered where llama.cpp's converter reordered them (gguf_tensors.h); and its
// vocabulary (gguf_vocab.h) built into llama.cpp's tokenizer (tokenizer/gguf_tokenizer.h), which
// encodes and decodes a short text.
#include <cstdint>

#include "model/gguf/gguf_config.h"
#include "model/gguf/gguf_file.h"
#include "model/gguf/gguf_tensors.h"
#include "model/gguf/gguf_vocab.h"
#include "tests/fuzz/fuzz_util.h"
#include "tokenizer/gguf_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = "fuzz/model.gguf";
  try {
    const wc::GgufFile g(data, size, path);
    const wc::GgufContents& c = g.contents();
    wc::fuzz::Require(c.alignment > 0 && (c.alignment & (c.alignment - 1)) == 0, "alignment");
    wc::fuzz::Require(c.key_order.size() == c.metadata.size(), "every key once");
    for (const wc::GgufTensor& t : c.tensors) {
      wc::fuzz::Require(t.type != nullptr && t.ne.size() <= 4, "known type, at most 4 dims");
      wc::fuzz::Require(t.numel() >= 0 && t.numel() % t.type->block == 0, "whole blocks");
      wc::fuzz::RequireInside(data, size, t.data, t.n_bytes);
    }
    if (wc::HasGgufVocab(g)) {
      try {
        const wc::GgufTokenizer tok(wc::ReadGgufVocab(g));
        for (const bool special : {false, true}) {
          const std::vector<int> ids =
              tok.Encode("Hello <|endoftext|> w\xC3\xB6rld 12345\n\xFF", special, special);
          for (int id : ids) {
            wc::fuzz::Require(id >= 0 && id < tok.piece_count(), "ids inside the vocabulary");
            tok.TokenBytes(id);
          }
        }
      } catch (const wc::Error& e) {
        wc::fuzz::CheckError(e, path);
      }
    }
    const wc::ModelConfig config = wc::ConfigFromGguf(g);
    const wc::GgufTensors bound = wc::BindGgufTensors(g, config);
    for (const auto& [name, t] : bound.tensors) {
      wc::fuzz::Require(t.readable && t.n_bytes == static_cast<size_t>(t.numel()) *
                                                       static_cast<size_t>(wc::DTypeSize(t.dtype)),
                        "a bound tensor's bytes are its shape's");
      bool reordered = false;
      for (const auto& r : bound.reordered)
        reordered = reordered || (t.data == r.data() && t.n_bytes == r.size());
      if (!reordered) wc::fuzz::RequireInside(data, size, t.data, t.n_bytes);
    }
  } catch (const wc::Error& e) {
    wc::fuzz::CheckError(e, path);
  }
  return 0;
}
