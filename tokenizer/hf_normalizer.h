// The "normalizer" of a Hugging Face tokenizer.json: null, or one of Sequence, NFC, NFD, NFKC,
// NFKD, Lowercase, Strip, StripAccents, Prepend and Replace, applied to the text between added
// tokens before pre-tokenization. Any other type is refused by name.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/hf_regex.h"

namespace wc {

class HfNormalizer {
 public:
  // From the "normalizer" value (not null); `what` names it in errors. Throws wc::Error for an
  // unsupported type or a missing / mistyped key.
  static std::unique_ptr<HfNormalizer> FromJson(const nlohmann::json& j, const std::string& what);
  virtual ~HfNormalizer() = default;
  // `s` (valid UTF-8) normalized in place.
  virtual void Apply(std::string* s) const = 0;
};

// A tokenizer.json "pattern" object, {"String": "..."} (matched literally) or {"Regex": "..."}.
// Throws wc::Error naming `what` for anything else or an invalid regex.
HfRegex PatternFromJson(const nlohmann::json& j, const std::string& what);

}  // namespace wc
