#include "app/tui/text_width.h"

#include <clocale>
#include <cwchar>

namespace wc::tui {
namespace {

static_assert(sizeof(wchar_t) == 4, "wcwidth is called with Unicode scalar values (glibc wchar_t)");

bool IsCont(unsigned char c) {
  return (c & 0xC0) == 0x80;
}

bool IsControl(char32_t cp) {
  return cp < 0x20 || (cp >= 0x7F && cp < 0xA0);
}

// Start of the code point that ends at `i` (0 < i).
size_t PrevCodePoint(std::string_view s, size_t i) {
  for (size_t back = 1; back <= 4 && back <= i; ++back) {
    const size_t j = i - back;
    if (IsCont(static_cast<unsigned char>(s[j]))) continue;
    const CodePoint d = DecodeAt(s, j);
    if (d.valid && j + d.len == i) return j;
    break;
  }
  return i - 1;  // an invalid byte is a code point of its own
}

// Whether a zero-width code point at `i` joins the code point before it.
bool JoinsPrevious(std::string_view s, size_t i) {
  if (i == 0) return false;
  const CodePoint d = DecodeAt(s, i);
  if (!d.valid || !IsZeroWidth(d.cp)) return false;
  const char prev = s[PrevCodePoint(s, i)];
  return prev != '\n' && prev != '\t';
}

}  // namespace

CodePoint DecodeAt(std::string_view s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  CodePoint bad{kReplacementChar, 1, false};
  if (c < 0x80) return {c, 1, true};
  int len = 0;
  char32_t cp = 0;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    cp = c & 0x07;
  } else {
    return bad;  // continuation byte, C0/C1 (overlong) or F5..FF
  }
  if (i + len > s.size()) return bad;
  for (int k = 1; k < len; ++k) {
    const unsigned char b = static_cast<unsigned char>(s[i + k]);
    if (!IsCont(b)) return bad;
    cp = (cp << 6) | (b & 0x3F);
  }
  // Overlong 3- and 4-byte forms, surrogates, beyond U+10FFFF.
  if ((len == 3 && cp < 0x800) || (cp >= 0xD800 && cp <= 0xDFFF) || (len == 4 && cp < 0x10000) ||
      cp > 0x10FFFF)
    return bad;
  return {cp, len, true};
}

int AppendPrintable(std::string_view s, size_t begin, size_t end, std::string& out) {
  int width = 0;
  for (size_t k = begin; k < end;) {
    const CodePoint d = DecodeAt(s, k);
    k += d.len;
    if (d.valid && IsControl(d.cp)) continue;
    AppendUtf8(out, d.cp);  // U+FFFD for an invalid byte
    width += CodePointWidth(d.cp);
  }
  return width;
}

void PopUtf8Char(std::string& s) {
  if (s.empty()) return;
  size_t i = s.size() - 1;
  // Back over at most three continuation bytes to a lead byte.
  while (i > 0 && s.size() - i < 4 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  const CodePoint cp = DecodeAt(s, i);
  s.resize(cp.valid && i + cp.len == s.size() ? i : s.size() - 1);
}

void AppendUtf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

int CodePointWidth(char32_t cp) {
  if (IsControl(cp)) return 1;
  const int w = wcwidth(static_cast<wchar_t>(cp));
  return w < 0 ? 1 : w;
}

bool IsZeroWidth(char32_t cp) {
  return !IsControl(cp) && wcwidth(static_cast<wchar_t>(cp)) == 0;
}

size_t NextChar(std::string_view s, size_t i) {
  const CodePoint first = DecodeAt(s, i);
  size_t k = i + first.len;
  if (first.cp == '\n' || first.cp == '\t') return k;
  while (k < s.size()) {
    const CodePoint d = DecodeAt(s, k);
    if (!d.valid || !IsZeroWidth(d.cp)) break;
    k += d.len;
  }
  return k;
}

size_t PrevChar(std::string_view s, size_t i) {
  size_t j = PrevCodePoint(s, i);
  while (JoinsPrevious(s, j)) j = PrevCodePoint(s, j);
  return j;
}

bool IsCharBoundary(std::string_view s, size_t i) {
  if (i == 0 || i >= s.size()) return true;
  // Inside a valid multi-byte sequence that starts up to 3 bytes before?
  for (size_t back = 1; back <= 3 && back <= i; ++back) {
    const size_t j = i - back;
    if (IsCont(static_cast<unsigned char>(s[j]))) continue;
    const CodePoint d = DecodeAt(s, j);
    if (d.valid && j + d.len > i) return false;
    break;
  }
  return !JoinsPrevious(s, i);
}

int DisplayWidth(std::string_view s) {
  int w = 0;
  for (size_t i = 0; i < s.size();) {
    const CodePoint d = DecodeAt(s, i);
    i += d.len;
    if (!d.valid) {
      ++w;
    } else if (!IsControl(d.cp)) {
      w += CodePointWidth(d.cp);
    }
  }
  return w;
}

std::string FitWidth(std::string_view s, int width, bool ellipsis) {
  std::string out;
  if (width <= 0) return out;
  const bool cut = DisplayWidth(s) > width;
  const int room = cut && ellipsis ? width - 1 : width;
  int used = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t next = NextChar(s, i);
    std::string piece;
    int w = 0;
    for (size_t k = i; k < next;) {
      const CodePoint d = DecodeAt(s, k);
      k += d.len;
      if (!d.valid) {
        piece += kReplacementUtf8;
        ++w;
      } else if (!IsControl(d.cp)) {
        AppendUtf8(piece, d.cp);
        w += CodePointWidth(d.cp);
      }
    }
    if (used + w > room) break;
    out += piece;
    used += w;
    i = next;
  }
  if (cut && ellipsis) out += "\xE2\x80\xA6";
  return out;
}

bool SetUtf8Locale() {
  if (std::setlocale(LC_CTYPE, "") != nullptr && Utf8WidthsActive()) return true;
  for (const char* name : {"C.UTF-8", "C.utf8", "en_US.UTF-8"}) {
    if (std::setlocale(LC_CTYPE, name) != nullptr && Utf8WidthsActive()) return true;
  }
  return false;
}

bool Utf8WidthsActive() {
  return wcwidth(static_cast<wchar_t>(0x4E00)) == 2;  // 一
}

}  // namespace wc::tui
