// The "pre_tokenizer" of a Hugging Face tokenizer.json: how the text between added tokens is cut
// into the pieces the BPE model tokenizes one by one. Supported: Sequence, Split (String or Regex
// pattern, invert, behaviours Removed / Isolated / MergedWithPrevious / MergedWithNext /
// Contiguous), Punctuation, ByteLevel (add_prefix_space, use_regex), Digits (individual_digits),
// Whitespace, WhitespaceSplit, BertPreTokenizer and CharDelimiterSplit; any other type is refused
// by name. Each step cuts every piece the steps before it left, exactly as HF's
// PreTokenizedString::split does (empty pieces vanish); ByteLevel also maps each piece's bytes
// to GPT-2's alphabet, which the later steps then see.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace wc {

class HfPreTokenizer {
 public:
  // From the "pre_tokenizer" value (not null); `what` names it in errors.
  static std::unique_ptr<HfPreTokenizer> FromJson(const nlohmann::json& j, const std::string& what);
  virtual ~HfPreTokenizer() = default;
  // Replaces every piece of *pieces (valid UTF-8) by its sub-pieces, in order.
  virtual void Apply(std::vector<std::string>* pieces) const = 0;
};

}  // namespace wc
