#include "tokenizer/hf_normalizer.h"

#include "tokenizer/unicode.h"
#include "util/error.h"
#include "util/json_file.h"

namespace wc {
namespace {

class SequenceNormalizer final : public HfNormalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<HfNormalizer>> parts)
      : parts_(std::move(parts)) {}
  void Apply(std::string* s) const override {
    for (const auto& p : parts_) p->Apply(s);
  }

 private:
  std::vector<std::unique_ptr<HfNormalizer>> parts_;
};

class FormNormalizer final : public HfNormalizer {
 public:
  explicit FormNormalizer(unicode::Form form) : form_(form) {}
  void Apply(std::string* s) const override { *s = unicode::Normalize(*s, form_); }

 private:
  unicode::Form form_;
};

class LowercaseNormalizer final : public HfNormalizer {
 public:
  void Apply(std::string* s) const override { *s = unicode::Lowercase(*s); }
};

class StripNormalizer final : public HfNormalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void Apply(std::string* s) const override {
    size_t begin = 0, end = s->size();
    if (left_) {
      for (size_t p = 0; p < end;) {
        if (!unicode::IsWhitespace(unicode::Next(*s, &p))) break;
        begin = p;
      }
    }
    if (right_) {
      // Walk back char by char: a char starts at a byte that is not a continuation byte.
      while (end > begin) {
        const size_t start = unicode::PrevCharStart(*s, end);
        size_t p = start;
        if (!unicode::IsWhitespace(unicode::Next(*s, &p))) break;
        end = start;
      }
    }
    *s = s->substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class StripAccentsNormalizer final : public HfNormalizer {
 public:
  void Apply(std::string* s) const override {
    std::string out;
    out.reserve(s->size());
    for (size_t p = 0; p < s->size();) {
      const size_t start = p;
      if (!unicode::IsMark(unicode::Next(*s, &p))) out.append(*s, start, p - start);
    }
    *s = std::move(out);
  }
};

class PrependNormalizer final : public HfNormalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void Apply(std::string* s) const override {
    if (!s->empty()) s->insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class ReplaceNormalizer final : public HfNormalizer {
 public:
  ReplaceNormalizer(HfRegex re, std::string content)
      : re_(std::move(re)), content_(std::move(content)) {}
  void Apply(std::string* s) const override {
    std::string out;
    size_t prev = 0;
    for (const auto& [start, end] : re_.FindAll(*s)) {
      out.append(*s, prev, start - prev);
      out += content_;
      prev = end;
    }
    out.append(*s, prev, std::string::npos);
    *s = std::move(out);
  }

 private:
  HfRegex re_;
  std::string content_;
};

}  // namespace

// A "pattern" object: {"String": "..."} or {"Regex": "..."}.
HfRegex PatternFromJson(const nlohmann::json& j, const std::string& what) {
  if (j.is_object() && j.size() == 1) {
    if (j.contains("String"))
      return HfRegex::Literal(JsonAs<std::string>(j["String"], what + ".String"), what);
    if (j.contains("Regex")) return HfRegex(JsonAs<std::string>(j["Regex"], what + ".Regex"), what);
  }
  throw Error(Cat(what, " must be {\"String\": ...} or {\"Regex\": ...}, got ", JsonSnippet(j)));
}

std::unique_ptr<HfNormalizer> HfNormalizer::FromJson(const nlohmann::json& j,
                                                     const std::string& what) {
  if (!j.is_object()) throw Error(Cat(what, " must be an object or null"));
  const std::string type = JsonGet<std::string>(j, "type", what);
  const std::string here = Cat(what, " (", type, ")");
  if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array())
      throw Error(Cat(here, ": key 'normalizers' must be an array"));
    std::vector<std::unique_ptr<HfNormalizer>> parts;
    for (size_t i = 0; i < j["normalizers"].size(); ++i)
      parts.push_back(FromJson(j["normalizers"][i], Cat(what, ".normalizers[", i, "]")));
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  if (type == "NFC") return std::make_unique<FormNormalizer>(unicode::Form::kNFC);
  if (type == "NFD") return std::make_unique<FormNormalizer>(unicode::Form::kNFD);
  if (type == "NFKC") return std::make_unique<FormNormalizer>(unicode::Form::kNFKC);
  if (type == "NFKD") return std::make_unique<FormNormalizer>(unicode::Form::kNFKD);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "StripAccents") return std::make_unique<StripAccentsNormalizer>();
  if (type == "Strip")
    return std::make_unique<StripNormalizer>(JsonFind<bool>(j, "strip_left", here).value_or(true),
                                             JsonFind<bool>(j, "strip_right", here).value_or(true));
  if (type == "Prepend")
    return std::make_unique<PrependNormalizer>(JsonGet<std::string>(j, "prepend", here));
  if (type == "Replace") {
    if (!j.contains("pattern")) throw Error(Cat(here, ": key 'pattern' is missing"));
    return std::make_unique<ReplaceNormalizer>(PatternFromJson(j["pattern"], here + ": pattern"),
                                               JsonGet<std::string>(j, "content", here));
  }
  throw Error(Cat(what, ": normalizer type \"", Printable(type, 40),
                  "\" is not supported (supported: Sequence, NFC, NFD, NFKC, NFKD, Lowercase, "
                  "Strip, StripAccents, Prepend, Replace)"));
}

}  // namespace wc
