// sentencepiece tokenizer from a tokenizer.model file (libsentencepiece; tokenization is never
// re-implemented here), and the byte string each piece contributes to streamed output.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace wc {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // Loads `path` (a sentencepiece model, at most 64 MB). Throws wc::Error naming it on failure.
  explicit SentencePieceTokenizer(const std::string& path);
  ~SentencePieceTokenizer() override;

  std::vector<int> Encode(const std::string& text) const override;
  // "▁" becomes ' ', a byte-fallback piece <0xAB> is that byte, control and unknown pieces add
  // nothing.
  std::string_view TokenBytes(int id) const override;
  int bos_id() const override;
  int eos_id() const override;
  int TokenId(const std::string& piece) const override;
  int piece_count() const override { return static_cast<int>(token_bytes_.size()); }
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::vector<std::string> token_bytes_;  // [piece_count]
};

}  // namespace wc
