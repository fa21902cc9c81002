#include "tokenizer/llama_unicode.h"

#include <algorithm>

#include "tokenizer/unicode.h"

#include <utf8proc.h>

namespace wc::llama_unicode {

CptFlags Flags(char32_t c) {
  CptFlags f;
  if (c > 0x10FFFF) return f;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
      f.category = CptFlags::kLetter;
      break;
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
      f.category = CptFlags::kMark;
      break;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      f.category = CptFlags::kNumber;
      break;
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
      f.category = CptFlags::kPunctuation;
      break;
    case UTF8PROC_CATEGORY_SM:
    case UTF8PROC_CATEGORY_SC:
    case UTF8PROC_CATEGORY_SK:
    case UTF8PROC_CATEGORY_SO:
      f.category = CptFlags::kSymbol;
      break;
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
      f.category = CptFlags::kSeparator;
      break;
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
      f.category = CptFlags::kControl;
      break;
    default:
      // Cn. llama.cpp's table is Unicode 15.1; utf8proc 2.8's is 15.0: CJK Extension I
      // (U+2EBF0-U+2EE5D) is the block that differs for tokenizing.
      if (c >= 0x2EBF0 && c <= 0x2EE5D) f.category = CptFlags::kLetter;
      break;
  }
  // The White_Space property (PropList.txt), as llama.cpp's unicode_set_whitespace lists it.
  f.whitespace = (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
                 (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
                 c == 0x205F || c == 0x3000;
  return f;
}

char32_t ToLower(char32_t c) {
  if (c > 0x10FFFF) return c;
  return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
}

std::vector<char32_t> Codepoints(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const auto cont = [&](size_t i) { return i < s.size() && (b(i) & 0xC0) == 0x80; };
  for (size_t p = 0; p < s.size();) {
    const unsigned char b0 = b(p);
    int n = 0;
    char32_t c = 0;
    if (b0 < 0x80) {
      n = 1;
      c = b0;
    } else if ((b0 & 0xE0) == 0xC0) {
      n = 2;
      c = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
      n = 3;
      c = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
      n = 4;
      c = b0 & 0x07;
    }
    bool ok = n > 0;
    for (int i = 1; ok && i < n; ++i) ok = cont(p + static_cast<size_t>(i));
    if (!ok) {
      out.push_back(0xFFFD);
      ++p;
      continue;
    }
    for (int i = 1; i < n; ++i) c = (c << 6) | (b(p + static_cast<size_t>(i)) & 0x3F);
    out.push_back(c);
    p += static_cast<size_t>(n);
  }
  return out;
}

bool AppendUtf8(char32_t c, std::string* out) {
  if (c > 0x10FFFF) return false;
  unicode::Append(c, out);
  return true;
}

size_t LeadLength(unsigned char b) {
  constexpr size_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[b >> 4];
}

std::vector<MergeSymbol> CharacterSymbols(std::string_view text) {
  std::vector<MergeSymbol> syms;
  for (size_t off = 0; off < text.size();) {
    MergeSymbol s;
    s.offset = off;
    s.n = std::min(LeadLength(static_cast<unsigned char>(text[off])), text.size() - off);
    off += s.n;
    s.prev = static_cast<int>(syms.size()) - 1;
    s.next = off == text.size() ? -1 : static_cast<int>(syms.size()) + 1;
    syms.push_back(s);
  }
  return syms;
}

}  // namespace wc::llama_unicode
