// A GGUF file's vocabulary as plain data: its tokenizer.ggml.* keys (docs/gguf_tokenizer.md
// section 1), read and checked by model/gguf/gguf_vocab.h, made a tokenizer by
// tokenizer/gguf_tokenizer.h. Nothing here knows the file format; tests and fuzzers fill it too.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace wc {

// llama.cpp's token types (tokenizer.ggml.token_type; llama.h's llama_token_type).
enum class GgufTokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct GgufVocab {
  enum class Model {
    kSpm,  // tokenizer.ggml.model "llama": sentencepiece-style (scores, byte fallback)
    kBpe,  // "gpt2": byte-level BPE (merges, a pre-tokenizer named by `pre`)
  };
  // Where it came from, named in messages ("model.gguf").
  std::string source;
  Model model = Model::kSpm;
  // tokenizer.ggml.pre; empty when absent (llama.cpp then uses "default" for BPE).
  std::string pre;
  std::vector<std::string> tokens;  // [n_tokens], ids are indices
  std::vector<float> scores;        // [n_tokens], or empty when the file has none (all 0)
  std::vector<int32_t> types;       // [n_tokens] GgufTokenType values, or empty (all normal)
  std::vector<std::string> merges;  // BPE: "left right", rank = index
  // tokenizer.ggml.<name>_token_id, each in [0, n_tokens) when present.
  std::optional<int> bos_id, eos_id, eot_id, eom_id, unk_id, pad_id;
  std::optional<int> fim_pre_id, fim_suf_id, fim_mid_id, fim_pad_id, fim_rep_id, fim_sep_id;
  // tokenizer.ggml.add_bos_token, add_eos_token, add_space_prefix when present.
  std::optional<bool> add_bos, add_eos, add_space_prefix;
  // general.name (llama.cpp's hard-coded Phi-3 rstrip rule reads it).
  std::string general_name;
};

}  // namespace wc
