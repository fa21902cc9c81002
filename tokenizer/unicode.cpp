#include "tokenizer/unicode.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "util/error.h"

namespace wc::unicode {

int SequenceBytes(unsigned char b) {
  if (b < 0x80) return 1;
  if (b >= 0xF0) return 4;
  if (b >= 0xE0) return 3;
  if (b >= 0xC0) return 2;
  return 1;
}

char32_t Next(std::string_view s, size_t* pos) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const size_t p = *pos;
  const unsigned char b0 = b(p);
  if (b0 < 0x80) {
    *pos = p + 1;
    return b0;
  }
  const int n = SequenceBytes(b0);
  char32_t c = b0 & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
  for (int i = 1; i < n; ++i) c = (c << 6) | (b(p + i) & 0x3F);
  *pos = p + n;
  return c;
}

size_t PrevCharStart(std::string_view s, size_t end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  return start;
}

void Append(char32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

namespace {

// Length of the valid sequence at s[p], or of its maximal invalid subpart as a negative number
// (at least 1 byte): the Unicode standard's table 3-7 of well-formed byte sequences.
int Sequence(std::string_view s, size_t p) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = b(p);
  if (b0 < 0x80) return 1;
  int n;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return -1;
  }
  for (int i = 1; i < n; ++i) {
    if (p + i >= s.size()) return -i;
    const unsigned char bi = b(p + i);
    const bool ok = i == 1 ? (bi >= lo && bi <= hi) : (bi >= 0x80 && bi <= 0xBF);
    if (!ok) return -i;
  }
  return n;
}

}  // namespace

bool IsValidUtf8(std::string_view s) {
  for (size_t p = 0; p < s.size();) {
    const int n = Sequence(s, p);
    if (n < 0) return false;
    p += static_cast<size_t>(n);
  }
  return true;
}

std::string ToValidUtf8(std::string_view s) {
  if (IsValidUtf8(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 16);
  for (size_t p = 0; p < s.size();) {
    const int n = Sequence(s, p);
    if (n > 0) {
      out.append(s.substr(p, static_cast<size_t>(n)));
      p += static_cast<size_t>(n);
    } else {
      out += "\xEF\xBF\xBD";
      p += static_cast<size_t>(-n);
    }
  }
  return out;
}

namespace {

utf8proc_category_t Category(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

}  // namespace

bool IsPunctuation(char32_t c) {
  if (c < 0x80)
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
           (c >= 0x7B && c <= 0x7E);
  switch (Category(c)) {
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
      return true;
    default:
      return false;
  }
}

bool IsNumeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  const utf8proc_category_t cat = Category(c);
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

bool IsWhitespace(char32_t c) {
  // The White_Space property (PropList.txt): a closed set of 25 code points.
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

bool IsMark(char32_t c) {
  if (c < 0x300) return false;
  const utf8proc_category_t cat = Category(c);
  return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC || cat == UTF8PROC_CATEGORY_ME;
}

std::string Normalize(std::string_view s, Form form) {
  if (s.empty()) return {};
  int options = UTF8PROC_STABLE;
  switch (form) {
    case Form::kNFC:
      options |= UTF8PROC_COMPOSE;
      break;
    case Form::kNFD:
      options |= UTF8PROC_DECOMPOSE;
      break;
    case Form::kNFKC:
      options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case Form::kNFKD:
      options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                          static_cast<utf8proc_ssize_t>(s.size()), &out,
                                          static_cast<utf8proc_option_t>(options));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
  WC_CHECK(n >= 0, "utf8proc_map failed on valid UTF-8: ", utf8proc_errmsg(n));
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

std::string Lowercase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t p = 0; p < s.size();) {
    const char32_t c = Next(s, &p);
    if (c == 0x130) {  // the one unconditional multi-char lowercase mapping (SpecialCasing.txt)
      out += "i\xCC\x87";
      continue;
    }
    Append(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))), &out);
  }
  return out;
}

}  // namespace wc::unicode
