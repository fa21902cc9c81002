// llama.cpp b6673's BPE session (llm_tokenizer_bpe_session; docs/gguf_tokenizer.md section 4):
// each pre-tokenized word merged by the ranks of tokenizer.ggml.merges.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace wc {

// Merge ranks: "left right" -> the index of its first occurrence in tokenizer.ggml.merges. A
// merge string is cut at its first space past the first byte (llama.cpp's reading); one without
// such a space is the pair ("", ""), which no word asks for.
std::unordered_map<std::string, int> LlamaBpeRanks(const std::vector<std::string>& merges);

struct LlamaBpeVocab {
  const std::unordered_map<std::string, int>* ids = nullptr;    // token text -> id
  const std::unordered_map<std::string, int>* ranks = nullptr;  // LlamaBpeRanks
  bool ignore_merges = false;  // a word that is a token is taken whole
};

// Appends the ids of byte-level `word` to *out: one symbol per char, the adjacent pair of lowest
// rank merged first (leftmost on ties; the merged text need not be a token), then each symbol's
// token, or, for one that is none, the one-byte tokens of its bytes (bytes without one are
// dropped, as llama.cpp drops them).
void LlamaBpeEncodeWord(const LlamaBpeVocab& vocab, std::string_view word, std::vector<int>* out);

}  // namespace wc
