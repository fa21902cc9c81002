// A GGUF file's tokenizer.ggml.* keys read into the plain vocabulary tokenizer/gguf_tokenizer.h
// builds its tokenizer from (docs/gguf_tokenizer.md section 1: the keys, their types, llama.cpp
// b6673's reading of them).
#pragma once

#include "model/gguf/gguf_file.h"
#include "tokenizer/gguf_vocab.h"

namespace wc {

// Whether `g` has a vocabulary to read (the key tokenizer.ggml.model).
bool HasGgufVocab(const GgufFile& g);

// `g`'s vocabulary. Keys are checked with the types llama.cpp requires (strings, u32 ids, bools,
// an array of strings for tokens and merges, of f32 for scores, of i32 for token types), and more
// strictly where llama.cpp reads past an array or warns: scores and token_type as long as tokens,
// every *_token_id inside the tokens. Throws wc::Error, one line "FILE: key 'KEY' ..." naming the
// key and the problem, on: a missing tokenizer.ggml.model or tokens (or merges for "gpt2"), a
// tokenizer model wormchat does not build ("llama" and "gpt2" only), a wrong type, lengths that
// disagree, an id out of range, or an empty vocabulary.
GgufVocab ReadGgufVocab(const GgufFile& g);

}  // namespace wc
