#include "tokenizer/hf_pre_tokenizer.h"

#include <functional>
#include <optional>
#include <utility>

#include "tokenizer/byte_level.h"
#include "tokenizer/hf_normalizer.h"
#include "tokenizer/hf_regex.h"
#include "tokenizer/unicode.h"
#include "util/error.h"
#include "util/json_file.h"

namespace wc {
namespace {

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Behavior BehaviorFromJson(const nlohmann::json& j, const std::string& what, Behavior fallback) {
  const auto name = JsonFind<std::string>(j, "behavior", what);
  if (!name) return fallback;
  if (*name == "Removed") return Behavior::kRemoved;
  if (*name == "Isolated") return Behavior::kIsolated;
  if (*name == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (*name == "MergedWithNext") return Behavior::kMergedWithNext;
  if (*name == "Contiguous") return Behavior::kContiguous;
  throw Error(Cat(what, ": key 'behavior' \"", Printable(*name, 40),
                  "\" is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, "
                  "Contiguous"));
}

// [begin, end) byte ranges covering a piece, each flagged as a match of the pattern or not (HF's
// Pattern::find_matches).
using Matches = std::vector<std::pair<std::pair<size_t, size_t>, bool>>;

Matches RegexMatches(const HfRegex& re, const std::string& s) {
  if (s.empty()) return {{{0, 0}, false}};
  Matches out;
  size_t prev = 0;
  for (const auto& [start, end] : re.FindAll(s)) {
    if (prev != start) out.push_back({{prev, start}, false});
    out.push_back({{start, end}, true});
    prev = end;
  }
  if (prev != s.size()) out.push_back({{prev, s.size()}, false});
  return out;
}

Matches CharMatches(const std::function<bool(char32_t)>& is_match, const std::string& s) {
  if (s.empty()) return {{{0, 0}, false}};
  Matches out;
  size_t last = 0;
  for (size_t p = 0; p < s.size();) {
    const size_t start = p;
    if (!is_match(unicode::Next(s, &p))) continue;
    if (last < start) out.push_back({{last, start}, false});
    out.push_back({{start, p}, true});
    last = p;
  }
  if (s.size() > last) out.push_back({{last, s.size()}, false});
  return out;
}

// HF's NormalizedString::split: the pieces `matches` cut `s` into under `behavior`, appended to
// *out (empty ones dropped, as PreTokenizedString::split drops them).
void SplitPiece(const std::string& s, Matches matches, Behavior behavior, bool invert,
                std::vector<std::string>* out) {
  if (invert)
    for (auto& m : matches) m.second = !m.second;
  using Range = std::pair<std::pair<size_t, size_t>, bool>;  // offsets, remove
  std::vector<Range> splits;
  switch (behavior) {
    case Behavior::kIsolated:
      for (const auto& m : matches) splits.push_back({m.first, false});
      break;
    case Behavior::kRemoved:
      splits = matches;
      break;
    case Behavior::kContiguous: {
      bool previous = false;
      for (const auto& [range, is_match] : matches) {
        if (is_match == previous && !splits.empty())
          splits.back().first.second = range.second;
        else
          splits.push_back({range, false});
        previous = is_match;
      }
      break;
    }
    case Behavior::kMergedWithPrevious: {
      bool previous = false;
      for (const auto& [range, is_match] : matches) {
        if (is_match && !previous && !splits.empty())
          splits.back().first.second = range.second;
        else
          splits.push_back({range, false});
        previous = is_match;
      }
      break;
    }
    case Behavior::kMergedWithNext: {
      bool previous = false;
      for (auto it = matches.rbegin(); it != matches.rend(); ++it) {
        const auto& [range, is_match] = *it;
        if (is_match && !previous && !splits.empty())
          splits.back().first.first = range.first;
        else
          splits.push_back({range, false});
        previous = is_match;
      }
      std::reverse(splits.begin(), splits.end());
      break;
    }
  }
  for (const auto& [range, remove] : splits)
    if (!remove && range.second > range.first)
      out->push_back(s.substr(range.first, range.second - range.first));
}

class SequencePre final : public HfPreTokenizer {
 public:
  explicit SequencePre(std::vector<std::unique_ptr<HfPreTokenizer>> parts)
      : parts_(std::move(parts)) {}
  void Apply(std::vector<std::string>* pieces) const override {
    for (const auto& p : parts_) p->Apply(pieces);
  }

 private:
  std::vector<std::unique_ptr<HfPreTokenizer>> parts_;
};

// Every piece cut by a regex or a char predicate under one behaviour.
class SplitPre final : public HfPreTokenizer {
 public:
  SplitPre(std::optional<HfRegex> re, std::function<bool(char32_t)> pred, Behavior behavior,
           bool invert)
      : re_(std::move(re)), pred_(std::move(pred)), behavior_(behavior), invert_(invert) {}
  void Apply(std::vector<std::string>* pieces) const override {
    std::vector<std::string> out;
    out.reserve(pieces->size());
    for (const std::string& s : *pieces)
      SplitPiece(s, re_ ? RegexMatches(*re_, s) : CharMatches(pred_, s), behavior_, invert_, &out);
    *pieces = std::move(out);
  }

 private:
  std::optional<HfRegex> re_;
  std::function<bool(char32_t)> pred_;
  Behavior behavior_;
  bool invert_;
};

// GPT-2's pattern, which HF's ByteLevel uses when use_regex is set.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevelPre final : public HfPreTokenizer {
 public:
  ByteLevelPre(bool add_prefix_space, bool use_regex, const std::string& what)
      : add_prefix_space_(add_prefix_space) {
    if (use_regex) re_.emplace(kGpt2Pattern, what);
  }
  void Apply(std::vector<std::string>* pieces) const override {
    std::vector<std::string> out;
    out.reserve(pieces->size() * 2);
    for (std::string s : *pieces) {
      if (add_prefix_space_ && (s.empty() || s[0] != ' ')) s.insert(0, " ");
      const size_t first = out.size();
      if (re_)
        SplitPiece(s, RegexMatches(*re_, s), Behavior::kIsolated, false, &out);
      else if (!s.empty())
        out.push_back(std::move(s));
      for (size_t i = first; i < out.size(); ++i) out[i] = byte_level::Encode(out[i]);
    }
    *pieces = std::move(out);
  }

 private:
  bool add_prefix_space_;
  std::optional<HfRegex> re_;
};

}  // namespace

std::unique_ptr<HfPreTokenizer> HfPreTokenizer::FromJson(const nlohmann::json& j,
                                                         const std::string& what) {
  if (!j.is_object()) throw Error(Cat(what, " must be an object or null"));
  const std::string type = JsonGet<std::string>(j, "type", what);
  const std::string here = Cat(what, " (", type, ")");
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array())
      throw Error(Cat(here, ": key 'pretokenizers' must be an array"));
    std::vector<std::unique_ptr<HfPreTokenizer>> parts;
    for (size_t i = 0; i < j["pretokenizers"].size(); ++i)
      parts.push_back(FromJson(j["pretokenizers"][i], Cat(what, ".pretokenizers[", i, "]")));
    return std::make_unique<SequencePre>(std::move(parts));
  }
  if (type == "Split") {
    if (!j.contains("pattern")) throw Error(Cat(here, ": key 'pattern' is missing"));
    const std::string pattern_what = here + ": pattern";
    const nlohmann::json& pat = j["pattern"];
    // An empty String pattern matches nothing: the piece stays whole.
    if (pat.is_object() && pat.contains("String") && pat["String"].is_string() &&
        pat["String"].get_ref<const std::string&>().empty())
      return std::make_unique<SplitPre>(
          std::nullopt, [](char32_t) { return false; },
          BehaviorFromJson(j, here, Behavior::kIsolated), false);
    if (!j.contains("behavior")) throw Error(Cat(here, ": key 'behavior' is missing"));
    return std::make_unique<SplitPre>(PatternFromJson(pat, pattern_what), nullptr,
                                      BehaviorFromJson(j, here, Behavior::kIsolated),
                                      JsonFind<bool>(j, "invert", here).value_or(false));
  }
  if (type == "Punctuation")
    return std::make_unique<SplitPre>(std::nullopt, unicode::IsPunctuation,
                                      BehaviorFromJson(j, here, Behavior::kIsolated), false);
  if (type == "Digits") {
    const bool individual = JsonFind<bool>(j, "individual_digits", here).value_or(false);
    return std::make_unique<SplitPre>(std::nullopt, unicode::IsNumeric,
                                      individual ? Behavior::kIsolated : Behavior::kContiguous,
                                      false);
  }
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelPre>(
        JsonFind<bool>(j, "add_prefix_space", here).value_or(true),
        JsonFind<bool>(j, "use_regex", here).value_or(true), here);
  if (type == "Whitespace")
    return std::make_unique<SplitPre>(HfRegex(R"(\w+|[^\w\s]+)", here), nullptr, Behavior::kRemoved,
                                      true);
  if (type == "WhitespaceSplit")
    return std::make_unique<SplitPre>(std::nullopt, unicode::IsWhitespace, Behavior::kRemoved,
                                      false);
  if (type == "BertPreTokenizer") {
    std::vector<std::unique_ptr<HfPreTokenizer>> parts;
    parts.push_back(
        std::make_unique<SplitPre>(std::nullopt, unicode::IsWhitespace, Behavior::kRemoved, false));
    parts.push_back(std::make_unique<SplitPre>(std::nullopt, unicode::IsPunctuation,
                                               Behavior::kIsolated, false));
    return std::make_unique<SequencePre>(std::move(parts));
  }
  if (type == "CharDelimiterSplit") {
    const std::string d = JsonGet<std::string>(j, "delimiter", here);
    size_t p = 0;
    if (d.empty() || !unicode::IsValidUtf8(d) || (unicode::Next(d, &p), p != d.size()))
      throw Error(Cat(here, ": key 'delimiter' must be one char"));
    p = 0;
    const char32_t c = unicode::Next(d, &p);
    return std::make_unique<SplitPre>(
        std::nullopt, [c](char32_t x) { return x == c; }, Behavior::kRemoved, false);
  }
  throw Error(Cat(what, ": pre_tokenizer type \"", Printable(type, 40),
                  "\" is not supported (supported: Sequence, Split, Punctuation, ByteLevel, "
                  "Digits, Whitespace, WhitespaceSplit, BertPreTokenizer, CharDelimiterSplit)"));
}

}  // namespace wc
