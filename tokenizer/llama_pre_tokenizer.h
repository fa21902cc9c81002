// llama.cpp b6673's BPE pre-tokenizers (llm_tokenizer_bpe's regex lists and unicode.cpp's
// unicode_regex_split; docs/gguf_tokenizer.md section 5): the text cut into words by each of a
// pre type's expressions in turn, every piece re-split on its own, then each word's bytes in
// GPT-2's byte-level alphabet. The expressions are run as llama.cpp runs them: its hand-written
// GPT-2 and Llama-3 splitters, and std::regex on its "collapsed" text (one byte per code point,
// the category standing for non-ASCII ones) for the rest, which here are class runs.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wc {

enum class LlamaPreType {
  kDefault,    // "default", or tokenizer.ggml.pre absent
  kLlama3,     // "llama3", "llama-bpe", "falcon3", ...: the Llama-3 splitter
  kFalcon,     // "falcon": punctuation runs, the GPT-2 splitter, digit triples
  kGpt2,       // "gpt-2", "phi-2", "mpt", "olmo", ...: the GPT-2 splitter
  kStarcoder,  // "starcoder", "refact", ...: each digit alone, then the GPT-2 splitter
};

struct LlamaPre {
  LlamaPreType type = LlamaPreType::kDefault;
  bool ignore_merges = false;  // a word that is a token is taken whole (LLAMA3)
  bool add_bos = false;        // the pre type's BOS default (LLAMA3), before add_bos_token
};

// What llama.cpp makes of `name` (tokenizer.ggml.pre; empty: absent). nullopt with *why set to
// "unknown" for a name llama.cpp does not know, or "not built" for one whose expressions wormchat
// does not run (qwen2, deepseek-*, ...).
std::optional<LlamaPre> FindLlamaPre(const std::string& name, std::string* why);
// The names wormchat builds, for messages.
std::string LlamaPreNames();

// `text` split into byte-level words (each one or more chars of GPT-2's alphabet). Invalid UTF-8
// bytes are U+FFFD first, as llama.cpp makes them. Throws wc::Error for a sequence that decodes
// past U+10FFFF (llama.cpp throws too).
std::vector<std::string> LlamaPreTokenize(LlamaPreType type, std::string_view text);

}  // namespace wc
