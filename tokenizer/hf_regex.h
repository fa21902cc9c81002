// A regular expression with the semantics Hugging Face tokenizers gives its patterns (Oniguruma,
// Ruby syntax, Unicode), run by PCRE2 (UTF + UCP, JIT-compiled where the platform allows):
//   - \w \W \s \S mean what they mean to Oniguruma and Rust's regex crate (\w: Alphabetic, marks,
//     decimal digits, connector punctuation, ZWNJ/ZWJ; \s: the White_Space property), not PCRE2's
//     narrower UCP classes (which, e.g., leave combining marks out of \w);
//   - ^ and $ match at line boundaries (Ruby's default);
//   - FindAll enumerates matches as the onig crate's find_iter does (an empty match right after
//     the previous match is skipped by one char).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace wc {

class HfRegex {
 public:
  // Compiles `pattern`; `what` names it in errors ("tokenizer.json: pre_tokenizer...pattern").
  // Throws wc::Error for a pattern PCRE2 rejects or one using \W or \S inside a character class.
  HfRegex(const std::string& pattern, const std::string& what);
  // A pattern matching `literal` exactly.
  static HfRegex Literal(const std::string& literal, const std::string& what);
  ~HfRegex();
  HfRegex(HfRegex&&) noexcept;
  HfRegex& operator=(HfRegex&&) noexcept;

  // [start, end) byte ranges of the successive matches in `text` (valid UTF-8).
  std::vector<std::pair<size_t, size_t>> FindAll(std::string_view text) const;

  // The PCRE2 pattern `pattern` became (for tests and messages).
  const std::string& translated() const { return translated_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string translated_;
};

// The Oniguruma pattern rewritten for PCRE2 (see HfRegex). Throws wc::Error naming `what`.
std::string TranslateOnigPattern(const std::string& pattern, const std::string& what);

}  // namespace wc
