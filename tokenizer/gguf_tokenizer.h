// The tokenizer a GGUF file's vocabulary (tokenizer/gguf_vocab.h) describes, giving llama.cpp
// b6673's ids for a text (llama_tokenize; docs/gguf_tokenizer.md): "llama" vocabularies by its
// SPM session (tokenizer/llama_spm.h), "gpt2" ones by a pre-tokenizer (tokenizer/
// llama_pre_tokenizer.h) and its BPE session (tokenizer/llama_bpe.h); special and user-defined
// tokens written in the text cut out first (tokenizer/llama_special_partition.h).
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/gguf_vocab.h"
#include "tokenizer/llama_bpe.h"
#include "tokenizer/llama_pre_tokenizer.h"
#include "tokenizer/llama_special_partition.h"
#include "tokenizer/tokenizer.h"

namespace wc {

// The special-token roles llama.cpp b6673's vocabulary loader (llama-vocab.cpp load) finds in a
// GGUF vocabulary beside the ids its keys name: EOT, EOM and the FIM tokens by their texts where
// no key names them, and the end-of-generation (EOG) set - every id that ends generation as EOS
// does. FindGgufRoles gives them without building a tokenizer, so GgufTokenizer and the model's
// config (model/gguf/gguf_config.h: ModelConfig::end_token_ids) find the same ids.
struct GgufRoles {
  int eos = -1;  // the vocabulary's EOS (its key, else the model's default 2 SPM / 11 BPE), or -1
  int eot = -1, eom = -1;
  int fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
  // Ids llama.cpp makes control tokens because it found them by their text (a role's token where
  // the file names no id, every EOG text), ascending.
  std::vector<int> control;
  // Ids whose text makes them user-defined: gpt-oss's <|channel|>, <|message|>, <|start|>,
  // <|constrain|> (applied after `control`).
  std::vector<int> user_defined;
  // gpt-oss's <|end|> when <|return|> and <|call|> are EOG too: taken out of the EOG set and made
  // user-defined (applied last); -1 otherwise.
  int demoted_end = -1;
  // End of generation: EOS, EOT, EOM, FIM pad/repo/sep, every token whose text is an EOG text,
  // ascending, each once.
  std::vector<int> eog;
};

// The roles of `v`'s tokens (v.tokens as the file has them; ids the keys give are taken as they
// are: model/gguf/gguf_vocab.h checked them against the tokens). Where several tokens have a
// role's text, the lowest id (llama.cpp takes the first in its hash order). Never throws.
GgufRoles FindGgufRoles(const GgufVocab& v);

class GgufTokenizer final : public Tokenizer {
 public:
  // Builds the tokenizer as llama.cpp's vocabulary loader would: the model's and the pre type's
  // defaults (BOS/EOS ids, add_bos, add_space_prefix, ignore_merges), then the keys; token types
  // rewritten by text as llama.cpp rewrites them (EOT/EOG/FIM texts become control tokens, ...).
  // Throws wc::Error, one line naming vocab.source and the key, for: a pre-tokenizer llama.cpp
  // does not know or wormchat does not build, duplicate token texts, scores or types of another
  // length than the tokens, a BOS or EOS id the vocabulary needs that is outside it, a byte token
  // that is not "<0xNN>", or a Phi-3 vocabulary without the tokens its rules name.
  explicit GgufTokenizer(GgufVocab vocab);

  // llama_tokenize(text, add_special = false, parse_special = true): what wormchat's framing
  // encodes (BOS added by the caller where the model adds one: adds_bos()).
  std::vector<int> Encode(const std::string& text) const override;
  // llama_tokenize(text, add_special, parse_special): BOS first if add_special and the vocabulary
  // adds one, EOS last likewise; special tokens matched when parse_special (user-defined ones
  // always). Throws wc::Error naming the source where llama.cpp aborts (SPM bytes without a token,
  // a code point past U+10FFFF in BPE text).
  std::vector<int> Encode(std::string_view text, bool add_special, bool parse_special) const;

  // llama.cpp's token_to_piece without special tokens: control and unknown tokens add nothing,
  // user-defined ones their text, SPM pieces with U+2581 as a space and <0xNN> as the byte, BPE
  // pieces through the byte-level alphabet.
  std::string_view TokenBytes(int id) const override;
  // llama.cpp's piece with special tokens (control tokens' text): what llama-tokenize prints.
  std::string_view Piece(int id) const;
  int bos_id() const override { return bos_id_; }
  int eos_id() const override { return eos_id_; }
  int eot_id() const { return eot_id_; }
  // llama.cpp's end-of-generation ids (EOS, EOT, EOM, the EOG texts, ...), ascending.
  const std::vector<int>& eog_ids() const { return eog_ids_; }
  bool adds_bos() const override { return add_bos_; }
  bool adds_eos() const { return add_eos_; }
  int TokenId(const std::string& piece) const override;
  int piece_count() const override { return static_cast<int>(texts_.size()); }
  const std::string& path() const override { return source_; }
  // llama.cpp's attribute bits of each token (LLAMA_TOKEN_ATTR_*), after the rewrites.
  uint32_t attr(int id) const { return attrs_[static_cast<size_t>(id)]; }

 private:
  void EncodeText(std::string_view text, bool prefix_space, std::vector<int>* out) const;

  std::string source_;
  GgufVocab::Model model_;
  LlamaPre pre_;
  std::vector<std::string> texts_;  // [n_tokens], empty ones as "[EMPTY_i]"
  std::vector<float> scores_;       // [n_tokens]
  std::vector<uint32_t> attrs_;     // [n_tokens]
  std::unordered_map<std::string, int> ids_;
  std::unordered_map<std::string, int> ranks_;  // BPE
  std::vector<LlamaSpecialToken> specials_;     // longest first
  std::vector<std::string> pieces_;             // [n_tokens] with special tokens' text
  std::vector<std::string> bytes_;              // [n_tokens] TokenBytes
  int bos_id_ = -1, eos_id_ = -1, eot_id_ = -1;
  std::vector<int> eog_ids_;
  bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = false;
};

}  // namespace wc
