// A Hugging Face tokenizer.json tokenizer of the byte-level BPE kind Falcon and GPT-2 use: added
// tokens (matched before anything else, with their lstrip / rstrip / single_word / normalized
// flags), normalizer, pre-tokenizer pipeline and BPE model, as HF's Tokenizer::encode runs them
// with add_special_tokens=False; and the decoder, token by token, for streamed output. Where
// HF's regex engine and PCRE2 differ, HF wins (tokenizer/hf_regex.h). Components it does not
// implement are refused by name, never approximated.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace wc {

class BpeModel;
class HfNormalizer;
class HfPreTokenizer;

class HfTokenizer final : public Tokenizer {
 public:
  // Largest tokenizer.json accepted (Falcon's is 2.7 MB; the largest real vocabularies ~40 MB).
  static constexpr int64_t kMaxFileBytes = int64_t{256} << 20;

  // Loads `path`. Throws wc::Error naming the file (and the key) when it cannot be read, is
  // larger than kMaxFileBytes, is not valid JSON, or holds an unsupported or invalid component.
  explicit HfTokenizer(const std::string& path);
  // From the file's text, named `path` in messages.
  HfTokenizer(std::string_view json_text, const std::string& path);
  ~HfTokenizer() override;

  // HF's encode(text, add_special_tokens=False). Invalid UTF-8 in `text` is first repaired as
  // String::from_utf8_lossy does (each maximal invalid subpart becomes U+FFFD).
  std::vector<int> Encode(const std::string& text) const override;
  // The decoder's bytes for one id (HF's decode of [id]); special added tokens add nothing.
  std::string_view TokenBytes(int id) const override;
  // From the post_processor (TemplateProcessing, RobertaProcessing, BertProcessing), else -1.
  int bos_id() const override { return bos_id_; }
  int eos_id() const override { return eos_id_; }
  int piece_count() const override { return static_cast<int>(token_bytes_.size()); }
  const std::string& path() const override { return path_; }

  // The id of added token or vocabulary token `content`, or -1.
  int TokenId(const std::string& content) const override;

 private:
  struct AddedToken {
    int id;
    std::string content;
    bool single_word, lstrip, rstrip, normalized, special;
  };
  // One stretch of the text: an added token's id, or text still to tokenize (id -1).
  struct Segment {
    std::string text;
    int id;
  };
  void Load(std::string_view json_text);
  void LoadAddedTokens(const nlohmann::json& j);
  void LoadDecoder(const nlohmann::json& j);
  void LoadPostProcessor(const nlohmann::json& j, const std::string& what);
  // HF's AddedVocabulary::find_matches over `text` with the tokens whose `normalized` flag is
  // `normalized`; appends the segments to *out.
  void SplitAddedTokens(const std::string& text, bool normalized, std::vector<Segment>* out) const;
  std::string DecodeToken(const std::string& token) const;

  std::string path_;
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<HfNormalizer> normalizer_;
  std::unique_ptr<HfPreTokenizer> pre_tokenizer_;
  std::vector<AddedToken> added_;
  // Indices into added_ by first byte of content, longest content first; [2] = normalized flag.
  std::vector<int> added_by_byte_[2][256];
  // The decoder: a chain of per-token steps.
  enum class DecoderKind { kByteLevel, kByteFallback, kReplace, kMetaspace };
  struct DecoderStep {
    DecoderKind kind;
    std::string from, to;  // kReplace: the literal and its replacement; kMetaspace: the char
  };
  std::vector<DecoderStep> decoder_;
  std::vector<std::string> token_bytes_;  // [piece_count]
  int bos_id_ = -1, eos_id_ = -1;
};

}  // namespace wc
