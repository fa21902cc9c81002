// llama.cpp b6673's SPM session (llm_tokenizer_spm_session; docs/gguf_tokenizer.md section 3.2):
// one text piece, its spaces already U+2581, merged pair by pair by the vocabulary's scores.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace wc {

struct LlamaSpmVocab {
  const std::unordered_map<std::string, int>* ids = nullptr;  // token text -> id
  const std::vector<float>* scores = nullptr;                 // [n_tokens]
  std::string source;                                         // named in errors
};

// Appends the ids of `text` to *out: symbols by UTF-8 lead byte, adjacent pairs that are tokens
// merged highest score first (leftmost on ties), and symbols that are no token written byte by
// byte as "<0xNN>" tokens, else one-byte tokens. Throws wc::Error naming the source for a byte
// with neither (llama.cpp aborts there).
void LlamaSpmEncode(const LlamaSpmVocab& vocab, std::string_view text, std::vector<int>* out);

// The id of byte `b` as SPM writes it: "<0xNN>" (upper-case hex), else the one-byte token; -1 if
// neither.
int LlamaSpmByteToken(const std::unordered_map<std::string, int>& ids, unsigned char b);

}  // namespace wc
