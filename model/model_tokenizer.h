// The tokenizer of a model, wherever the model keeps it: a GGUF file's tokenizer.ggml.* keys
// (model/gguf/gguf_vocab.h into tokenizer/gguf_tokenizer.h, llama.cpp's ids), or a checkpoint
// directory's tokenizer.model / tokenizer.json (Tokenizer::FromModelDir). Every command that
// loads a model's tokenizer comes here.
#pragma once

#include <memory>
#include <string>

#include "tokenizer/tokenizer.h"

namespace wc {

// `path` a GGUF file (IsGgufModel) or a model directory. Throws wc::Error: for a GGUF file
// without tokenizer keys, naming it and how to run on ids; for bad keys, naming the key
// (ReadGgufVocab, GgufTokenizer); for a directory as Tokenizer::FromModelDir does.
std::unique_ptr<Tokenizer> LoadModelTokenizer(const std::string& path);

}  // namespace wc
