// llama.cpp b6673's tokenizer_st_partition (docs/gguf_tokenizer.md section 6): the special and
// user-defined tokens written in a text cut out of it before the text's pieces are tokenized.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace wc {

// A token matched wherever its exact bytes occur.
struct LlamaSpecialToken {
  int id = 0;
  std::string text;                 // never empty
  bool control_or_unknown = false;  // skipped when special tokens are not parsed
  bool lstrip = false;              // ASCII whitespace before a match is dropped
  bool rstrip = false;              // ... and after it
};

// A piece of the text: a matched token (`id` >= 0) or raw text [offset, offset + length).
struct LlamaFragment {
  int id = -1;
  size_t offset = 0, length = 0;
};

// `text` cut by `tokens` in their order (llama.cpp's: byte length descending): each token in
// turn splits every raw fragment left at each of its leftmost non-overlapping occurrences. With
// `parse_special` false only the user-defined ones (control_or_unknown false) are matched.
// Raw fragments are never empty.
std::vector<LlamaFragment> PartitionSpecialTokens(std::string_view text,
                                                  const std::vector<LlamaSpecialToken>& tokens,
                                                  bool parse_special);

}  // namespace wc
