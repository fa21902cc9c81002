// sentencepiece tokenizer from DIR/tokenizer.model (libsentencepiece; tokenization is never
// re-implemented here). Also the byte string each token contributes to streamed output.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace wc {

class Tokenizer {
 public:
  // Loads `path` (a sentencepiece model). Throws wc::Error naming it on failure.
  explicit Tokenizer(const std::string& path);
  ~Tokenizer();

  // Loads DIR/tokenizer.model; the error says the directory has none if it is missing.
  static std::unique_ptr<Tokenizer> FromModelDir(const std::string& model_dir);

  std::vector<int> Encode(const std::string& text) const;
  std::string Decode(const std::vector<int>& ids) const;

  // Raw bytes token `id` adds to a stream: "▁" becomes ' ', a byte-fallback piece <0xAB> is that
  // byte, control and unknown-to-the-tokenizer ids (model vocab larger than the tokenizer's) add
  // nothing. May be an incomplete UTF-8 sequence; TextStream assembles characters.
  const std::string& TokenBytes(int id) const;

  // The tokenizer's <s> and </s> ids, or -1 when it defines none.
  int bos_id() const;
  int eos_id() const;
  int piece_count() const { return static_cast<int>(token_bytes_.size()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::vector<std::string> token_bytes_;  // [piece_count]
  std::string empty_;
};

}  // namespace wc
