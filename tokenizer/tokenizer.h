// What text input and output need of a tokenizer: text to ids, and the bytes each id adds to a
// stream. The kinds: SentencePieceTokenizer (DIR/tokenizer.model,
// tokenizer/sentencepiece_tokenizer.h), HfTokenizer (DIR/tokenizer.json), GgufTokenizer (a GGUF
// file's vocabulary, tokenizer/gguf_tokenizer.h) and IdsTokenizer (tokenizer/ids_tokenizer.h:
// "text" that is token ids written out, for `--ids`).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace wc {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // The tokenizer of a model directory: DIR/tokenizer.model (sentencepiece) if present, else
  // DIR/tokenizer.json (Hugging Face, tokenizer/hf_tokenizer.h). Throws wc::Error naming both
  // files when neither is there (and how to run without one), or naming the file that cannot be
  // read.
  static std::unique_ptr<Tokenizer> FromModelDir(const std::string& model_dir);

  // Throws wc::Error naming path() for text it cannot encode.
  virtual std::vector<int> Encode(const std::string& text) const = 0;
  // The concatenated TokenBytes of `ids`.
  std::string Decode(const std::vector<int>& ids) const;

  // Raw bytes token `id` adds to a stream; empty for ids that add nothing (control tokens, ids
  // past the tokenizer's pieces). May be an incomplete UTF-8 sequence; TextStream assembles
  // characters.
  virtual std::string_view TokenBytes(int id) const = 0;

  // The tokenizer's own BOS and EOS ids, or -1 when it defines none.
  virtual int bos_id() const = 0;
  virtual int eos_id() const = 0;
  // Whether the model's own runtime opens every prompt with bos_id(): a GGUF vocabulary's
  // add_bos_token as llama.cpp reads it (tokenizer/gguf_tokenizer.h). False for the others, whose
  // BOS the chat format decides.
  virtual bool adds_bos() const { return false; }
  // The id of the token spelled `piece` (as the tokenizer's own files write it, e.g. "<s>",
  // "<|endoftext|>"), or -1.
  virtual int TokenId(const std::string& piece) const = 0;
  // Ids it knows: [0, piece_count).
  virtual int piece_count() const = 0;
  // Where it came from, for messages (a file, or a description).
  virtual const std::string& path() const = 0;
};

}  // namespace wc
