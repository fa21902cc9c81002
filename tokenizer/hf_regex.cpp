#include "tokenizer/hf_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/unicode.h"
#include "util/error.h"
#include "util/json_file.h"

namespace wc {
namespace {

// Oniguruma's and Rust regex's \w (UTS #18 word characters) and \s (White_Space), as the bodies of
// PCRE2 character classes.
constexpr const char* kWordBody = R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D})";
constexpr const char* kSpaceBody =
    R"(\t\n\x{0B}\f\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

std::string PcreMessage(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

std::string TranslateOnigPattern(const std::string& pattern, const std::string& what) {
  std::string out;
  out.reserve(pattern.size() + 32);
  bool in_class = false;
  bool class_start = false;  // just after '[' or '[^': a ']' here is literal
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char ch = pattern[i];
    if (ch == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[i + 1];
      ++i;
      class_start = false;
      if (e == 'w' || e == 's') {
        const char* body = e == 'w' ? kWordBody : kSpaceBody;
        out += in_class ? std::string(body) : Cat("[", body, "]");
        continue;
      }
      if (e == 'W' || e == 'S') {
        if (in_class)
          throw Error(Cat(what, ": \\", e, " inside a character class is not supported (pattern \"",
                          Printable(pattern, 60), "\")"));
        out += Cat("[^", e == 'W' ? kWordBody : kSpaceBody, "]");
        continue;
      }
      out += ch;
      out += e;
      continue;
    }
    if (in_class) {
      if (ch == '^' && class_start && out.back() == '[') {
        out += ch;
        continue;
      }
      if (ch == ']' && !class_start) in_class = false;
      if (ch == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {  // [:alpha:]
        const size_t close = pattern.find(":]", i + 2);
        if (close != std::string::npos) {
          out.append(pattern, i, close + 2 - i);
          i = close + 1;
          class_start = false;
          continue;
        }
      }
      class_start = false;
      out += ch;
      continue;
    }
    if (ch == '[') {
      in_class = true;
      class_start = true;
    }
    out += ch;
  }
  return out;
}

struct HfRegex::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Impl() { pcre2_code_free(code); }
};

HfRegex::HfRegex(const std::string& pattern, const std::string& what)
    : impl_(std::make_unique<Impl>()), translated_(TranslateOnigPattern(pattern, what)) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated_.data()), translated_.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &err, &offset, nullptr);
  if (impl_->code == nullptr)
    throw Error(Cat(what, ": invalid regex \"", Printable(pattern, 60), "\": ", PcreMessage(err),
                    " (at offset ", offset, " of the translated pattern)"));
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

HfRegex HfRegex::Literal(const std::string& literal, const std::string& what) {
  std::string quoted;
  for (size_t p = 0; p < literal.size();) {  // every char as \x{...}: nothing stays special
    const char32_t c = unicode::Next(literal, &p);
    quoted += Cat("\\x{", std::hex, static_cast<uint32_t>(c), "}");
  }
  return HfRegex(quoted, what);
}

HfRegex::~HfRegex() = default;
HfRegex::HfRegex(HfRegex&&) noexcept = default;
HfRegex& HfRegex::operator=(HfRegex&&) noexcept = default;

std::vector<std::pair<size_t, size_t>> HfRegex::FindAll(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  WC_CHECK(md != nullptr, "pcre2_match_data_create_from_pattern failed");
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t last_end = 0;
  bool have_last = false;
  size_t last_match_end = 0;
  while (last_end <= text.size()) {
    const int rc =
        impl_->jit ? pcre2_jit_match(impl_->code, subject, text.size(), last_end, 0, md, nullptr)
                   : pcre2_match(impl_->code, subject, text.size(), last_end, PCRE2_NO_UTF_CHECK,
                                 md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(md);
      throw Error(Cat("regex match failed: ", PcreMessage(rc)));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t s = ov[0], e = ov[1];
    if (s == e && have_last && last_match_end == e) {
      // onig's find_iter: no empty match right after the last one; step over one char.
      last_end += last_end < text.size() ? static_cast<size_t>(unicode::SequenceBytes(
                                               static_cast<unsigned char>(text[last_end])))
                                         : 1;
      continue;
    }
    last_end = e;
    have_last = true;
    last_match_end = e;
    out.emplace_back(s, e);
  }
  pcre2_match_data_free(md);
  return out;
}

}  // namespace wc
